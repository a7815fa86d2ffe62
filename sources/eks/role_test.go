package eks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

func TestParseRoleARN(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"arn:aws:iam::123456789012:role/argocd", true},
		{"arn:aws-eusc:iam::123456789012:role/argocd", true},
		{"arn:aws-us-gov:iam::123456789012:role/teams/payments/argocd", true},
		{"arn:aws:iam::123456789012:role/service-role/a+b=c,d.e@f_g-h", true},
		{"arn:aws:iam::123456789012:role/", false},
		{"arn:aws:iam::123456789012:role/a b", false},
		{"arn:aws:iam::123456789012:role//argocd", false},
		{"arn:aws:iam::123456789012:role/" + strings.Repeat("r", 64), true},
		{"arn:aws:iam::123456789012:role/" + strings.Repeat("r", 65), false},
		{"arn:aws:iam::123456789012:user/argocd", false},
		{"arn:aws:iam::12345:role/argocd", false},
		{"arn:aws:sts::123456789012:role/argocd", false},
		{"arn:aws:iam:eu-west-1:123456789012:role/argocd", false},
		{"arn:mars:iam::123456789012:role/argocd", false},
		{" arn:aws:iam::123456789012:role/argocd", false},
		{"argocd", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, ok := parseRoleARN(tc.in)
			assert.Equal(t, tc.ok, ok)
		})
	}
}

// TestArgocdRoleByPartition: a cluster's role tag must name a role of the
// partition of the cluster's region.
func TestArgocdRoleByPartition(t *testing.T) {
	m := &mapper{roleTag: "argocd-role-arn", rolePatterns: []string{"arn:*:iam::*:role/argocd-*"}}
	acct := Account{ID: "123456789012", ArgocdRoleARN: "arn:aws-eusc:iam::123456789012:role/argocd"}
	for _, tc := range []struct {
		region, tag, want, reason string
	}{
		{region: "eusc-de-east-1", want: "arn:aws-eusc:iam::123456789012:role/argocd"},
		{region: "eusc-de-east-1", tag: "arn:aws-eusc:iam::123456789012:role/argocd-a", want: "arn:aws-eusc:iam::123456789012:role/argocd-a"},
		{region: "eusc-de-east-1", tag: "arn:aws:iam::123456789012:role/argocd-a",
			reason: `Argo CD role tag argocd-role-arn: "arn:aws:iam::123456789012:role/argocd-a" is a role of partition aws, not aws-eusc (the cluster's)`},
		{region: "cn-north-1", tag: "arn:aws-cn:iam::123456789012:role/argocd-a", want: "arn:aws-cn:iam::123456789012:role/argocd-a"},
		{region: "us-gov-west-1", tag: "arn:aws-us-gov:iam::123456789012:role/argocd-a", want: "arn:aws-us-gov:iam::123456789012:role/argocd-a"},
		{region: "us-gov-west-1", tag: "arn:aws:iam::123456789012:role/argocd-a",
			reason: `Argo CD role tag argocd-role-arn: "arn:aws:iam::123456789012:role/argocd-a" is a role of partition aws, not aws-us-gov (the cluster's)`},
	} {
		t.Run(tc.region+" "+tc.tag, func(t *testing.T) {
			tags := map[string]string{}
			if tc.tag != "" {
				tags["argocd-role-arn"] = tc.tag
			}
			role, reason := m.argocdRole(tags, acct, tc.region)
			assert.Equal(t, tc.want, role)
			assert.Equal(t, tc.reason, reason)
		})
	}
}

