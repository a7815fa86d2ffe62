package rancher

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

func TestTLS(t *testing.T) {
	t.Run("caFile trusts the fake and is the caData", func(t *testing.T) {
		f := newFake(t, true)
		f.ServeFixturePages(true)
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw})
		cfg := config(t, f)
		cfg.CAFile = filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, os.WriteFile(cfg.CAFile, certPEM, 0o600))
		s := newTestSource(t, "rancher-a", cfg, testOptions{})
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		require.Len(t, got, 3)
		for _, c := range got {
			assert.Equal(t, base64.StdEncoding.EncodeToString(certPEM), c.CA.Data())
			assert.True(t, strings.HasPrefix(c.Server, "https://127.0.0.1:"), c.Server)
		}
		assert.Zero(t, paths(f.TakeRequests())["/v3/settings/cacerts"], "caFile replaces the cacerts setting")
	})
	t.Run("without caFile the cacerts setting is the caData", func(t *testing.T) {
		f := newFake(t, true)
		f.ServeFixturePages(true)
		s := newTestSource(t, "rancher-a", config(t, f), testOptions{HTTPClient: f.Client()})
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		require.Len(t, got, 3)
		assert.Equal(t, b64(f.CACerts()), got[0].CA.Data())
	})
	t.Run("empty cacerts gives no caData", func(t *testing.T) {
		f := newFake(t, true)
		f.ServeFixturePages(true)
		f.SetCACerts("")
		s := newTestSource(t, "rancher-a", config(t, f), testOptions{HTTPClient: f.Client()})
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		for _, c := range got {
			assert.Empty(t, c.CA.Data())
			assert.True(t, c.Ready)
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		f := newFake(t, true)
		f.ServeFixturePages(true)
		s := newTestSource(t, "rancher-a", config(t, f), testOptions{})
		_, err := s.Clusters(t.Context())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "certificate")
		assert.Equal(t, 1.0, errCount(t, s, upstream.KindTLS, opAPIRoot))
	})
}

func TestTokenRotation(t *testing.T) {
	f := newFake(t, false)
	f.ServeFixturePages(true)
	cfg := config(t, f)
	s := newTestSource(t, "rancher-a", cfg, testOptions{})
	_, err := s.Clusters(t.Context())
	require.NoError(t, err)
	f.TakeRequests()

	const rotated = "token-fghij:rotatedrotatedrotatedrotatedrotatedrotatedrotated"
	require.NoError(t, os.WriteFile(cfg.Token.File, []byte(rotated+"\n"), 0o600))
	f.SetAPIToken(rotated)
	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	assert.Len(t, got, 3)
	reqs := f.TakeRequests()
	assert.Equal(t, map[string]int{"/v3": 1, "/v3/schemas": 1, "/v3/settings/cacerts": 1, "/v3/clusters": 2}, paths(reqs),
		"the client is rebuilt for the new token")
	for _, r := range reqs {
		if r.Path != "/v3/settings/cacerts" {
			assert.Equal(t, "Bearer "+rotated, r.Authorization, r.Path)
		}
	}
}

func TestLinksStayOnTheConfiguredServer(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	t.Cleanup(other.Close)

	t.Run("next and schema links on another host are requested on the configured one", func(t *testing.T) {
		f := newFake(t, false)
		f.SetLinkBase(other.URL)
		f.ServeFixturePages(true) // next: <other>/v3/clusters?limit=2&marker=c-m-2x7kqz4b
		s := newTestSource(t, "rancher-a", config(t, f), testOptions{})
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		assert.Len(t, got, 3)
		assert.Zero(t, elsewhere.Load(), "no request, so no token, went to the other host")
		assert.Equal(t, 2, paths(f.TakeRequests())["/v3/clusters"])
	})
	t.Run("a plain http link from an https server is requested over https", func(t *testing.T) {
		f := newFake(t, true)
		f.SetLinkBase(strings.Replace(f.URL(), "https://", "http://", 1))
		f.ServeFixturePages(true)
		s := newTestSource(t, "rancher-a", config(t, f), testOptions{HTTPClient: f.Client()})
		_, err := s.Clusters(t.Context())
		require.NoError(t, err)
	})
	t.Run("a redirect to another host is refused", func(t *testing.T) {
		f := newFake(t, false)
		f.ServeFixturePages(true)
		f.InterceptPages(func(w http.ResponseWriter, r *http.Request, page int) bool {
			if page != 2 {
				return false
			}
			http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
			return true
		})
		s := newTestSource(t, "rancher-a", config(t, f), testOptions{})
		_, err := s.Clusters(t.Context())
		require.ErrorContains(t, err, "refused to send a request outside the configured rancher url")
		assert.Zero(t, elsewhere.Load())
		assert.Equal(t, 1.0, errCount(t, s, upstream.KindConfig, opClusters))
	})
}

