package front_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/front"
)

// client reaches every host through proxy and trusts caPEM only.
func client(t *testing.T, proxy *front.Proxy, caPEM []byte) *http.Client {
	t.Helper()
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	u, err := url.Parse(proxy.URL())
	require.NoError(t, err)
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestProxyTunnelsOnlyItsRoutes: a client that verifies TLS reaches the
// local server at the real host name through the proxy; a host without a
// route is refused and never dialled.
func TestProxyTunnelsOnlyItsRoutes(t *testing.T) {
	srv, caPEM, caFile, err := front.StartTLS("test-ca", []string{"*.example.test"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello "+r.Host)
	}), t.TempDir())
	require.NoError(t, err)
	defer srv.Close()
	assert.FileExists(t, caFile)
	proxy := front.NewProxy(front.Route{Pattern: "*.example.test", Addr: srv.Listener.Addr().String()})
	defer proxy.Close()
	c := client(t, proxy, caPEM)

	resp, err := c.Get("https://api.example.test/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, "hello api.example.test", string(body))

	_, err = c.Get("https://elsewhere.invalid/")
	require.Error(t, err, "no route: the CONNECT is refused")
	assert.Equal(t, []string{"CONNECT api.example.test:443", "refused CONNECT elsewhere.invalid:443"}, proxy.Seen())
}

// TestProxyRoutesByPort: a route with a port takes CONNECTs to that port
// only (an ARO API server listens on 6443); one without takes 443 only.
func TestProxyRoutesByPort(t *testing.T) {
	srv, caPEM, _, err := front.StartTLS("test-ca", []string{"api.example.test", "*.other.test"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello "+r.Host)
	}), t.TempDir())
	require.NoError(t, err)
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	proxy := front.NewProxy(front.Route{Pattern: "api.example.test", Addr: addr, Port: "6443"}, front.Route{Pattern: "*.other.test", Addr: addr})
	defer proxy.Close()
	c := client(t, proxy, caPEM)

	resp, err := c.Get("https://API.example.test:6443/")
	require.NoError(t, err, "host patterns match in lower case")
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, "hello API.example.test:6443", string(body))
	for _, u := range []string{"https://api.example.test/", "https://x.other.test:6443/"} {
		_, err = c.Get(u)
		assert.Error(t, err, "%s: another port than the route's", u)
	}
	assert.Equal(t, []string{"CONNECT API.example.test:6443", "refused CONNECT api.example.test:443", "refused CONNECT x.other.test:6443"}, proxy.Seen())
}

// TestClusterFrontPassesTheToken: the front answers for the clusters'
// names with its CA, passes the bearer token to the apiserver, adds no
// credential, and remembers where each token was sent.
func TestClusterFrontPassesTheToken(t *testing.T) {
	var got []string
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization"))
		_, _ = io.WriteString(w, `{"gitVersion":"v1.32.2"}`)
	}))
	defer apiserver.Close()
	f, err := front.NewClusterFront(&rest.Config{Host: apiserver.URL, BearerToken: "the-apiserver-admin"}, "cluster-ca", t.TempDir(), "*.cluster.test")
	require.NoError(t, err)
	defer f.Close()
	proxy := front.NewProxy(front.Route{Pattern: "*.cluster.test", Addr: f.Addr()})
	defer proxy.Close()

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://a.cluster.test/version", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer cluster-token")
	resp, err := client(t, proxy, f.CAPEM()).Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []string{"/version Bearer cluster-token"}, got, "the client's token, never the front's configuration's")
	assert.Equal(t, 1, f.Served("a.cluster.test"))
	host, ok := f.HostOf("cluster-token")
	assert.True(t, ok)
	assert.Equal(t, "a.cluster.test", host)
}
