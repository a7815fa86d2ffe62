package clustersecret

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// bearerOf returns the bearer token in the config of the Secret of cluster.
func bearerOf(t *testing.T, e *env, cluster string) string {
	t.Helper()
	for _, s := range e.secrets() {
		if s.Name != sn(cluster) {
			continue
		}
		var cfg struct {
			BearerToken string `json:"bearerToken"`
		}
		require.NoError(t, json.Unmarshal(s.Data["config"], &cfg))
		return cfg.BearerToken
	}
	return ""
}

// runReconciler runs r until the test ends.
func runReconciler(t *testing.T, r *Reconciler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.RunWithoutElection(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestRotatedTokenReachesSecretsWithinOneListing: a token file rotated
// while nothing else changes reaches the Secrets at the next listing, long
// before a resync.
func TestRotatedTokenReachesSecretsWithinOneListing(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a", "b")
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("token-one\n"), 0o600))
	r := newReconciler(t, e, f, func(c *Config) {
		c.Resync = time.Hour
		c.Credentials = map[string]CredentialOverride{"fleet": {BearerToken: &sources.SecretRef{File: tokenFile}}}
	})
	runReconciler(t, r)
	require.Eventually(t, func() bool { return bearerOf(t, e, "a") == "token-one" }, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, os.WriteFile(tokenFile, []byte("token-two\n"), 0o600))
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, "token-one", bearerOf(t, e, "a"), "no listing yet, no resync: nothing written")
	require.NoError(t, f.refresh())
	require.Eventually(t, func() bool { return bearerOf(t, e, "a") == "token-two" && bearerOf(t, e, "b") == "token-two" },
		10*time.Second, 10*time.Millisecond, "the rotated token is written after one listing")
}

// issuer is a TokenIssuer that mints "<cluster>-<n>" and counts.
type issuer struct {
	mu       sync.Mutex
	issued   map[string]int
	released []string
	gen      int
}

func (i *issuer) IssueToken(_ context.Context, cluster string) (string, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.issued[cluster]++
	return fmt.Sprintf("%s-%d", cluster, i.gen), nil
}

func (i *issuer) ReleaseToken(_ context.Context, cluster string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.released = append(i.released, cluster)
	return nil
}

func (i *issuer) renew() { i.mu.Lock(); i.gen++; i.mu.Unlock() }

func (i *issuer) releasedClusters() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]string(nil), i.released...)
}

// issuingInventory is an inventory over one issuing source "fleet" that
// lists names, listed once; departures are confirmed after afterListings.
func issuingInventory(t *testing.T, afterListings int, names ...string) (*issuingSource, *inventory.Inventory) {
	t.Helper()
	src := &issuingSource{}
	src.set(names...)
	inv, err := inventory.New([]inventory.SourceSpec{{Name: "fleet", Provider: "rancher", Kind: sources.KindManager, Source: src, Interval: time.Hour, Timeout: 5 * time.Second}},
		inventory.Options{Departure: inventory.Departure{AfterListings: afterListings, GracePeriod: -1, MaxFraction: 1}})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(context.Background()))
	return src, inv
}

// issuingSource lists clusters whose token the source issues.
type issuingSource struct {
	mu    sync.Mutex
	names []string
}

func (s *issuingSource) set(names ...string) { s.mu.Lock(); s.names = names; s.mu.Unlock() }

func (s *issuingSource) Clusters(context.Context) ([]sources.Cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]sources.Cluster, 0, len(s.names))
	for _, n := range s.names {
		out = append(out, sources.Cluster{Provider: "rancher", Name: n, ID: "c-" + n, Server: "https://" + n + ".example.com", Ready: true,
			Auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{Issued: &sources.IssuedToken{Source: "fleet", Cluster: "c-" + n}}}})
	}
	return out, nil
}

// TestIssuedTokens: a token the source issues is written into its
// cluster's Secret only, a renewed one reaches the Secret within one
// listing, and the token is released once the departure is confirmed.
func TestIssuedTokens(t *testing.T) {
	e := newEnv(t)
	src, inv := issuingInventory(t, 2, "a", "b")
	iss := &issuer{issued: map[string]int{}}
	r, err := New(testConfig(e, func(c *Config) {
		c.Resync, c.Issuers = time.Hour, map[string]sources.TokenIssuer{"fleet": iss}
	}), e.client, inv, nil, nil, WithInformer(informerFor(t, e.client, e.ns)))
	require.NoError(t, err)
	secretOf := func(name string) string { return SecretName("cluster", "fleet", name, "c-"+name) }
	bearer := func(name string) string {
		for _, s := range e.secrets() {
			if s.Name == secretOf(name) {
				var cfg struct {
					BearerToken string `json:"bearerToken"`
				}
				require.NoError(t, json.Unmarshal(s.Data["config"], &cfg))
				return cfg.BearerToken
			}
		}
		return ""
	}
	runReconciler(t, r)
	require.Eventually(t, func() bool { return bearer("a") == "c-a-0" && bearer("b") == "c-b-0" }, 10*time.Second, 10*time.Millisecond,
		"each Secret carries its own cluster's token")

	iss.renew()
	require.NoError(t, inv.RefreshAll(context.Background()))
	require.Eventually(t, func() bool { return bearer("a") == "c-a-1" }, 10*time.Second, 10*time.Millisecond, "a renewed token is written after one listing")

	src.set("a")
	for range 2 {
		require.NoError(t, inv.RefreshAll(context.Background()))
	}
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]string{"c-b"}, iss.releasedClusters()) }, 10*time.Second, 10*time.Millisecond,
		"b's token is released once its departure is confirmed, and only b's")
	require.NoError(t, inv.RefreshAll(context.Background()))
	time.Sleep(100 * time.Millisecond)
	assert.Len(t, iss.releasedClusters(), 1, "released once")
}

// TestDryRunIssuesNoToken: a dry run writes nothing upstream either: no
// token is minted, none released.
func TestDryRunIssuesNoToken(t *testing.T) {
	e := newEnv(t)
	src, inv := issuingInventory(t, 1, "a")
	iss := &issuer{issued: map[string]int{}}
	r, err := New(testConfig(e, func(c *Config) { c.DryRun, c.Issuers = true, map[string]sources.TokenIssuer{"fleet": iss} }),
		e.client, inv, nil, nil, WithInformer(informerFor(t, e.client, e.ns)))
	require.NoError(t, err)
	ch := pass(t, r)
	assert.Len(t, ch.Create, 1, "the plan is computed")
	src.set()
	require.NoError(t, inv.RefreshAll(context.Background()))
	pass(t, r)
	assert.Empty(t, iss.issued, "no token minted")
	assert.Empty(t, iss.releasedClusters(), "none released")
	assert.Empty(t, e.secrets())
}
