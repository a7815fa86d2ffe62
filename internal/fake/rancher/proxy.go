package rancher

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testca"
)

// proxyPrefix is Rancher's auth proxy: /k8s/clusters/<id>/<kube path>.
const proxyPrefix = "/k8s/clusters/"

// proxyState is the fake's part that forwards to a kube-apiserver: every
// cluster is served by the same one (the suite's), as the admin of its
// rest.Config, where Rancher impersonates the token's user.
type proxyState struct {
	kubeURL        *url.URL
	kubeRT         http.RoundTripper
	aces           map[string]*aceEndpoint // by cluster id, started on first use
	disconnectWait time.Duration
}

// aceEndpoint is a cluster's authorized cluster endpoint: its own TLS
// listener with its own CA, as a downstream kube-apiserver would be.
type aceEndpoint struct {
	srv   *httptest.Server
	caPEM []byte
}

func (a *aceEndpoint) fqdn() string { return a.srv.Listener.Addr().String() }

func (f *Fake) initProxy() {
	f.aces = map[string]*aceEndpoint{}
	f.disconnectWait = time.Second
}

// SetKube makes the proxy and the authorized cluster endpoints forward to
// the kube-apiserver of cfg, with cfg's credentials. Until it is called
// they answer 502.
func (f *Fake) SetKube(cfg *rest.Config) error {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return fmt.Errorf("kube transport: %w", err)
	}
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return fmt.Errorf("kube host: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kubeURL, f.kubeRT = u, rt
	return nil
}

// SetDisconnectWait sets how long the proxy waits for a disconnected
// cluster's agent before it answers 500 (default 1s; Rancher waits about
// 20s).
func (f *Fake) SetDisconnectWait(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disconnectWait = d
}

// ACE returns the server URL (https://127.0.0.1:<port>) and the CA (PEM)
// of the authorized cluster endpoint of ACE cluster id, starting it if it
// has not served yet.
func (f *Fake) ACE(id string) (server string, caPEM []byte, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.clusters[id]; !ok || !c.ACE {
		return "", nil, fmt.Errorf("cluster %s is not an ACE cluster of the fake", id)
	}
	a, err := f.aceFor(id)
	if err != nil {
		return "", nil, err
	}
	return "https://" + a.fqdn(), a.caPEM, nil
}

// serveProxy serves /k8s/clusters/<id>/...: the API token or a token
// scoped to <id>, then the agent's tunnel (a disconnected cluster is a
// 500 after the wait), then the kube-apiserver.
func (f *Fake) serveProxy(w http.ResponseWriter, r *http.Request) {
	id, path, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, proxyPrefix), "/")
	f.mu.Lock()
	down := f.down
	_, msg := f.authorize(r, id, false)
	c, known := f.clusters[id]
	target, rt, wait := f.kubeURL, f.kubeRT, f.disconnectWait
	f.mu.Unlock()
	switch {
	case down:
		writeRancher(w, http.StatusInternalServerError, []byte(`{"type":"error","status":"500","code":"ServerError","message":"Internal error occurred: etcdserver: request timed out"}`))
	case msg != "":
		writeUnauthorized(w, msg)
	case !known:
		writeAPIError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("clusters.management.cattle.io %q not found", id))
	case c.Disconnected:
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("cluster agent disconnected"))
	default:
		forward(w, r, target, rt, "/"+path)
	}
}

// serveACE serves cluster id's authorized cluster endpoint: only a token
// scoped to id and synced to the cluster passes (kube-api-auth checks the
// ClusterAuthTokens the agent synced), answered as a kube-apiserver
// answers.
func (f *Fake) serveACE(w http.ResponseWriter, r *http.Request, id string) {
	f.mu.Lock()
	t, msg := f.authorize(r, id, true)
	if msg == "" && !t.Synced {
		msg = "token not synced to the cluster"
	}
	target, rt := f.kubeURL, f.kubeRT
	f.mu.Unlock()
	if msg != "" {
		writeRancher(w, http.StatusUnauthorized, []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
		return
	}
	forward(w, r, target, rt, r.URL.Path)
}

// forward sends the request to the kube-apiserver at path, with rt's
// credentials in place of the caller's.
func forward(w http.ResponseWriter, r *http.Request, target *url.URL, rt http.RoundTripper, path string) {
	if rt == nil {
		http.Error(w, "fake rancher: no kube-apiserver to forward to (SetKube)", http.StatusBadGateway)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path, pr.Out.URL.RawPath = path, ""
			pr.Out.Header.Del("Authorization")
			for k := range pr.Out.Header {
				if strings.HasPrefix(k, "Impersonate-") {
					pr.Out.Header.Del(k)
				}
			}
		},
		Transport:     rt,
		FlushInterval: -1, // watches stream
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				http.Error(w, "fake rancher: forward: "+err.Error(), http.StatusBadGateway)
			}
		},
	}
	rp.ServeHTTP(w, r)
}

// aceFor returns cluster id's authorized cluster endpoint, starting it.
// Called with f.mu held.
func (f *Fake) aceFor(id string) (*aceEndpoint, error) {
	if a := f.aces[id]; a != nil {
		return a, nil
	}
	cert, caPEM, err := testca.ServingCert(id+"-ace-ca", []string{"127.0.0.1", "localhost"})
	if err != nil {
		return nil, fmt.Errorf("ace %s: %w", id, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serveACE(w, r, id) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	a := &aceEndpoint{srv: srv, caPEM: caPEM}
	f.aces[id] = a
	return a, nil
}

// aceStale reports an endpoint whose cluster is gone or no longer ACE.
// Called with f.mu held.
func (f *Fake) aceStale(id string) bool {
	c, ok := f.clusters[id]
	return !ok || !c.ACE
}

// dropACE forgets the endpoints of the clusters stale reports and returns
// them, to be closed (closeACE) once f.mu is released: their handlers
// take it. Called with f.mu held.
func (f *Fake) dropACE(stale func(string) bool) []*aceEndpoint {
	var out []*aceEndpoint
	for id, a := range f.aces {
		if stale(id) {
			out = append(out, a)
			delete(f.aces, id)
		}
	}
	return out
}

// closeACE stops endpoints, cutting the connections still open.
func closeACE(aces []*aceEndpoint) {
	for _, a := range aces {
		a.srv.CloseClientConnections()
		a.srv.Close()
	}
}

// renderACE sets the cluster object's localClusterAuthEndpoint (and its
// appliedSpec's): enabled with the endpoint's fqdn and CA for an ACE
// cluster, else disabled. Called with f.mu held.
func (f *Fake) renderACE(obj map[string]any, c Cluster) error {
	lcae := map[string]any{"enabled": false, "type": "/v3/schemas/localClusterAuthEndpoint"}
	if c.ACEFQDN != "" {
		lcae = map[string]any{"enabled": true, "fqdn": c.ACEFQDN, "type": "/v3/schemas/localClusterAuthEndpoint"}
	}
	if c.ACE {
		a, err := f.aceFor(c.ID)
		if err != nil {
			return err
		}
		lcae = map[string]any{"enabled": true, "fqdn": a.fqdn(), "caCerts": string(a.caPEM),
			"type": "/v3/schemas/localClusterAuthEndpoint"}
	}
	obj["localClusterAuthEndpoint"] = lcae
	if spec, ok := obj["appliedSpec"].(map[string]any); ok {
		spec["localClusterAuthEndpoint"] = lcae
	}
	return nil
}
