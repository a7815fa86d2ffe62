package clustersecret

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// keeper is a sources.TokenKeeper that hands out what it adopted, mints
// "<cluster>-m<n>" otherwise, and records what it is told.
type keeper struct {
	mu           sync.Mutex
	adoptErr     error
	installation string
	adoptedFrom  map[string]string
	current      map[string]string
	written      map[string]string
	minted       int
	issuing      int // concurrent IssueToken calls now
	maxIssuing   int
	sweeps       int
	released     []string
	issuedFor    map[string]int
}

func newKeeper() *keeper {
	return &keeper{current: map[string]string{}, written: map[string]string{}, issuedFor: map[string]int{}}
}

func (k *keeper) AdoptTokens(_ context.Context, installation string, held map[string]string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.adoptErr != nil {
		return k.adoptErr
	}
	k.installation, k.adoptedFrom, k.current = installation, maps.Clone(held), maps.Clone(held)
	return nil
}

func (k *keeper) IssueToken(_ context.Context, cluster string) (string, error) {
	k.mu.Lock()
	k.issuing++
	k.maxIssuing = max(k.maxIssuing, k.issuing)
	k.mu.Unlock()
	time.Sleep(5 * time.Millisecond) // a request to the upstream
	k.mu.Lock()
	defer k.mu.Unlock()
	k.issuing--
	k.issuedFor[cluster]++
	if k.adoptedFrom == nil {
		return "", errors.New("not adopted")
	}
	if v, ok := k.current[cluster]; ok {
		return v, nil
	}
	k.minted++
	v := fmt.Sprintf("%s-m%d", cluster, k.minted)
	k.current[cluster] = v
	return v, nil
}

func (k *keeper) ReleaseToken(_ context.Context, cluster string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.released = append(k.released, cluster)
	delete(k.current, cluster)
	return nil
}

func (k *keeper) TokenWritten(cluster, value string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.written[cluster] = value
}

func (k *keeper) SweepTokens(context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sweeps++
	return nil
}

func (k *keeper) RevokeTokens(context.Context, string) (int, error) { return 0, nil }

func (k *keeper) get(f func(k *keeper) any) any {
	k.mu.Lock()
	defer k.mu.Unlock()
	return f(k)
}

// TestTokensOutliveTheProcess: a new process (a restart, a new leader)
// hands its token keeper the tokens our Secrets hold, so nothing is minted
// again and no Secret is rewritten; the keeper learns which Secrets hold
// which token; while adoption fails, no Secret of the source is written.
func TestTokensOutliveTheProcess(t *testing.T) {
	e := newEnv(t)
	src := &issuingSource{}
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("k%02d", i)
	}
	src.set(names...)
	inv, err := inventory.New([]inventory.SourceSpec{{Name: "fleet", Provider: "rancher", Kind: sources.KindManager, Source: src, Interval: time.Hour, Timeout: 5 * time.Second}},
		inventory.Options{Departure: inventory.Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 1}})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(context.Background()))
	start := func(k *keeper) *Reconciler {
		r, err := New(testConfig(e, func(c *Config) {
			c.Issuers, c.Installation = map[string]sources.TokenIssuer{"fleet": k}, "inst-1"
		}), e.client, inv, nil, nil)
		require.NoError(t, err)
		return r
	}

	first := newKeeper()
	ch := pass(t, start(first))
	require.Len(t, ch.Create, len(names))
	assert.Empty(t, first.get(func(k *keeper) any { return k.adoptedFrom }), "no Secret yet: nothing to adopt")
	assert.Equal(t, "inst-1", first.get(func(k *keeper) any { return k.installation }))
	written := first.get(func(k *keeper) any { return maps.Clone(k.written) }).(map[string]string)
	assert.Len(t, written, len(names), "every created Secret holds its token")
	assert.Equal(t, "c-k00-m", written["c-k00"][:len("c-k00-m")])
	assert.Greater(t, first.get(func(k *keeper) any { return k.maxIssuing }), 1, "tokens are issued concurrently")
	assert.LessOrEqual(t, first.get(func(k *keeper) any { return k.maxIssuing }), issueConcurrency)
	assert.Equal(t, 1, first.get(func(k *keeper) any { return k.sweeps }))

	t.Run("a new process adopts what the Secrets hold", func(t *testing.T) {
		next := newKeeper()
		ch := pass(t, start(next))
		assert.Equal(t, written, next.get(func(k *keeper) any { return k.adoptedFrom }))
		assert.Zero(t, next.get(func(k *keeper) any { return k.minted }), "nothing minted again")
		assert.Empty(t, ch.Update, "no Secret rewritten")
		assert.Equal(t, written, next.get(func(k *keeper) any { return k.written }), "up-to-date Secrets hold their tokens")
	})

	t.Run("while adoption fails, the source's Secrets are left as they are", func(t *testing.T) {
		failing := newKeeper()
		failing.adoptErr = errors.New("rancher is down")
		r := start(failing)
		ch := pass(t, r)
		assert.Zero(t, ch.Writes())
		assert.Len(t, r.Status().Held, len(names), "each cluster is held: its Secret is neither rewritten nor deleted")
		assert.Equal(t, written, bearers(t, e), "every Secret keeps its working token")
		assert.Empty(t, failing.get(func(k *keeper) any { return k.written }))

		failing.mu.Lock()
		failing.adoptErr = nil
		failing.mu.Unlock()
		ch = pass(t, r)
		assert.Zero(t, ch.Writes(), "adopted at the next pass")
		assert.Equal(t, written, failing.get(func(k *keeper) any { return k.written }))
	})
}

