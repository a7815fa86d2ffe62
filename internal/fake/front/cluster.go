package front

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// ClusterFront stands at the API server addresses fake clouds report (EKS
// endpoints, AKS FQDNs; reached through a Proxy) with a certificate for
// them signed by its own CA, which the fakes hand out as the clusters' CA,
// and passes every request, its bearer token included, to a real
// kube-apiserver. It adds no credential of its own: the apiserver
// authenticates the token the client sent (through its token webhook,
// when it is a cloud's). It remembers the host each token was sent to, so
// that the webhook can judge a token as the cluster at that host would.
type ClusterFront struct {
	srv   *httptest.Server
	caPEM []byte

	mu     sync.Mutex
	hosts  []string          // Host of each request
	tokens map[string]string // the host each bearer token (by digest) was sent to
}

// NewClusterFront serves hosts (wildcards allowed, as in certificates) in
// front of the apiserver of cfg, whose credentials it does not use; its
// CA, named name, is written into dir. Close stops it.
func NewClusterFront(cfg *rest.Config, name, dir string, hosts ...string) (*ClusterFront, error) {
	f := &ClusterFront{tokens: map[string]string{}}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("front: %w", err)
	}
	rt, err := rest.TransportFor(rest.AnonymousClientConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("front: %w", err)
	}
	proxy := &httputil.ReverseProxy{Transport: rt, Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: base.Scheme, Host: base.Host})
	}}
	f.srv, f.caPEM, _, err = StartTLS(name, hosts, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(strings.TrimSuffix(r.Host, ":443"))
		f.mu.Lock()
		f.hosts = append(f.hosts, host)
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			f.tokens[digest(tok)] = host
		}
		f.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}), dir)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Addr is where a Proxy tunnels the clusters' hosts.
func (f *ClusterFront) Addr() string { return f.srv.Listener.Addr().String() }

// CAPEM is the CA of the front's certificate: the clusters' CA.
func (f *ClusterFront) CAPEM() []byte { return f.caPEM }

// Close stops the front.
func (f *ClusterFront) Close() { f.srv.Close() }

// Served says how many requests came for host.
func (f *ClusterFront) Served(host string) int {
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

// HostOf is the host a bearer token was sent to, as the front saw it
// before it passed the request on.
func (f *ClusterFront) HostOf(token string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.tokens[digest(token)]
	return h, ok
}
