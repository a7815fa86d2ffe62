package e2e

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/front"
)

// connectProxy is the HTTPS proxy (HTTPS_PROXY) that argocd-cluster-check
// and argocd-k8s-auth reach the cloud through (internal/fake/front): it
// tunnels a CONNECT to a host that one of its routes matches to that
// route's local TLS server, which holds a certificate for the host signed
// by a test CA; every other CONNECT is refused.
type connectProxy struct{ *front.Proxy }

type proxyRoute = front.Route

// newConnectProxy starts a proxy with routes, pattern → address, stopped
// at the end of the test.
func newConnectProxy(t *testing.T, routes ...proxyRoute) *connectProxy {
	t.Helper()
	p := front.NewProxy(routes...)
	t.Cleanup(p.Close)
	return &connectProxy{p}
}

func (p *connectProxy) seen() []string { return p.Seen() }

// startHostTLS starts h over TLS on loopback with a certificate for hosts
// (wildcards allowed) signed by a new CA named name, written to a file for
// SSL_CERT_FILE or AWS_CA_BUNDLE; the server stops at the end of the test.
func startHostTLS(t *testing.T, name string, hosts []string, h http.Handler) (srv *httptest.Server, caPEM []byte, caFile string) {
	t.Helper()
	srv, caPEM, caFile, err := front.StartTLS(name, hosts, h, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, caPEM, caFile
}
