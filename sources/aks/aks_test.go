package aks

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
)

func TestClustersAcrossSubscriptionsAndPages(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{
		subA: {
			{managedCluster(subA, "rg-a", "alpha"), managedCluster(subA, "rg-a", "bravo")},
			{managedCluster(subA, "rg-b", "charlie")},
		},
		subB: {{managedCluster(subB, "rg-c", "delta"), managedCluster(subB, "rg-c", "echo", stopped)}},
	}))
	env := newTestEnv(t, explicit(subA, strings.ToUpper(subB)), f, nil)

	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"alpha", "bravo", "charlie", "delta", "echo"}, names(cs))
	assert.Equal(t, 3, f.Calls("list"), "two pages in A, one in B")
	assert.Equal(t, 5, f.Calls("credentials"))
	assert.Zero(t, f.Calls("subscriptions"), "configured subscriptions are not listed")

	d := byName(cs, "delta")
	assert.Equal(t, subB, d.Account, "subscription ids are lower-cased")
	assert.Equal(t, base64.StdEncoding.EncodeToString(testCAPEM(t)), d.CA.Data())
	assert.True(t, d.Ready)
	assert.Equal(t, sources.PhaseReady, d.Phase)
	assert.Equal(t, "/subscriptions/"+subB+"/resourcegroups/rg-c/providers/microsoft.containerservice/managedclusters/delta", d.ID)
	echo := byName(cs, "echo")
	assert.True(t, echo.Ready, "a stopped cluster is listed, and renderable")
	assert.Equal(t, sources.PhaseDegraded, echo.Phase)
	for _, c := range cs {
		require.NoError(t, c.Validate())
		require.NoError(t, sources.ValidateCAData(c.CA.Data()))
	}
	assert.Equal(t, 5.0, testutil.ToFloat64(env.src.metrics.APIRequests.WithLabelValues("managedClusters.listClusterUserCredential", "success")))
	assert.Equal(t, 3.0, testutil.ToFloat64(env.src.metrics.APIRequests.WithLabelValues("managedClusters.list", "success")))
	assertNoSecret(t, env, cs)
}

func TestDiscoveredSubscriptions(t *testing.T) {
	const subD, subE, subF = "0b1f6471-1bf0-4dda-aec3-000000000004", "0b1f6471-1bf0-4dda-aec3-000000000005", "0b1f6471-1bf0-4dda-aec3-000000000006"
	deleting := func(mc *armcontainerservice.ManagedCluster) { mc.Properties.ProvisioningState = to.Ptr("Deleting") }
	// Listing E would fail: it has no pages.
	f := newFakeARM(t, staticPages(map[string]pages{
		subA: {{managedCluster(subA, "rg", "enabled")}},
		subB: {{managedCluster(subB, "rg", "disabled"), managedCluster(subB, "rg", "disabled-stopped", stopped), managedCluster(subB, "rg", "disabled-deleting", deleting)}},
		subC: {{managedCluster(subC, "rg", "warned")}},
		subD: {{managedCluster(subD, "rg", "pastdue", stopped)}},
		subF: {{managedCluster(subF, "rg", "unknown-state")}},
	})).withSubscriptions(map[string]armsubscriptions.SubscriptionState{
		subA: armsubscriptions.SubscriptionStateEnabled,
		subB: armsubscriptions.SubscriptionStateDisabled,
		subC: armsubscriptions.SubscriptionStateWarned,
		subD: armsubscriptions.SubscriptionStatePastDue,
		subE: armsubscriptions.SubscriptionStateDeleted,
		subF: "Frozen",
	})
	env := newTestEnv(t, Config{}, f, nil)

	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, f.Calls("subscriptions"))
	assert.Equal(t, 5, f.Calls("list"), "every subscription but the Deleted one")
	want := map[string]struct {
		phase sources.Phase
		state string // subscription-state annotation
	}{
		"enabled":           {sources.PhaseReady, ""},
		"disabled":          {sources.PhaseDegraded, "Disabled"},
		"disabled-stopped":  {sources.PhaseDegraded, "Disabled"},
		"disabled-deleting": {sources.PhaseLeaving, "Disabled"},
		"warned":            {sources.PhaseReady, "Warned"},
		"pastdue":           {sources.PhaseDegraded, "PastDue"},
		"unknown-state":     {sources.PhaseReady, "Frozen"},
	}
	got := map[string]struct {
		phase sources.Phase
		state string
	}{}
	for _, c := range cs {
		got[c.Name] = struct {
			phase sources.Phase
			state string
		}{c.Phase, c.Annotations[AnnotationSubscriptionState]}
		assert.True(t, c.Ready, c.Name)
	}
	assert.Equal(t, want, got)
	_, annotated := byName(cs, "enabled").Annotations[AnnotationSubscriptionState]
	assert.False(t, annotated, "no annotation for Enabled subscriptions")
	assert.Contains(t, env.logs.String(), `"msg":"subscription skipped","source":"azure-prod","subscription":"`+subE+`","state":"Deleted"`)
}

