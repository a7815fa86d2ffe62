package rancher

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// TestTokenAdoptTakesWhatSecretsHold: a new term (a restart, a leader
// change) takes the tokens our Secrets hold instead of revoking and
// minting them again; what this installation minted that no Secret holds
// is revoked only a grace period later, once the cluster's Secret holds its
// replacement; other owners', other installations' and Rancher's own
// tokens are never touched.
func TestTokenAdoptTakesWhatSecretsHold(t *testing.T) {
	f := newTokenRancher(t)
	m := newTestManager(t, f, 3*time.Hour, nil)
	ctx := t.Context()
	now := f.clock.Now()
	mark := func(install, cluster string) string {
		return marker{owner: "prod-a", install: install, cluster: cluster}.String()
	}
	f.SetTokenPageSize(2)
	f.SetLinkBase("http://rancher.example.com") // as Rancher behind a proxy may: next links on another host
	for _, tk := range []fakerancher.Token{
		{Name: "token-held1", ClusterID: "c-m-aaaa", Description: mark("inst-1", "c-m-aaaa"), Created: now.Add(-time.Hour)},
		{Name: "token-old01", ClusterID: "c-m-aaaa", Description: mark("inst-1", "c-m-aaaa"), Created: now.Add(-2 * time.Hour)},
		{Name: "token-old02", ClusterID: "c-m-bbbb", Description: mark("", "c-m-bbbb"), Created: now},
		{Name: "token-exp01", ClusterID: "c-m-cccc", Description: mark("inst-1", "c-m-cccc"), Created: now.Add(-4 * time.Hour)},
		{Name: "token-inst2", ClusterID: "c-m-bbbb", Description: mark("inst-2", "c-m-bbbb"), Created: now},
		{Name: "token-oth01", ClusterID: "c-m-aaaa", Description: "argocd-cluster-discovery owner=prod-b cluster=c-m-aaaa", Created: now},
		{Name: "token-oth02", ClusterID: "c-m-bbbb", Description: mark("inst-1", "c-m-aaaa"), Created: now}, // scoped elsewhere
		{Name: "token-kube1", ClusterID: "c-m-aaaa", Description: "Kubeconfig token", Created: now},
	} {
		tk.Secret = secretMark + tk.Name
		if tk.TTL = 3 * time.Hour; tk.Name == "token-kube1" {
			tk.TTL = 0
		}
		f.AddToken(tk)
	}
	held := map[string]string{
		"c-m-aaaa": "token-held1:" + secretMark + "token-held1",
		"c-m-cccc": "token-exp01:" + secretMark + "token-exp01", // expired: not adopted
		"c-m-dddd": "token-oth02:" + secretMark + "token-oth02", // another cluster's: not adopted
	}
	require.NoError(t, m.Adopt(ctx, "inst-1", held))
	assert.Equal(t, 5, strings.Count(strings.Join(f.requests(), "\n"), "GET /v3/tokens"),
		"nine tokens, two a page, the next links on another host followed on Rancher's origin")
	assert.Empty(t, f.DeletedTokens(), "nothing is revoked when a term begins")
	assert.Equal(t, 1, m.Live())
	v, err := m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	assert.Equal(t, held["c-m-aaaa"], v, "the token the Secret holds")
	assert.Empty(t, f.creates(), "adopted, not minted")

	v, err = m.Token(ctx, "c-m-cccc")
	require.NoError(t, err)
	assert.NotEqual(t, held["c-m-cccc"], v, "an expired token is replaced")
	assert.Equal(t, "argocd-cluster-discovery owner=prod-a install=inst-1 cluster=c-m-cccc", f.creates()[0]["description"])

	require.NoError(t, m.Sweep(ctx))
	assert.Empty(t, f.DeletedTokens(), "within the grace period")
	f.clock.Step(defaultTokenGrace)
	require.NoError(t, m.Sweep(ctx))
	assert.ElementsMatch(t, []string{"token-old01", "token-old02"}, f.DeletedTokens(),
		"the orphans of clusters whose Secret holds its token, or that have none; c-m-cccc's replacement is not written yet")
	m.Written("c-m-cccc", v)
	require.NoError(t, m.Sweep(ctx))
	assert.ElementsMatch(t, []string{"token-old01", "token-old02"}, f.DeletedTokens(), "a grace period after the replacement was written")
	f.clock.Step(defaultTokenGrace)
	require.NoError(t, m.Sweep(ctx))
	assert.ElementsMatch(t, []string{"token-old01", "token-old02", "token-exp01"}, f.DeletedTokens())
	assert.Subset(t, f.TokenNames(), []string{"token-held1", "token-inst2", "token-oth01", "token-oth02", "token-kube1"})
	assertNoSecret(t, m.logs.String())

	t.Run("a failed listing adopts nothing and hands out no token", func(t *testing.T) {
		f.Intercept(func(w http.ResponseWriter, r *http.Request, _ http.Handler) bool {
			if r.Method != http.MethodGet {
				return false
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		})
		defer f.Intercept(nil)
		err := m.Adopt(ctx, "inst-1", held)
		require.Error(t, err)
		assert.Equal(t, upstream.KindServer, upstream.KindOf(err))
		assert.Equal(t, opTokensList, upstream.OperationOf(err))
		_, err = m.Token(ctx, "c-m-aaaa")
		require.ErrorIs(t, err, errNotAdopted)
		assert.Len(t, f.creates(), 1, "no mint before the Secrets' tokens are adopted")
	})
}

// TestTokenRenewalRevokesTheOldOnlyOnceWritten: a renewed token's
// predecessor stays live until the Secret holds the new one, and a grace
// period more; under create-only (never written) it is never revoked.
func TestTokenRenewalRevokesTheOldOnlyOnceWritten(t *testing.T) {
	f := newTokenRancher(t)
	m := newTestManager(t, f, 3*time.Hour, nil)
	ctx := t.Context()
	first, err := m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	m.Written("c-m-aaaa", first)
	f.clock.Step(2*time.Hour + time.Minute)
	second, err := m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	require.NotEqual(t, first, second)
	m.Written("c-m-aaaa", first) // the write of the new one failed: the Secret holds the old
	f.clock.Step(defaultTokenGrace)
	require.NoError(t, m.Sweep(ctx))
	assert.Empty(t, f.DeletedTokens(), "the Secret still holds the old token")

	m.Written("c-m-aaaa", second)
	require.NoError(t, m.Sweep(ctx))
	assert.Empty(t, f.DeletedTokens(), "written just now: within the grace period")
	f.clock.Step(defaultTokenGrace)
	require.NoError(t, m.Sweep(ctx))
	assert.Equal(t, []string{"token-00001"}, f.DeletedTokens())
	assert.Equal(t, 1, m.Live())
}

// TestTokenAdoptLeavesTheOtherSources: two sources of one deployment on
// one Rancher user mark their tokens with their own name: one's orphans
// (its own and the unmarked ones of versions before 0.2.0) are revoked,
// never the other source's live tokens.
func TestTokenAdoptLeavesTheOtherSources(t *testing.T) {
	f := newTokenRancher(t)
	m := newTestManager(t, f, 3*time.Hour, nil)
	m.source = "rancher-eu"
	now := f.clock.Now()
	for _, tk := range []fakerancher.Token{
		{Name: "token-eu001", ClusterID: "c-m-aaaa", Description: marker{owner: "prod-a", source: "rancher-eu", cluster: "c-m-aaaa"}.String()},
		{Name: "token-old01", ClusterID: "c-m-aaaa", Description: marker{owner: "prod-a", cluster: "c-m-aaaa"}.String()},
		{Name: "token-us001", ClusterID: "c-m-aaaa", Description: marker{owner: "prod-a", source: "rancher-us", cluster: "c-m-aaaa"}.String()},
	} {
		tk.TTL, tk.Created = 3*time.Hour, now
		f.AddToken(tk)
	}
	require.NoError(t, m.Adopt(t.Context(), "inst-1", nil))
	f.clock.Step(defaultTokenGrace)
	require.NoError(t, m.Sweep(t.Context()))
	assert.ElementsMatch(t, []string{"token-eu001", "token-old01"}, f.DeletedTokens())
	assert.Contains(t, f.TokenNames(), "token-us001", "the other source's token is live")
	_, err := m.Token(t.Context(), "c-m-bbbb")
	require.NoError(t, err)
	assert.Equal(t, "argocd-cluster-discovery owner=prod-a install=inst-1 source=rancher-eu cluster=c-m-bbbb", f.creates()[0]["description"])
}

// TestTokenRevokeAll: the uninstall hook revokes every token of this
// installation's source, held or not, and nothing else.
func TestTokenRevokeAll(t *testing.T) {
	f := newTokenRancher(t)
	m := newTestManager(t, f, 3*time.Hour, nil)
	require.NoError(t, m.Adopt(t.Context(), "inst-1", nil))
	for _, c := range []string{"c-m-aaaa", "c-m-bbbb"} {
		_, err := m.Token(t.Context(), c)
		require.NoError(t, err)
	}
	f.AddToken(fakerancher.Token{Name: "token-inst2", ClusterID: "c-m-aaaa",
		Description: marker{owner: "prod-a", install: "inst-2", cluster: "c-m-aaaa"}.String(), TTL: 3 * time.Hour})
	n, err := m.RevokeAll(t.Context(), "inst-1")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, []string{"token-abcde", "token-inst2"}, f.TokenNames())
}