// bearers returns the bearer token of each of our Secrets, by cluster ID.
func bearers(t *testing.T, e *env) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range e.secrets() {
		var cfg struct {
			BearerToken string `json:"bearerToken"`
		}
		require.NoError(t, json.Unmarshal(s.Data["config"], &cfg))
		out[s.Annotations[AnnotationClusterID]] = cfg.BearerToken
	}
	return out
}

// TestClashingClusterHoldsNoToken: a cluster whose Secret cannot be
// written (a foreign Secret has its server) keeps no token: the one minted
// for it is released at once, and no other is minted while it clashes.
// Once the clash is gone it gets a token and its Secret, the stand-in
// never reaching a Secret.
func TestClashingClusterHoldsNoToken(t *testing.T) {
	e, inv := clashingFleet(t)
	k := newKeeper()
	r, err := New(testConfig(e, func(c *Config) { c.Issuers = map[string]sources.TokenIssuer{"fleet": k} }), e.client, inv, nil, nil)
	require.NoError(t, err)

	ch := pass(t, r)
	require.Len(t, ch.Create, 1, "a only")
	assert.Equal(t, []string{"c-b"}, k.get(func(k *keeper) any { return k.released }), "b's token released: no Secret holds it")
	for range 2 {
		pass(t, r)
	}
	assert.Equal(t, 1, k.get(func(k *keeper) any { return k.issuedFor["c-b"] }), "no token issued while b clashes")
	assert.Equal(t, 2, k.get(func(k *keeper) any { return k.minted }), "a's token, and b's of the first pass")

	require.NoError(t, e.admin.CoreV1().Secrets(e.ns).Delete(context.Background(), "hand-made", metav1.DeleteOptions{}))
	ch = pass(t, r)
	assert.Empty(t, ch.Create, "b was planned with the stand-in: its Secret waits for the next pass")
	ch = pass(t, r)
	require.Len(t, ch.Create, 1)
	got := bearers(t, e)
	assert.Equal(t, "c-b-m3", got["c-b"], "b's own token, minted once the clash is gone")
	for id, v := range got {
		assert.NotEqual(t, parkedToken, v, id)
	}
}

// TestCreateOnlyMintsNoTokenItCannotWrite: under create-only a Secret is
// never updated, so a renewed token would never be written: once a
// cluster's Secret holds an older token, no new one is minted for it.
func TestCreateOnlyMintsNoTokenItCannotWrite(t *testing.T) {
	e := newEnv(t)
	_, inv := issuingInventory(t, 2, "a")
	k := newKeeper()
	r, err := New(testConfig(e, func(c *Config) {
		c.Policy, c.Issuers = PolicyCreateOnly, map[string]sources.TokenIssuer{"fleet": k}
	}), e.client, inv, nil, nil)
	require.NoError(t, err)
	require.Len(t, pass(t, r).Create, 1)
	k.mu.Lock()
	delete(k.current, "c-a") // the keeper renews: its next token differs from the Secret's
	k.mu.Unlock()
	for range 3 {
		pass(t, r)
	}
	assert.Equal(t, 2, k.get(func(k *keeper) any { return k.minted }), "the first token and one renewal, then none")
	assert.Equal(t, 2, k.get(func(k *keeper) any { return k.issuedFor["c-a"] }), "no token asked for once the Secret is known not to take it")
	assert.Equal(t, "c-a-m1", bearers(t, e)["c-a"], "the Secret keeps the token it was created with")
	assert.Empty(t, k.get(func(k *keeper) any { return k.released }), "nothing the Secret holds is revoked")
}