func TestSubscriptionThatLeavesOnlyRemovesItsClusters(t *testing.T) {
	both := map[string]armsubscriptions.SubscriptionState{
		subA: armsubscriptions.SubscriptionStateEnabled,
		subB: armsubscriptions.SubscriptionStateEnabled,
	}
	for _, tt := range []struct {
		name  string
		after map[string]armsubscriptions.SubscriptionState
	}{
		{"dropped from the list", map[string]armsubscriptions.SubscriptionState{subA: armsubscriptions.SubscriptionStateEnabled}},
		{"deleted", map[string]armsubscriptions.SubscriptionState{
			subA: armsubscriptions.SubscriptionStateEnabled, subB: armsubscriptions.SubscriptionStateDeleted,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeARM(t, staticPages(map[string]pages{
				subA: {{managedCluster(subA, "rg", "alpha")}},
				subB: {{managedCluster(subB, "rg", "bravo")}},
			})).withSubscriptions(both)
			env := newTestEnv(t, Config{}, f, nil)
			ctx := context.Background()
			cs, accounts, err := env.src.ClustersAndAccounts(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"alpha", "bravo"}, names(cs))
			assert.ElementsMatch(t, []string{azurearm.Scope(subA, "rg"), azurearm.Scope(subB, "rg")}, accounts, "the resource groups covered")
			assert.Equal(t, subB, cs[1].Account, "a cluster's account is its subscription")
			assert.True(t, strings.HasPrefix(cs[1].ID, azurearm.Scope(subB, "rg")), "its id is in its resource group's scope")

			f.withSubscriptions(tt.after)
			f.resetCalls()
			cs, accounts, err = env.src.ClustersAndAccounts(ctx)
			require.NoError(t, err, "a subscription that left is no error")
			assert.Equal(t, []string{"alpha"}, names(cs), "its clusters are absent, the others listed as before")
			assert.Equal(t, []string{azurearm.Scope(subA, "rg")}, accounts, "the listing no longer covers it: the inventory holds its clusters")
			assert.Equal(t, sources.PhaseReady, cs[0].Phase)
			assert.Equal(t, 1, f.Calls("list"))
			assert.NotContains(t, env.src.client.clusters.Subscriptions(), subB, "its client is forgotten")
			env.src.mu.Lock()
			assert.Len(t, env.src.cas, 1, "its CA is forgotten")
			env.src.mu.Unlock()
		})
	}
}

func TestResourceGroupFilter(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{
		managedCluster(subA, "rg-apps", "alpha"), managedCluster(subA, "RG-Data", "bravo"), managedCluster(subA, "rg-other", "charlie"),
	}}}))
	env := newTestEnv(t, Config{Subscriptions: []string{subA}, ResourceGroups: []string{"rg-apps", "rg-data"}}, f, nil)

	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"alpha", "bravo"}, names(cs))
	assert.Equal(t, "RG-Data", byName(cs, "bravo").Labels[LabelResourceGroup])
	assert.Equal(t, 2, f.Calls("credentials"), "no CA read for filtered clusters")
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.Skipped.WithLabelValues(string(skipResourceGroup))))
}

