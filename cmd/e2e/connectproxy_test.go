package e2e

import (
	"crypto/rsa"
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
	"time"

	"github.com/golang-jwt/jwt/v5"
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

// tunnel answers a CONNECT by joining the client's connection to addr.
func tunnel(w http.ResponseWriter, addr string) {
	upstream, err := net.Dial("tcp", addr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	_, _ = conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	go func() {
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
	cert, caPEM, err := newServingCA(name, hosts)
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

// writeServiceAccountToken writes a ServiceAccount token as a cluster's
// OIDC issuer signs it with key for audience, valid for an hour, into a
// file, as Kubernetes projects one into a pod: what IRSA and Azure
// workload identity exchange for cloud credentials.
func writeServiceAccountToken(t *testing.T, key *rsa.PrivateKey, issuer, subject, audience string) string {
	t.Helper()
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer: issuer, Subject: subject, Audience: jwt.ClaimStrings{audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
	}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}