// TestRoleTagListing lists an account of the European Sovereign Cloud
// through the fake: a cluster's allowed role tag replaces the account's
// role, a refused one leaves the cluster not ready, counted by a fixed
// reason.
func TestRoleTagListing(t *testing.T) {
	const region = "eusc-de-east-1"
	f := newFake(t)
	f.add(acctA, region,
		fakeCluster{Name: "own-role", Tags: map[string]string{"argocd-role-arn": "arn:aws-eusc:iam::" + acctA + ":role/argocd-own"}},
		fakeCluster{Name: "other-account", Tags: map[string]string{"argocd-role-arn": "arn:aws-eusc:iam::" + acctB + ":role/argocd-own"}},
		fakeCluster{Name: "untagged", Tags: map[string]string{"team": "x"}},
		// the owner names a role of the right account that no rolePattern admits
		fakeCluster{Name: "admin-role", Tags: map[string]string{"argocd-role-arn": "arn:aws-eusc:iam::" + acctA + ":role/admin"}},
	)
	cfg := f.testConfig()
	cfg.Regions = []string{region}
	cfg.Accounts[0].RoleARN = "arn:aws-eusc:iam::" + acctA + ":role/discovery"
	cfg.Accounts[0].ArgocdRoleARN = "arn:aws-eusc:iam::" + acctA + ":role/argocd"
	cfg.RolePattern = []string{"arn:aws-eusc:iam::*:role/argocd-*"}
	s, reg := f.newSource(t, cfg, nil)
	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	byName := map[string]sources.Cluster{}
	for _, c := range got {
		byName[c.Name] = c
	}
	require.Len(t, byName, 4)

	own := byName["own-role"]
	assert.True(t, own.Ready, own.NotReadyReason)
	assert.Equal(t, "arn:aws-eusc:iam::"+acctA+":role/argocd-own", own.Auth.AWS.RoleARN)
	assert.Equal(t, "arn:aws-eusc:eks:"+region+":"+acctA+":cluster/own-role", own.ID)
	assert.Equal(t, "eks/"+acctA+"/"+region+"/own-role", own.CloudID)
	require.NoError(t, own.Validate())

	assert.Equal(t, "arn:aws-eusc:iam::"+acctA+":role/argocd", byName["untagged"].Auth.AWS.RoleARN)
	assert.True(t, byName["untagged"].Ready)

	other := byName["other-account"]
	assert.False(t, other.Ready)
	assert.Contains(t, other.NotReadyReason, "is a role of account "+acctB+", not "+acctA)
	assert.Empty(t, other.Auth.AWS.RoleARN, "never the account's role")

	admin := byName["admin-role"]
	assert.False(t, admin.Ready, "a role no rolePattern admits is not used")
	assert.Contains(t, admin.NotReadyReason, "rolePattern")
	assert.Empty(t, admin.Auth.AWS.RoleARN, "neither the tag's role nor the account's")
	assert.Equal(t, 2.0, counter(t, reg, "argocd_cluster_discovery_eks_clusters_not_ready", map[string]string{"reason": notReadyRole}))
}

// TestTenantTagIsTheOwners: a tenant tag is written by the cluster's
// owner, so a listing through the SDK marks it as such, and the tenant
// rules then refuse it unless a rule admits the cluster (the inventory
// serves nothing a refused claim names).
func TestTenantTagIsTheOwners(t *testing.T) {
	const region = "eu-west-1"
	f := newFake(t)
	f.add(acctA, region,
		fakeCluster{Name: "claims-acme", Tags: map[string]string{"tenant": "acme"}},
		fakeCluster{Name: "no-tenant", Tags: map[string]string{"team": "x"}},
	)
	cfg := f.testConfig()
	cfg.Regions = []string{region}
	s, _ := f.newSource(t, cfg, nil)
	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 2)
	byName := map[string]sources.Cluster{}
	for _, c := range got {
		byName[c.Name] = c
	}
	claim := byName["claims-acme"]
	assert.True(t, claim.TenantFromOwner, "the tag is the owner's")
	assert.Contains(t, claim.ApplyTenantRule(nil, false), `tenant "acme" is the cluster owner's label or tag`)
	assert.Contains(t, claim.ApplyTenantRule(map[string]sources.TenantRule{"acme": {Accounts: []string{acctB}}}, false),
		"no rule secrets.tenants.acme admits this cluster", "a rule for another account")
	assert.Empty(t, claim.ApplyTenantRule(map[string]sources.TenantRule{"acme": {Accounts: []string{acctA}}}, false), "a rule that admits it")
	assert.False(t, byName["no-tenant"].TenantFromOwner)
}

// TestTenantTagAliasClaimsNothing: a tag whose key becomes the label key
// tenant once made valid ("tenant_", "-tenant", "/tenant") is no tenant
// claim, so no rule checks it; through the inventory the cluster's labels
// (the answer's, and the Secret's: see clustersecret's
// TestBuildTenantLabelIsTheClustersTenant) do not carry it as the tenant.
func TestTenantTagAliasClaimsNothing(t *testing.T) {
	const region = "eu-west-1"
	f := newFake(t)
	f.add(acctA, region,
		fakeCluster{Name: "underscore", Tags: map[string]string{"tenant_": "globex"}},
		fakeCluster{Name: "dash", Tags: map[string]string{"-tenant": "globex"}},
		fakeCluster{Name: "slash", Tags: map[string]string{"/tenant": "globex"}},
	)
	cfg := f.testConfig()
	cfg.Regions = []string{region}
	s, _ := f.newSource(t, cfg, nil)
	inv, err := inventory.New([]inventory.SourceSpec{{Name: "aws", Provider: sources.ProviderEKS, Kind: sources.KindCloud, Source: s,
		Interval: time.Hour, Timeout: 30 * time.Second}},
		inventory.Options{Tenants: map[string]sources.TenantRule{"globex": {Accounts: []string{acctB}, Project: "globex"}}})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(context.Background()))
	snap := inv.Snapshot()
	require.Len(t, snap.Clusters, 3)
	for i := range snap.Clusters {
		c := snap.Clusters[i]
		assert.Empty(t, c.Tenant, c.Name)
		assert.NotContains(t, c.Labels, "tenant", "%s: the cluster's labels", c.Name)
	}
}