func TestPrivateClusterPolicies(t *testing.T) {
	clusters := pages{{
		managedCluster(subA, "rg", "public"),
		managedCluster(subA, "rg", "private-with-public-fqdn", private(true)),
		managedCluster(subA, "rg", "private-only", private(false)),
	}}
	// skipped: left out by the policy; a private cluster the policy keeps
	// but whose endpoint is missing is listed, not ready, with no server
	tests := []struct {
		policy  PrivatePolicy
		proxy   string
		servers map[string]string
		skipped int
	}{
		{PrivateExclude, "", map[string]string{
			"public": "https://public-dns.hcp.westeurope.azmk8s.io:443",
		}, 2},
		{PrivateFQDN, "socks5://proxy.internal:1080", map[string]string{
			"public":                   "https://public-dns.hcp.westeurope.azmk8s.io:443",
			"private-with-public-fqdn": "https://private-with-public-fqdn-dns.privatelink.westeurope.azmk8s.io:443",
			"private-only":             "https://private-only-dns.privatelink.westeurope.azmk8s.io:443",
		}, 0},
		{PrivatePublicFQDN, "", map[string]string{
			"public":                   "https://public-dns.hcp.westeurope.azmk8s.io:443",
			"private-with-public-fqdn": "https://private-with-public-fqdn-dns.hcp.westeurope.azmk8s.io:443",
			"private-only":             "",
		}, 0},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			f := newFakeARM(t, staticPages(map[string]pages{subA: clusters}))
			env := newTestEnv(t, Config{Subscriptions: []string{subA}, PrivateEndpoints: PrivateEndpoints{Policy: tt.policy, ProxyURL: tt.proxy}}, f, nil)
			cs, err := env.src.Clusters(context.Background())
			require.NoError(t, err)
			got := map[string]string{}
			for _, c := range cs {
				got[c.Name] = c.Server
				if c.Name == "public" {
					assert.Empty(t, c.ProxyURL)
				} else {
					assert.Equal(t, tt.proxy, c.ProxyURL)
				}
			}
			assert.Equal(t, tt.servers, got)
			assert.Equal(t, float64(tt.skipped), testutil.ToFloat64(env.src.metrics.Skipped.WithLabelValues(string(skipPrivate))))
		})
	}
}

func TestStoppedAndFailedClustersAreListed(t *testing.T) {
	state := func(s string) func(*armcontainerservice.ManagedCluster) {
		return func(mc *armcontainerservice.ManagedCluster) { mc.Properties.ProvisioningState = to.Ptr(s) }
	}
	noFQDN := func(mc *armcontainerservice.ManagedCluster) { mc.Properties.Fqdn = nil }
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{
		managedCluster(subA, "rg", "running"),
		managedCluster(subA, "rg", "stopped", stopped),
		managedCluster(subA, "rg", "failed", state("Failed")),
		managedCluster(subA, "rg", "failed-creation", state("Failed"), noFQDN),
		managedCluster(subA, "rg", "upgrading", state("Upgrading")),
	}}}))
	env := newTestEnv(t, explicit(subA), f, nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	got := map[string]sources.Phase{}
	for _, c := range cs {
		got[c.Name] = c.Phase
	}
	assert.Equal(t, map[string]sources.Phase{
		"running": sources.PhaseReady, "stopped": sources.PhaseDegraded, "failed": sources.PhaseDegraded,
		"failed-creation": sources.PhasePending, "upgrading": sources.PhaseDegraded,
	}, got)
	assert.Equal(t, "Failed", byName(cs, "failed").State)
	assert.True(t, byName(cs, "failed").Ready)
	fc := byName(cs, "failed-creation")
	assert.False(t, fc.Ready)
	assert.Equal(t, "the cluster reports no API server FQDN", fc.NotReadyReason)
	assert.Equal(t, 4, f.Calls("credentials"), "no CA read without a server")
}

func TestSameNameInTwoSubscriptions(t *testing.T) {
	bySub := map[string]pages{
		subA: {{managedCluster(subA, "rg-weu", "shared")}},
		subB: {{managedCluster(subB, "rg-neu", "shared")}},
	}
	t.Run("default template lists both; the inventory reports the conflict", func(t *testing.T) {
		env := newTestEnv(t, explicit(subA, subB), newFakeARM(t, staticPages(bySub)), nil)
		cs, err := env.src.Clusters(context.Background())
		require.NoError(t, err)
		assert.Equal(t, []string{"shared", "shared"}, names(cs))
		assert.Contains(t, env.logs.String(), "two AKS clusters have the same name")
	})
	t.Run("a template with the resource group makes them unique", func(t *testing.T) {
		cfg := Config{Subscriptions: []string{subA, subB}, NamePrefix: "aks-", NameTemplate: "{{.Name}}-{{.ResourceGroup | lower}}"}
		env := newTestEnv(t, cfg, newFakeARM(t, staticPages(bySub)), nil)
		cs, err := env.src.Clusters(context.Background())
		require.NoError(t, err)
		assert.Equal(t, []string{"aks-shared-rg-neu", "aks-shared-rg-weu"}, names(cs))
	})
}

