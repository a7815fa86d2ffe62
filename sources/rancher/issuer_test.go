package rancher

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestSourceIssuesTokens: the source, as the Secret writer's TokenKeeper,
// hands out no token before a term begins, mints one token per cluster,
// revokes what an earlier process of its deployment left once the Secret
// holds the new one, and revokes a token on release.
func TestSourceIssuesTokens(t *testing.T) {
	f := newTokenRancher(t)
	f.AddToken(fakerancher.Token{Name: "token-left1", ClusterID: "c-m-aaaa",
		Description: "argocd-cluster-discovery owner=prod-a cluster=c-m-aaaa", TTL: time.Hour})
	cfg := validConfig()
	cfg.URL, cfg.Token, cfg.ClusterTokens, cfg.TokenTTL = f.URL(), sources.SecretRef{File: writeToken(t, t.TempDir(), testToken)},
		ClusterTokensPerCluster, sources.D(time.Hour)
	src, err := newSource(cfg, sources.SourceOptions{Name: "rancher-a", OwnerID: "prod-a"}, f.Client())
	require.NoError(t, err)
	var iss sources.TokenKeeper = src
	_, err = iss.IssueToken(t.Context(), "c-m-aaaa")
	require.ErrorIs(t, err, errNotAdopted)
	require.NoError(t, iss.AdoptTokens(t.Context(), "inst-1", nil))
	src.issuer.tokens.grace = 0

	a, err := iss.IssueToken(t.Context(), "c-m-aaaa")
	require.NoError(t, err)
	again, err := iss.IssueToken(t.Context(), "c-m-aaaa")
	require.NoError(t, err)
	assert.Equal(t, a, again, "one token per cluster while it is fresh")
	b, err := iss.IssueToken(t.Context(), "c-m-bbbb")
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	assert.Equal(t, 2, src.LiveTokens())
	require.NoError(t, iss.SweepTokens(t.Context()))
	assert.Empty(t, f.DeletedTokens(), "the earlier process's token stays until the Secret holds the new one")
	iss.TokenWritten("c-m-aaaa", a)
	require.NoError(t, iss.SweepTokens(t.Context()))
	assert.Equal(t, []string{"token-left1"}, f.DeletedTokens())

	require.NoError(t, iss.ReleaseToken(t.Context(), "c-m-aaaa"))
	assert.Equal(t, 1, src.LiveTokens())
	require.NoError(t, iss.ReleaseToken(t.Context(), "c-unknown"), "releasing an unknown cluster is no error")
}

// TestListingHoldsRotationOfDisconnectedEndpoints: a listing tells the
// token manager which clusters served through their authorized endpoint
// have a disconnected agent (Connected False or Unknown); a cluster served
// through the proxy never waits (Rancher itself checks the token there).
func TestListingHoldsRotationOfDisconnectedEndpoints(t *testing.T) {
	f := newFake(t, false)
	f.Generate(3)
	f.edit("c-m-00000000", func(c map[string]any) {
		c["localClusterAuthEndpoint"] = map[string]any{"enabled": true, "fqdn": "ace0.k8s.example.com"}
		setCondition(c, "Connected", "False")
	})
	f.edit("c-m-00000001", func(c map[string]any) {
		c["localClusterAuthEndpoint"] = map[string]any{"enabled": true, "fqdn": "ace1.k8s.example.com"}
		setCondition(c, "Connected", "True")
	})
	f.edit("c-m-00000002", func(c map[string]any) { // through the proxy
		c["localClusterAuthEndpoint"] = map[string]any{"enabled": false}
		setCondition(c, "Connected", "False")
	})
	cfg := config(t, f)
	cfg.ACE, cfg.ACEAllowedHosts = ACEAuto, []string{"*.k8s.example.com"}
	s := newTestSource(t, "r", cfg, testOptions{})
	_, err := s.Clusters(t.Context())
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"c-m-00000000": true}, s.issuer.tokens.hold)

	f.edit("c-m-00000000", func(c map[string]any) { setCondition(c, "Connected", "True") })
	_, err = s.Clusters(t.Context())
	require.NoError(t, err)
	assert.Empty(t, s.issuer.tokens.hold, "connected again")
}
