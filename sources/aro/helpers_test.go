package aro

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testca"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	// subA is the subscription of the fixture's clusters.
	subA = "9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41"
	// subB is the fixture's Disabled subscription.
	subB = "3e1f7a2c-8d4b-4c6e-9f0a-5b2d7c1e8a94"
	subC = "0b1f6471-1bf0-4dda-aec3-000000000003"
)

// fixture reads a file of testdata/fixtures/aro.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", "aro", name))
	require.NoError(t, err)
	return b
}

var (
	caOnce sync.Once
	caPEM  []byte
)

// testCAPEM returns a PEM CA certificate generated once per run: the CA of
// custom-domain clusters in the tests.
func testCAPEM(t testing.TB) []byte {
	t.Helper()
	caOnce.Do(func() {
		var err error
		if caPEM, err = testca.SelfSignedPEM("ocp-custom-domain-ca"); err != nil {
			panic(err)
		}
	})
	return caPEM
}

// tokenSecrets is sources.TokenBindings over a plain map, as the
// Kubernetes API would answer: the names of the token Secrets bound to
// each cluster identity (lower-case ARM resource id) of the aro provider.
type tokenSecrets map[string][]string

func (t tokenSecrets) Bound(_ context.Context, p sources.Provider) (map[string][]string, error) {
	if p != sources.ProviderARO {
		return map[string][]string{}, nil
	}
	out := make(map[string][]string, len(t))
	for id, names := range t {
		out[strings.ToLower(id)] = names
	}
	return out, nil
}

// bind returns t with one more Secret bound to the cluster with resource
// id id (any case, as the annotation is written).
func (t tokenSecrets) bind(id, secret string) tokenSecrets {
	out := maps.Clone(t)
	if out == nil {
		out = tokenSecrets{}
	}
	out[strings.ToLower(id)] = append(out[strings.ToLower(id)], secret)
	return out
}

// unreachableAPI is token bindings on a Kubernetes API that fails with
// err.
type unreachableAPI struct{ err error }

func (u unreachableAPI) Bound(context.Context, sources.Provider) (map[string][]string, error) {
	return nil, u.err
}

// testEnv is a Source wired to a fake ARM, with its registry and logs. Its
// configuration is defaulted, as the service does before NewSource.
type testEnv struct {
	src  *Source
	reg  *prometheus.Registry
	logs *testlog.Buffer
}

func newTestEnv(t testing.TB, cfg Config, co *arm.ClientOptions, bindings sources.TokenBindings, cred azcore.TokenCredential) *testEnv {
	t.Helper()
	return newTestEnvWith(t, cfg, co, sources.SourceOptions{TokenBindings: bindings}, cred)
}

// newTestEnvWith is newTestEnv with the options' token bindings and agents.
func newTestEnvWith(t testing.TB, cfg Config, co *arm.ClientOptions, opts sources.SourceOptions, cred azcore.TokenCredential) *testEnv {
	t.Helper()
	if cred == nil {
		cred = &azfake.TokenCredential{}
	}
	env := &testEnv{reg: prometheus.NewRegistry(), logs: &testlog.Buffer{}}
	// The service gives every source a logger that names it.
	log := slog.New(slog.NewJSONHandler(env.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("source", "aro-prod")
	cfg.Default()
	opts.Name, opts.Logger, opts.Registerer = "aro-prod", log, env.reg
	src, err := newSource(cfg, opts,
		azurearm.Hooks{Credential: cred, Options: co})
	require.NoError(t, err)
	env.src = src
	return env
}

func names(cs []sources.Cluster) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

func byName(cs []sources.Cluster, name string) sources.Cluster {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return sources.Cluster{}
}

func explicit(subs ...string) Config { return Config{Subscriptions: subs} }

// assertNoToken checks that no token value (the fake Entra ID's access
// token) reached the logs or the clusters.
func assertNoToken(t testing.TB, env *testEnv, v any, secrets ...string) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	for _, s := range append(secrets, "fake_token") {
		require.NotContains(t, string(b), s)
		require.NotContains(t, env.logs.String(), s)
	}
}

// subscriptionsOf returns the subscriptions of scopes (azurearm.Scope),
// each once, in order.
func subscriptionsOf(scopes []string) []string {
	var out []string
	for _, s := range scopes {
		sub := strings.Split(s, "/")[2]
		if !slices.Contains(out, sub) {
			out = append(out, sub)
		}
	}
	return out
}

// servedNames returns the names of the clusters of snap, in order.
func servedNames(snap *inventory.Snapshot) []string {
	var out []string
	for _, c := range snap.Clusters {
		out = append(out, c.Name)
	}
	return out
}