// TestRequestsPerListing checks that a listing costs one request per page
// plus the cacerts setting (and /v3 and its schemas when the client is
// built), nothing per cluster. BenchmarkListClusters reports the same for
// 10,000 clusters.
func TestRequestsPerListing(t *testing.T) {
	for _, tc := range []struct{ n, limit int }{{25, 10}, {30, 10}, {7, 1000}, {0, 1000}} {
		t.Run(fmt.Sprintf("%d clusters by %d", tc.n, tc.limit), func(t *testing.T) {
			f := newFake(t, false)
			f.Generate(tc.n)
			cfg := config(t, f)
			cfg.PageLimit = tc.limit
			s := newTestSource(t, "rancher-a", cfg, testOptions{})
			pages := max(1, (tc.n+tc.limit-1)/tc.limit) // an empty list is one page

			got, err := s.Clusters(t.Context())
			require.NoError(t, err)
			require.Len(t, got, tc.n)
			assert.Equal(t, map[string]int{"/v3": 1, "/v3/schemas": 1, "/v3/settings/cacerts": 1, "/v3/clusters": pages}, paths(f.TakeRequests()))

			got, err = s.Clusters(t.Context())
			require.NoError(t, err)
			require.Len(t, got, tc.n)
			assert.Equal(t, map[string]int{"/v3/settings/cacerts": 1, "/v3/clusters": pages}, paths(f.TakeRequests()),
				"the client is reused while the token is unchanged")
		})
	}
}

func TestOnOrigin(t *testing.T) {
	s := &Source{origin: &url.URL{Scheme: "https", Host: "rancher.example.com"}, log: slog.New(slog.DiscardHandler)}
	l := &listing{s: s}
	for in, want := range map[string]string{
		"https://rancher.example.com/v3/clusters?limit=2&marker=c-1":     "https://rancher.example.com/v3/clusters?limit=2&marker=c-1",
		"https://rancher.example.com:443/v3/clusters?marker=c-1":         "https://rancher.example.com:443/v3/clusters?marker=c-1",
		"https://RANCHER.example.com/v3/clusters":                        "https://RANCHER.example.com/v3/clusters",
		"http://rancher.example.com/v3/clusters?marker=c-1":              "https://rancher.example.com/v3/clusters?marker=c-1",
		"https://rancher.cattle-system.svc/v3/clusters?marker=c-1":       "https://rancher.example.com/v3/clusters?marker=c-1",
		"https://user:pw@rancher.example.com/v3/clusters":                "https://rancher.example.com/v3/clusters",
		"/v3/clusters?marker=c-1":                                        "https://rancher.example.com/v3/clusters?marker=c-1",
		"https://rancher.example.com:8443/v3/clusters?limit=2&marker=c1": "https://rancher.example.com/v3/clusters?limit=2&marker=c1",
	} {
		got, err := l.onOrigin(in)
		require.NoError(t, err)
		assert.Equal(t, want, got, in)
	}
	_, err := l.onOrigin("https://[::1")
	require.Error(t, err)
	assert.True(t, s.warnedOrigin)
}

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want, err string
	}{
		{name: "trailing newline", content: "token-abcde:xyz\n", want: "token-abcde:xyz"},
		{name: "empty", content: " \n", err: "empty"},
		{name: "two lines", content: "token-abcde:xyz\ntoken-fghij:uvw\n", err: "contains whitespace or control characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := sources.SecretRef{File: writeToken(t, dir, "")}
			require.NoError(t, os.WriteFile(ref.File, []byte(tc.content), 0o600))
			got, err := readToken(ref)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.NotContains(t, err.Error(), "xyz")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := readToken(sources.SecretRef{Env: "RANCHER_TEST_UNSET_TOKEN"})
	require.EqualError(t, err, "token env:RANCHER_TEST_UNSET_TOKEN: not set")
}

func TestServerFilters(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config Config
		want   map[string]any
	}{
		{name: "defaults: no state filter", want: map[string]any{"limit": 1000, "internal": "false"}},
		{name: "page limit", config: Config{PageLimit: 50}, want: map[string]any{"limit": 50, "internal": "false"}},
		{name: "local included", config: Config{IncludeLocal: true}, want: map[string]any{"limit": 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.config.Default()
			f := newFilter(&tc.config)
			assert.Equal(t, tc.want, f.serverFilters(tc.config.PageLimit))
		})
	}
}
