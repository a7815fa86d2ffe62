package aro

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestCustomDomainCAs: a managed domain needs no CA; a custom domain
// takes the longest matching customDomainCA key, else defaultCA, else it
// is not ready; a CA file is read again at each listing.
func TestCustomDomainCAs(t *testing.T) {
	a := newARMServer(t)
	managed := cluster(subC, "rg", "managed")
	team := cluster(subC, "rg", "team")
	team.Domain = "ocp.team.example.com"
	corp := cluster(subC, "rg", "corp")
	corp.Domain = "ocp.example.com"
	other := cluster(subC, "rg", "other")
	other.Domain = "ocp.example.org"
	all := []fakeazure.OpenShiftCluster{managed, team, corp, other}
	a.SetOpenShiftClusters(all...)
	dir := t.TempDir()
	teamFile := filepath.Join(dir, "team.pem")
	require.NoError(t, os.WriteFile(teamFile, testCAPEM(t), 0o600))
	corpCA := base64.StdEncoding.EncodeToString(testCAPEM(t))

	cfg := Config{Subscriptions: []string{subC}, CustomDomainCA: map[string]CARef{
		"example.com": {CAData: corpCA}, "team.example.com": {CAFile: teamFile},
	}}
	env := newTestEnv(t, cfg, a.clientOptions(), boundAll(all...), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	assert.True(t, byName(cs, "managed").CA.IsZero())
	assert.True(t, byName(cs, "managed").Ready)
	assert.Equal(t, string(testCAPEM(t)), string(byName(cs, "team").CA.PEM()))
	assert.Equal(t, corpCA, byName(cs, "corp").CA.Data())
	o := byName(cs, "other")
	assert.False(t, o.Ready)
	assert.Equal(t, "custom domain: api.ocp.example.org is not under a managed domain (managedDomains: .aroapp.io), and no CA is configured for it (customDomainCA or defaultCA)",
		o.NotReadyReason)

	require.NoError(t, os.Remove(teamFile))
	cs, err = env.src.Clusters(context.Background())
	require.NoError(t, err, "a CA file that went missing fails only the clusters that need it")
	assert.False(t, byName(cs, "team").Ready)
	assert.Equal(t, "CA unavailable: customDomainCA[team.example.com].caFile "+teamFile+": no such file or directory", byName(cs, "team").NotReadyReason)
	assert.True(t, byName(cs, "corp").Ready)

	cfg.DefaultCA = CARef{CAData: corpCA}
	cfg.CustomDomainCA = nil
	env = newTestEnv(t, cfg, a.clientOptions(), boundAll(all...), nil)
	cs, err = env.src.Clusters(context.Background())
	require.NoError(t, err)
	for _, c := range cs {
		assert.True(t, c.Ready, c.Name)
	}
	assert.Equal(t, corpCA, byName(cs, "other").CA.Data())
	assert.True(t, byName(cs, "managed").CA.IsZero(), "defaultCA is for custom domains only")
}

// TestPrivateClusters: included by default (with the proxy), left out
// with policy exclude.
func TestPrivateClusters(t *testing.T) {
	a := newARMServer(t)
	pub, priv := cluster(subC, "rg", "public"), cluster(subC, "rg", "private")
	priv.Private = true
	a.SetOpenShiftClusters(pub, priv)
	env := newTestEnv(t, Config{Subscriptions: []string{subC}, PrivateEndpoints: PrivateEndpoints{ProxyURL: "socks5://proxy:1080"}},
		a.clientOptions(), boundAll(pub, priv), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"private", "public"}, names(cs))
	assert.Equal(t, "socks5://proxy:1080", byName(cs, "private").ProxyURL)
	assert.Empty(t, byName(cs, "public").ProxyURL)

	env = newTestEnv(t, Config{Subscriptions: []string{subC}, PrivateEndpoints: PrivateEndpoints{Policy: PrivateExclude}},
		a.clientOptions(), boundAll(pub, priv), nil)
	cs, err = env.src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"public"}, names(cs))
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.Skipped.WithLabelValues(string(skipPrivate))))
}

// TestResourceGroupAndTagFilters: resource groups compare
// case-insensitively; tag filters as for AKS.
func TestResourceGroupAndTagFilters(t *testing.T) {
	a := newARMServer(t)
	apps, data, other := cluster(subC, "rg-apps", "alpha"), cluster(subC, "RG-Data", "bravo"), cluster(subC, "rg-other", "charlie")
	legacy := cluster(subC, "rg-apps", "delta")
	legacy.Tags = map[string]string{"Legacy": "yes"}
	a.SetOpenShiftClusters(apps, data, other, legacy)
	cfg := Config{Subscriptions: []string{subC}, ResourceGroups: []string{"RG-APPS", "rg-data"}, ExcludeTags: map[string]string{"legacy": "*"}}
	env := newTestEnv(t, cfg, a.clientOptions(), boundAll(apps, data, other, legacy), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"alpha", "bravo"}, names(cs))
	assert.Equal(t, "RG-Data", byName(cs, "bravo").Group)
	assert.Equal(t, "RG-Data", byName(cs, "bravo").Labels[LabelResourceGroup])
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.Skipped.WithLabelValues(string(skipResourceGroup))))
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.Skipped.WithLabelValues(string(skipTags))))
}

// TestTenantRulesSeeTheResourceGroup: Group is the resource group, so a
// tenant rule's resourceGroups admits an ARO cluster whose owner claims
// the tenant.
func TestTenantRulesSeeTheResourceGroup(t *testing.T) {
	a := newARMServer(t)
	c := cluster(subC, "RG-Acme", "acme")
	c.Tags = map[string]string{"tenant": "acme"}
	a.SetOpenShiftClusters(c)
	env := newTestEnv(t, explicit(subC), a.clientOptions(), boundAll(c), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 1)
	got := cs[0]
	assert.True(t, got.TenantFromOwner)
	rules := map[string]sources.TenantRule{"acme": {ResourceGroups: []string{"rg-acme"}, Project: "acme"}}
	assert.Empty(t, got.ApplyTenantRule(rules, false))
	assert.Equal(t, "acme", got.Project)
	other := map[string]sources.TenantRule{"acme": {ResourceGroups: []string{"rg-other"}}}
	assert.NotEmpty(t, cs[0].ApplyTenantRule(other, false))
}