func TestMarkerRoundTrip(t *testing.T) {
	for _, k := range []marker{
		{owner: "prod-a", cluster: "c-m-aaaa"},
		{owner: "prod-a", source: "r", cluster: "c-m-aaaa"},
		{owner: "prod-a", install: "0f1e2d3c-aaaa-bbbb-cccc-000000000000", source: "r", cluster: "c-m-aaaa"},
	} {
		got, ok := parseMarker(k.String())
		require.True(t, ok, k.String())
		assert.Equal(t, k, got)
	}
	for _, d := range []string{"", "Kubeconfig token", "argocd-cluster-discovery owner=prod-a", "argocd-cluster-discovery owner=a cluster=b extra=c"} {
		_, ok := parseMarker(d)
		assert.False(t, ok, d)
	}
}

// TestNewTermTakesTheTokensTheSecretsHold: a leader that comes back after
// another led (A→B→A) never hands out the token it minted in its earlier
// term (B may have revoked it): a new term hands out what the Secret holds
// (B's token) or a new one.
func TestNewTermTakesTheTokensTheSecretsHold(t *testing.T) {
	f := newTokenRancher(t)
	m := newTestManager(t, f, 3*time.Hour, nil)
	s := &Source{issuer: &issuer{tokens: m.tokenManager}, mapper: &mapper{source: "r"}}
	require.NoError(t, s.AdoptTokens(t.Context(), "inst-1", nil))
	first, err := s.IssueToken(t.Context(), "c-m-aaaa")
	require.NoError(t, err)
	name, _, _ := strings.Cut(first, ":")
	f.DeleteToken(name)                               // B revoked it ...
	bs, err := m.mint(t.Context(), "c-m-aaaa", false) // ... and wrote its own
	require.NoError(t, err)
	same, err := s.IssueToken(t.Context(), "c-m-aaaa")
	require.NoError(t, err)
	require.Equal(t, first, same, "within a term the token is cached")

	require.NoError(t, s.AdoptTokens(t.Context(), "inst-1", map[string]string{"c-m-aaaa": bs.value}))
	got, err := s.IssueToken(t.Context(), "c-m-aaaa")
	require.NoError(t, err)
	assert.Equal(t, bs.value, got, "the token the Secret holds")
	assert.Len(t, f.creates(), 2, "nothing minted at the new term")

	require.NoError(t, s.AdoptTokens(t.Context(), "inst-1", map[string]string{"c-m-aaaa": first}))
	got, err = s.IssueToken(t.Context(), "c-m-aaaa")
	require.NoError(t, err)
	assert.NotEqual(t, first, got, "a revoked token in the Secret is replaced, never handed out")
	assert.NotEqual(t, bs.value, got)
}

