package generator

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const demoToken = "demo-token-change-me"

// demoInventory loads the demo clusters of testdata/demo through the real
// static source and inventory.
func demoInventory(t testing.TB) *inventory.Inventory {
	t.Helper()
	dir := filepath.Join("..", "testdata", "demo")
	var specs []inventory.SourceSpec
	for _, s := range []struct{ name, file string }{{"demo-aws", "clusters-aws.yaml"}, {"demo-azure", "clusters-azure.yaml"}} {
		src, err := static.New(static.Config{File: s.file}, dir)
		require.NoError(t, err)
		specs = append(specs, inventory.SourceSpec{Name: s.name, Provider: sources.ProviderStatic, Source: src, Interval: time.Hour, Timeout: 5 * time.Second})
	}
	inv, err := inventory.New(specs, inventory.Options{})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(context.Background()))
	return inv
}

func tokenSet(t testing.TB, tokens ...string) *TokenSet {
	t.Helper()
	var refs []sources.SecretRef
	for _, tok := range tokens {
		p := filepath.Join(t.TempDir(), "token")
		require.NoError(t, os.WriteFile(p, []byte(tok+"\n"), 0o600))
		refs = append(refs, sources.SecretRef{File: p})
	}
	ts, err := NewTokenSet(refs, nil)
	require.NoError(t, err)
	return ts
}

// knownProviders are the provider names the tests register, in the order
// the golden messages list them.
func knownProviders() []sources.Provider {
	return []sources.Provider{sources.ProviderStatic, sources.ProviderRancher, sources.ProviderEKS, sources.ProviderAKS}
}

func newServer(t testing.TB, inv Inventory, opts ...func(*Options)) *Server {
	t.Helper()
	o := Options{Inventory: inv, Tokens: tokenSet(t, demoToken), Providers: knownProviders()}
	for _, f := range opts {
		f(&o)
	}
	s, err := New(o)
	require.NoError(t, err)
	return s
}

// argoRequest builds a request exactly as Argo CD's plugin generator does
// (applicationset/services/internal/http): JSON encoded without HTML
// escaping, with a trailing newline, and these headers.
func argoRequest(t testing.TB, path string, parameters map[string]any) *http.Request {
	t.Helper()
	input := map[string]any{}
	if parameters != nil {
		input["parameters"] = parameters
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(map[string]any{"applicationSetName": "tenants", "input": input}))
	return rawRequest(http.MethodPost, path, buf.Bytes(), "Bearer "+demoToken)
}

func rawRequest(method, path string, body []byte, auth string) *http.Request {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "argocd-applicationset")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	return req
}

func do(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// golden compares got (JSON) with testdata/golden/name.json after
// indenting, which keeps key order and values exactly as encoded.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var pretty bytes.Buffer
	require.NoError(t, json.Indent(&pretty, got, "", "  "), "response is not JSON: %s", got)
	pretty.WriteByte('\n')
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, pretty.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./generator -update to create it")
	require.Equal(t, string(want), pretty.String())
}

// scripted is a Source playing answers in order, repeating the last.
type scripted struct {
	mu    sync.Mutex
	steps []func() ([]sources.Cluster, error)
	calls int
}

func (s *scripted) Clusters(context.Context) ([]sources.Cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.steps[min(s.calls, len(s.steps)-1)]
	s.calls++
	return f()
}

func ok(cs ...sources.Cluster) func() ([]sources.Cluster, error) {
	return func() ([]sources.Cluster, error) { return cs, nil }
}

func fail(msg string) func() ([]sources.Cluster, error) {
	return func() ([]sources.Cluster, error) { return nil, &testError{msg} }
}

type testError struct{ msg string }

func (e *testError) Error() string { return e.msg }

func testCluster(name, tenant string) sources.Cluster {
	return sources.Cluster{Name: name, Server: "https://" + name + ".example.com", Tenant: tenant, Ready: true,
		Labels: map[string]string{"tenant": tenant}}
}
