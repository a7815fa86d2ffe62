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
// token webhook (cloudAuthn) when it is a cloud's. It remembers the host
// each token was sent to, so that the webhook can judge a token as the
// cluster at that host would (cloudAuthn.routeBy).
type clusterFront struct {
	srv   *httptest.Server
	caPEM []byte

	mu     sync.Mutex
	hosts  []string          // Host of each request
	tokens map[string]string // the host each bearer token (by digest) was sent to
}

// newClusterFront serves hosts (wildcards allowed, as in certificates).
func newClusterFront(t *testing.T, hosts ...string) *clusterFront {
	t.Helper()
	f := &clusterFront{tokens: map[string]string{}}
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
		host := strings.ToLower(strings.TrimSuffix(r.Host, ":443"))
		f.mu.Lock()
		f.hosts = append(f.hosts, host)
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			f.tokens[hashHex([]byte(tok))] = host
		}
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
		if h == strings.ToLower(host) {
			n++
		}
	}
	return n
}

// hostOf is the host a bearer token was sent to, as the front saw it
// before it passed the request on.
func (f *clusterFront) hostOf(token string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.tokens[hashHex([]byte(token))]
	return h, ok
}