// TestDeselectedClusterGetsNoToken: a cluster outside secrets.select gets
// no Secret, so no token is minted for it either (a live credential that
// no Secret would hold, renewed every term).
func TestDeselectedClusterGetsNoToken(t *testing.T) {
	e := newEnv(t)
	_, inv := issuingInventory(t, 2, "in", "out")
	k := newKeeper()
	r, err := New(testConfig(e, func(c *Config) {
		c.Issuers = map[string]sources.TokenIssuer{"fleet": k}
		c.Select = func(c *sources.Cluster) bool { return c.Name == "in" }
	}), e.client, inv, nil, nil)
	require.NoError(t, err)
	for range 2 {
		r.newTerm()
		pass(t, r)
	}
	assert.Equal(t, []string{"c-in"}, slices.Sorted(maps.Keys(bearers(t, e))), "one Secret, the selected cluster's")
	assert.Zero(t, k.get(func(k *keeper) any { return k.issuedFor["c-out"] }), "no token minted for the cluster outside secrets.select")
	assert.NotZero(t, k.get(func(k *keeper) any { return k.issuedFor["c-in"] }))
}

// TestDepartureReleasesTheTokenUnderUpsertOnly: upsert-only never deletes
// the Secret of a departed cluster, yet its token is released once the
// departure is confirmed (under sync the Secret's deletion would release
// it anyway, which hides a missing release).
func TestDepartureReleasesTheTokenUnderUpsertOnly(t *testing.T) {
	e := newEnv(t)
	src, inv := issuingInventory(t, 2, "a", "b")
	iss := &issuer{issued: map[string]int{}}
	r, err := New(testConfig(e, func(c *Config) {
		c.Policy, c.Issuers = PolicyUpsertOnly, map[string]sources.TokenIssuer{"fleet": iss}
	}), e.client, inv, nil, nil)
	require.NoError(t, err)
	require.Len(t, pass(t, r).Create, 2)
	src.set("a")
	for range 2 {
		require.NoError(t, inv.RefreshAll(context.Background()))
	}
	pass(t, r)
	assert.Equal(t, []string{"c-b"}, iss.releasedClusters(), "b's token released at its confirmed departure")
	assert.Len(t, e.secrets(), 2, "upsert-only keeps b's Secret")
}

// TestParkedInAnEarlierTermNeverWritesTheStandIn: leader A parks b (a
// foreign Secret has b's server) and loses the lease; the foreign Secret
// goes and leader B writes b's Secret with a token of its own; when A
// leads again (the same process, a new term), its first pass neither
// writes the stand-in into b's Secret nor tells its keeper that b's Secret
// holds it.
func TestParkedInAnEarlierTermNeverWritesTheStandIn(t *testing.T) {
	e, inv := clashingFleet(t)
	ka, kb := newKeeper(), newKeeper()
	ra, err := New(testConfig(e, func(c *Config) { c.Issuers = map[string]sources.TokenIssuer{"fleet": ka} }), e.client, inv, nil, nil)
	require.NoError(t, err)
	rb, err := New(testConfig(e, func(c *Config) { c.Issuers = map[string]sources.TokenIssuer{"fleet": kb} }), e.client, inv, nil, nil)
	require.NoError(t, err)

	ra.newTerm()
	pass(t, ra)
	require.NoError(t, e.admin.CoreV1().Secrets(e.ns).Delete(context.Background(), "hand-made", metav1.DeleteOptions{}))
	require.NotContains(t, bearers(t, e), "c-b", "A parked b")
	rb.newTerm()
	pass(t, rb)
	before := bearers(t, e)
	require.Contains(t, before, "c-b", "B writes b's Secret")
	require.NotEqual(t, parkedToken, before["c-b"])

	ra.newTerm()
	pass(t, ra)
	assert.Equal(t, before["c-b"], bearers(t, e)["c-b"], "b's Secret keeps the token B wrote")
	written := ka.get(func(k *keeper) any { return maps.Clone(k.written) }).(map[string]string)
	assert.NotEqual(t, parkedToken, written["c-b"], "A's keeper is never told b's Secret holds the stand-in")
}

// clashingFleet is clusters a and b of an issuing source, and a foreign
// cluster Secret "hand-made" with b's server.
func clashingFleet(t *testing.T) (*env, *inventory.Inventory) {
	t.Helper()
	e := newEnv(t)
	_, inv := issuingInventory(t, 2, "a", "b")
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hand-made", Namespace: e.ns,
		Labels: map[string]string{LabelSecretType: "cluster"}},
		Data: map[string][]byte{"name": []byte("hand-made"), "server": []byte("https://b.example.com")}}
	_, err := e.admin.CoreV1().Secrets(e.ns).Create(context.Background(), foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	return e, inv
}
