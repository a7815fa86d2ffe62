package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// clusterFront stands at the API server addresses the fake clouds report
// (EKS endpoints, AKS FQDNs; reached through a connectProxy) with a
// certificate for them signed by its own CA, which the fakes hand out as
// the clusters' CA, and passes every request, its bearer token
// included, to the suite's kube-apiserver. It adds no credential of its
// own: the apiserver authenticates the token the client sent, through its
// token webhook (cloudAuthn) when it is a cloud's.
type clusterFront struct {
	srv   *httptest.Server
	caPEM []byte

	mu    sync.Mutex
	hosts []string // Host of each request
}

// newClusterFront serves hosts (wildcards allowed, as in certificates).
func newClusterFront(t *testing.T, hosts ...string) *clusterFront {
	t.Helper()
	f := &clusterFront{}
	base, _, err := rest.DefaultServerUrlFor(e.rest)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(rest.AnonymousClientConfig(e.rest))
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Transport: rt, Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: base.Scheme, Host: base.Host})
	}}
	f.srv, f.caPEM, _ = startHostTLS(t, "e2e-cloud-cluster-ca", hosts, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hosts = append(f.hosts, r.Host)
		f.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	return f
}

// addr is where a connectProxy tunnels the clusters' hosts.
func (f *clusterFront) addr() string { return f.srv.Listener.Addr().String() }

// served says how many requests came for host.
func (f *clusterFront) served(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, h := range f.hosts {
		if strings.TrimSuffix(h, ":443") == host {
			n++
		}
	}
	return n
}
