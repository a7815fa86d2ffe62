package e2e

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"sync"
	"testing"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testca"
)

// connectProxy is the HTTPS proxy (HTTPS_PROXY) that argocd-cluster-check
// and argocd-k8s-auth reach the cloud through: it tunnels a CONNECT to a
// host that one of its routes matches (a path.Match pattern of the host,
// port 443) to that route's local TLS server, which holds a certificate
// for the host signed by a test CA; every other CONNECT is refused.
// Nothing leaves the machine, and the clients keep their own TLS checks.
type connectProxy struct {
	srv    *httptest.Server
	routes []proxyRoute

	mu       sync.Mutex
	connects []string // CONNECT targets, refused ones marked so
}

type proxyRoute struct{ pattern, addr string }

// newConnectProxy starts a proxy with routes, pattern → address.
func newConnectProxy(t *testing.T, routes ...proxyRoute) *connectProxy {
	t.Helper()
	p := &connectProxy{routes: routes}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

// URL is the proxy's, for HTTPS_PROXY.
func (p *connectProxy) URL() string { return p.srv.URL }

func (p *connectProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.connects...)
}

func (p *connectProxy) serve(w http.ResponseWriter, r *http.Request) {
	host, port, _ := net.SplitHostPort(r.Host)
	addr := ""
	for _, rt := range p.routes {
		if ok, _ := path.Match(rt.pattern, host); ok && port == "443" {
			addr = rt.addr
			break
		}
	}
	p.mu.Lock()
	if addr == "" || r.Method != http.MethodConnect {
		p.connects = append(p.connects, "refused "+r.Method+" "+r.Host)
	} else {
		p.connects = append(p.connects, r.Method+" "+r.Host)
	}
	p.mu.Unlock()
	if addr == "" || r.Method != http.MethodConnect {
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

// startHostTLS starts h over TLS on loopback with a certificate for hosts
// (wildcards allowed) signed by a new CA named name, which it writes to a
// file for SSL_CERT_FILE or AWS_CA_BUNDLE; the server stops at the end of
// the test.
func startHostTLS(t *testing.T, name string, hosts []string, h http.Handler) (srv *httptest.Server, caPEM []byte, caFile string) {
	t.Helper()
	cert, caPEM, err := testca.ServingCert(name, hosts)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), name+".pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, caPEM, caFile
}