func TestProvider(t *testing.T) {
	var reg sources.Registration = Provider{}
	assert.Equal(t, sources.ProviderAKS, reg.Name())
	assert.Equal(t, sources.KindCloud, reg.Kind())
	cfg, ok := reg.NewConfig().(*Config)
	require.True(t, ok, "the section is a *Config")
	assert.Equal(t, &Config{}, cfg, "empty until Default")
}

func TestNewSourceRejectsBadConfigAndDuplicateMetrics(t *testing.T) {
	cfg := &Config{Subscriptions: []string{"nope"}, CATTL: sources.D(-time.Second)}
	cfg.Default()
	_, err := cfg.NewSource(sources.SourceOptions{Name: "aks"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "aks.subscriptions[0]")
	assert.Contains(t, err.Error(), "aks.caTTL: Invalid value: \"-1s\": must be at least 1s")

	_, err = (&Config{}).NewSource(sources.SourceOptions{Name: "aks"})
	require.ErrorContains(t, err, "aks.cloud: Unsupported value", "a section without its defaults is no valid section")

	cfg = &Config{}
	cfg.Default()
	src, err := cfg.NewSource(sources.SourceOptions{})
	require.EqualError(t, err, "aks source: no name")
	assert.Nil(t, src, "no typed nil in the interface")

	env := newTestEnv(t, explicit(subA), newFakeARM(t, staticPages(nil)), nil)
	cfg = &Config{Subscriptions: []string{subA}}
	cfg.Default()
	_, err = newSource(*cfg, sources.SourceOptions{Name: "again", Registerer: env.reg}, azurearm.Hooks{Credential: &azfake.TokenCredential{}})
	require.ErrorContains(t, err, "register metrics")
}

func TestNewBuildsTheDefaultCredentialWithoutCallingAzure(t *testing.T) {
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", "/nonexistent/token")
	t.Setenv("AZURE_CLIENT_ID", "00000000-0000-0000-0000-000000000001")
	t.Setenv("AZURE_TENANT_ID", "00000000-0000-0000-0000-000000000002")
	cfg := &Config{ClientID: "00000000-0000-0000-0000-000000000003"}
	cfg.Default()
	src, err := cfg.NewSource(sources.SourceOptions{Name: "aks"})
	require.NoError(t, err)
	require.IsType(t, &Source{}, src)
	assert.NotNil(t, src.(*Source).client.Cred)
	assert.NotNil(t, src.(*Source).client.Subs)
}

// TestLostResourceGroupLeavesItsClustersUncovered: through the ARM fake, a
// Reader role removed from one resource group takes its clusters out of
// the subscription's 200, and the scopes the listing reports no longer
// cover them (the inventory holds their departure, see sources/aro's
// TestLostResourceGroupIsAHeldDrop); the other group's stay covered.
func TestLostResourceGroupLeavesItsClustersUncovered(t *testing.T) {
	a := newARMServer(t)
	a.SetSubscriptions([]string{subA}, nil)
	a.SetClusters(
		fakeazure.ManagedCluster{Sub: subA, RG: "rg-apps", Name: "apps", Provisioning: "Succeeded", PowerState: "Running"},
		fakeazure.ManagedCluster{Sub: subA, RG: "RG-Data", Name: "data", Provisioning: "Succeeded", PowerState: "Running"},
	)
	env := newTestEnvWithOptions(t, Config{}, a.clientOptions(), nil)
	cs, scopes, err := env.src.ClustersAndAccounts(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"apps", "data"}, names(cs))
	assert.Equal(t, []string{azurearm.Scope(subA, "rg-apps"), azurearm.Scope(subA, "rg-data")}, scopes)
	for _, c := range cs {
		assert.True(t, slices.ContainsFunc(scopes, func(s string) bool { return strings.HasPrefix(c.ID, s) }), c.Name)
	}

	a.HideResourceGroups(subA, "rg-data")
	cs, scopes, err = env.src.ClustersAndAccounts(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"apps"}, names(cs))
	assert.Equal(t, []string{azurearm.Scope(subA, "rg-apps")}, scopes)
}