// TestTokenCreatedDespiteAnErrorIsRevoked: a create that Rancher made but
// whose answer was lost (a 502 from a proxy, a timeout) leaves a token
// nobody holds: the next Sweep lists the tokens and revokes it a grace
// period later; the token the retry minted and the Secret holds stays.
func TestTokenCreatedDespiteAnErrorIsRevoked(t *testing.T) {
	f := newTokenRancher(t)
	m := newTestManager(t, f, 3*time.Hour, nil)
	ctx := t.Context()
	f.Intercept(func(w http.ResponseWriter, r *http.Request, fake http.Handler) bool {
		if r.Method != http.MethodPost {
			return false
		}
		fake.ServeHTTP(httptest.NewRecorder(), r) // made, and the answer lost
		f.Intercept(nil)
		w.WriteHeader(http.StatusBadGateway)
		return true
	})
	_, err := m.Token(ctx, "c-m-aaaa")
	require.Error(t, err)
	v, err := m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	m.Written("c-m-aaaa", v)
	require.NoError(t, m.Sweep(ctx))
	assert.Empty(t, f.DeletedTokens(), "within the grace period")
	f.clock.Step(defaultTokenGrace)
	require.NoError(t, m.Sweep(ctx))
	assert.Equal(t, []string{"token-00001"}, f.DeletedTokens(), "the token whose answer was lost")
	assert.Equal(t, 1, m.Live())
	n := len(f.requests())
	require.NoError(t, m.Sweep(ctx))
	assert.Len(t, f.requests(), n, "listed once, after the ambiguous create only")
}

// TestTokenOfADisconnectedEndpointIsNotRotated: a cluster served through
// its authorized endpoint whose agent is disconnected keeps its token past
// the renewal point (a new one would not reach the endpoint), until it
// expires; once connected again it is renewed at once.
func TestTokenOfADisconnectedEndpointIsNotRotated(t *testing.T) {
	f := newTokenRancher(t)
	m := newTestManager(t, f, 3*time.Hour, nil)
	ctx := t.Context()
	first, err := m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	m.holdRotation(map[string]bool{"c-m-aaaa": true})
	f.clock.Step(2*time.Hour + time.Minute)
	v, err := m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	assert.Equal(t, first, v, "past the renewal point, disconnected: kept")
	m.holdRotation(nil)
	v, err = m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	assert.NotEqual(t, first, v, "connected again: renewed")

	m.holdRotation(map[string]bool{"c-m-aaaa": true})
	f.clock.Step(3 * time.Hour)
	expired, err := m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	assert.NotEqual(t, v, expired, "an expired token is replaced, connected or not")
}
