// Package front holds what stands between a client under test and the
// fakes it must reach at their real host names: an HTTPS proxy that
// tunnels CONNECTs for chosen hosts to local TLS servers (Proxy), such a
// server with a certificate for those hosts signed by a test CA
// (StartTLS), and a cluster front that serves cloud clusters' API server
// names and passes every request, its bearer token included, to a real
// kube-apiserver (ClusterFront). Nothing leaves the machine, and clients
// keep their own TLS checks. See README.md.
package front

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testca"
)

// Route sends a CONNECT to a host that Pattern matches (path.Match, on
// the host in lower case) and to Port (443 when empty) to the local
// address Addr.
type Route struct{ Pattern, Addr, Port string }

// matches reports whether the route takes a CONNECT to host and port.
func (rt Route) matches(host, port string) bool {
	want := rt.Port
	if want == "" {
		want = "443"
	}
	ok, _ := path.Match(rt.Pattern, strings.ToLower(host))
	return ok && port == want
}

// Proxy is an HTTPS proxy (HTTPS_PROXY) that tunnels a CONNECT to a host
// one of its routes matches to that route's address; every other request
// is refused with 403.
type Proxy struct {
	srv    *httptest.Server
	routes []Route

	mu       sync.Mutex
	connects []string // CONNECT targets, refused ones marked so
}

// NewProxy starts a proxy with routes. Close stops it.
func NewProxy(routes ...Route) *Proxy {
	p := &Proxy{routes: routes}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// URL is the proxy's, for HTTPS_PROXY.
func (p *Proxy) URL() string { return p.srv.URL }

// Close stops the proxy.
func (p *Proxy) Close() { p.srv.Close() }

// Seen returns the CONNECT targets so far ("CONNECT host:port"), the
// refused ones as "refused METHOD host".
func (p *Proxy) Seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.connects)
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	host, port, _ := net.SplitHostPort(r.Host)
	addr := ""
	for _, rt := range p.routes {
		if rt.matches(host, port) {
			addr = rt.Addr
			break
		}
	}
	refused := addr == "" || r.Method != http.MethodConnect
	p.mu.Lock()
	if refused {
		p.connects = append(p.connects, "refused "+r.Method+" "+r.Host)
	} else {
		p.connects = append(p.connects, r.Method+" "+r.Host)
	}
	p.mu.Unlock()
	if refused {
		http.Error(w, "this proxy tunnels only to the test's fakes", http.StatusForbidden)
		return
	}
	tunnel(w, addr)
}

// tunnel answers a CONNECT by joining the client's connection to addr,
// with what the client sent after the CONNECT and the server has read.
func tunnel(w http.ResponseWriter, addr string) {
	upstream, err := net.Dial("tcp", addr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	_, _ = conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	go func() {
		if n := brw.Reader.Buffered(); n > 0 {
			early, _ := brw.Peek(n)
			_, _ = upstream.Write(early)
		}
		_, _ = io.Copy(upstream, conn)
		_ = upstream.Close()
	}()
	_, _ = io.Copy(conn, upstream)
	_ = conn.Close()
}

// StartTLS starts h over TLS on loopback with a certificate for hosts
// (wildcards allowed) signed by a new CA named name, and writes the CA to
// dir/<name>.pem for SSL_CERT_FILE or AWS_CA_BUNDLE. The caller closes the
// server.
func StartTLS(name string, hosts []string, h http.Handler, dir string) (srv *httptest.Server, caPEM []byte, caFile string, err error) {
	cert, caPEM, err := testca.ServingCert(name, hosts)
	if err != nil {
		return nil, nil, "", fmt.Errorf("front: %w", err)
	}
	caFile = filepath.Join(dir, name+".pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		return nil, nil, "", fmt.Errorf("front: %w", err)
	}
	srv = httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	return srv, caPEM, caFile, nil
}
