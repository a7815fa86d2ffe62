package aks

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

type pages = [][]*armcontainerservice.ManagedCluster

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
	assert.Equal(t, 5.0, testutil.ToFloat64(env.src.metrics.apiRequests.WithLabelValues("managedClusters.listClusterUserCredential", "200")))
	assert.Equal(t, 3.0, testutil.ToFloat64(env.src.metrics.apiRequests.WithLabelValues("managedClusters.list", "200")))
	assertNoSecret(t, env, cs)
}

func TestPageErrorFailsTheListing(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha")}}}))
	f.pager = func(sub string) (resp azfake.PagerResponder[armcontainerservice.ManagedClustersClientListResponse]) {
		resp.AddPage(http.StatusOK, listPage(managedCluster(sub, "rg", "p1-"+sub[:4])), nil)
		if sub == subB {
			resp.AddResponseError(http.StatusForbidden, "AuthorizationFailed")
		}
		return resp
	}
	env := newTestEnv(t, explicit(subA, subB), f, nil)

	cs, err := env.src.Clusters(context.Background())
	require.Error(t, err)
	assert.Nil(t, cs, "no partial result")
	assert.Contains(t, err.Error(), "subscription "+subB)
	assert.Contains(t, err.Error(), "HTTP 403 AuthorizationFailed")
	assert.NotContains(t, err.Error(), "\n", "one line for /status")
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.errors.WithLabelValues(errListClusters, subB)))
}

func TestUnknownSubscriptionFailsTheListing(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha")}}}))
	env := newTestEnv(t, explicit(subA, subC), f, nil)
	_, err := env.src.Clusters(context.Background())
	require.ErrorContains(t, err, "subscription "+subC+": list clusters: HTTP 404 SubscriptionNotFound")
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
			cs, err := env.src.Clusters(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"alpha", "bravo"}, names(cs))

			f.withSubscriptions(tt.after)
			f.resetCalls()
			cs, err = env.src.Clusters(ctx)
			require.NoError(t, err, "a subscription that left is no error")
			assert.Equal(t, []string{"alpha"}, names(cs), "its clusters are absent, the others listed as before")
			assert.Equal(t, sources.PhaseReady, cs[0].Phase)
			assert.Equal(t, 1, f.Calls("list"))
			env.src.mu.Lock()
			assert.NotContains(t, env.src.clients, subB, "its client is forgotten")
			assert.Len(t, env.src.cas, 1, "its CA is forgotten")
			env.src.mu.Unlock()
		})
	}
}

func TestNoSubscriptionIsAnError(t *testing.T) {
	f := newFakeARM(t, staticPages(nil)).withSubscriptions(map[string]armsubscriptions.SubscriptionState{
		subB: armsubscriptions.SubscriptionStateDeleted,
	})
	env := newTestEnv(t, Config{}, f, nil)
	cs, err := env.src.Clusters(context.Background())
	require.EqualError(t, err, "list subscriptions: no subscription is visible to the identity (Deleted ones are not listed)")
	assert.Nil(t, cs)
	assert.Zero(t, f.Calls("list"))
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.errors.WithLabelValues(errListSubscriptions, "")))
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
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.skipped.WithLabelValues(string(skipResourceGroup))))
}

func TestPrivateClusterPolicies(t *testing.T) {
	clusters := pages{{
		managedCluster(subA, "rg", "public"),
		managedCluster(subA, "rg", "private-with-public-fqdn", private(true)),
		managedCluster(subA, "rg", "private-only", private(false)),
	}}
	tests := []struct {
		policy  PrivatePolicy
		proxy   string
		servers map[string]string
	}{
		{PrivateExclude, "", map[string]string{
			"public": "https://public-dns.hcp.westeurope.azmk8s.io:443",
		}},
		{PrivateFQDN, "socks5://proxy.internal:1080", map[string]string{
			"public":                   "https://public-dns.hcp.westeurope.azmk8s.io:443",
			"private-with-public-fqdn": "https://private-with-public-fqdn-dns.privatelink.westeurope.azmk8s.io:443",
			"private-only":             "https://private-only-dns.privatelink.westeurope.azmk8s.io:443",
		}},
		{PrivatePublicFQDN, "", map[string]string{
			"public":                   "https://public-dns.hcp.westeurope.azmk8s.io:443",
			"private-with-public-fqdn": "https://private-with-public-fqdn-dns.hcp.westeurope.azmk8s.io:443",
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			f := newFakeARM(t, staticPages(map[string]pages{subA: clusters}))
			env := newTestEnv(t, Config{Subscriptions: []string{subA}, PrivateClusters: tt.policy, PrivateProxyURL: tt.proxy}, f, nil)
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
			assert.Equal(t, float64(3-len(tt.servers)), testutil.ToFloat64(env.src.metrics.skipped.WithLabelValues(string(skipPrivate))))
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

func TestCAIsCachedUntilTTL(t *testing.T) {
	current := pages{{managedCluster(subA, "rg", "alpha"), managedCluster(subA, "rg", "bravo")}}
	f := newFakeARM(t, func(string) pages { return current })
	env := newTestEnv(t, Config{Subscriptions: []string{subA}, CATTL: "1h"}, f, nil)
	ctx := context.Background()

	_, err := env.src.Clusters(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, f.Calls("credentials"))

	f.resetCalls()
	env.now = env.now.Add(47 * time.Minute) // each CA lives 48-60 minutes
	cs, err := env.src.Clusters(ctx)
	require.NoError(t, err)
	assert.Zero(t, f.Calls("credentials"), "steady state reads no credential")
	assert.Equal(t, 1, f.Calls("list"))
	assert.Equal(t, base64.StdEncoding.EncodeToString(testCAPEM(t)), byName(cs, "bravo").CA.Data())
	assert.Equal(t, 2.0, testutil.ToFloat64(env.src.metrics.caCache.WithLabelValues("hit")))
	assert.Equal(t, 2.0, testutil.ToFloat64(env.src.metrics.caCache.WithLabelValues("miss")))

	f.resetCalls()
	env.now = env.now.Add(13 * time.Minute)
	_, err = env.src.Clusters(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, f.Calls("credentials"), "read again after the TTL")

	// A new cluster costs one read; a cluster that left is forgotten.
	current = pages{{managedCluster(subA, "rg", "alpha"), managedCluster(subA, "rg", "charlie")}}
	f.resetCalls()
	_, err = env.src.Clusters(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, f.Calls("credentials"))
	assert.Len(t, env.src.cas, 2)
	assertNoSecret(t, env, cs)
}

func TestCAForbiddenListsTheClusterNotReady(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha"), managedCluster(subA, "rg", "locked")}}}))
	forbid := true
	f.creds = func(sub, rg, name string) (resp azfake.Responder[armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse], errResp azfake.ErrorResponder) {
		if name == "locked" && forbid {
			errResp.SetResponseError(http.StatusForbidden, "AuthorizationFailed")
			return resp, errResp
		}
		resp.SetResponse(http.StatusOK, credentialsResponse(kubeconfig(name, testCAPEM(t))), nil)
		return resp, errResp
	}
	env := newTestEnv(t, Config{Subscriptions: []string{subA}, CAErrorTTL: "5m"}, f, nil)
	ctx := context.Background()

	cs, err := env.src.Clusters(ctx)
	require.NoError(t, err, "a CA that cannot be read does not fail the listing")
	require.Equal(t, []string{"alpha", "locked"}, names(cs))
	assert.True(t, byName(cs, "alpha").Ready)
	locked := byName(cs, "locked")
	assert.False(t, locked.Ready)
	assert.True(t, locked.CA.IsZero(), "never a Secret without CA")
	assert.Equal(t, "CA unavailable: listClusterUserCredential: HTTP 403 AuthorizationFailed", locked.NotReadyReason)
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.notReady.WithLabelValues(notReadyCA)))
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.errors.WithLabelValues(errCAFetch, subA)))
	// The SDK fakes return errors as transport errors, without a response.
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.apiRequests.WithLabelValues("managedClusters.listClusterUserCredential", "error")))

	// The failure is remembered: no call until caErrorTTL has passed.
	f.resetCalls()
	env.now = env.now.Add(4 * time.Minute)
	cs, err = env.src.Clusters(ctx)
	require.NoError(t, err)
	assert.Zero(t, f.Calls("credentials"))
	assert.False(t, byName(cs, "locked").Ready)
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.caCache.WithLabelValues("negative")))

	// Once the permission is granted, the next read after caErrorTTL works.
	forbid = false
	f.resetCalls()
	env.now = env.now.Add(time.Minute)
	cs, err = env.src.Clusters(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, f.Calls("credentials"))
	assert.True(t, byName(cs, "locked").Ready)
	assert.Equal(t, 0.0, testutil.ToFloat64(env.src.metrics.notReady.WithLabelValues(notReadyCA)))
}

func TestExpiredCAIsKeptWhenTheReadFails(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha")}}}))
	env := newTestEnv(t, explicit(subA), f, nil)
	ctx := context.Background()
	_, err := env.src.Clusters(ctx)
	require.NoError(t, err)

	f.creds = func(_, _, _ string) (resp azfake.Responder[armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse], errResp azfake.ErrorResponder) {
		errResp.SetResponseError(http.StatusInternalServerError, "InternalServerError")
		return resp, errResp
	}
	env.now = env.now.Add(2 * time.Hour)
	cs, err := env.src.Clusters(ctx)
	require.NoError(t, err)
	alpha := byName(cs, "alpha")
	assert.True(t, alpha.Ready, "a CA rotation is rare; flapping the cluster out would delete its Applications")
	assert.Equal(t, base64.StdEncoding.EncodeToString(testCAPEM(t)), alpha.CA.Data())
	assert.Contains(t, env.logs.String(), `"keptExpiredCA":true`)
}

func TestUnusableKubeconfigListsTheClusterNotReady(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha")}}}))
	f.creds = func(_, _, _ string) (resp azfake.Responder[armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse], errResp azfake.ErrorResponder) {
		resp.SetResponse(http.StatusOK, credentialsResponse([]byte("token: "+secretToken+"\n\tnot: [yaml")), nil)
		return resp, errResp
	}
	env := newTestEnv(t, explicit(subA), f, nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.False(t, cs[0].Ready)
	assert.Equal(t, "CA unavailable: listClusterUserCredential: the kubeconfig does not parse", cs[0].NotReadyReason)
	assertNoSecret(t, env, cs)
}

func TestAuthenticationFailure(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"configured subscription", explicit(subA), "subscription " + subA + ": list clusters: AADSTS700016: application not found in the directory"},
		{"all subscriptions", Config{}, "list subscriptions: AADSTS700016: application not found in the directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cred := &azfake.TokenCredential{}
			cred.SetError(errors.New("AADSTS700016: application not found in the directory\ntrace id: 1234"))
			f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha")}}})).
				withSubscriptions(map[string]armsubscriptions.SubscriptionState{subA: armsubscriptions.SubscriptionStateEnabled})
			env := newTestEnv(t, tt.cfg, f, cred)
			cs, err := env.src.Clusters(context.Background())
			require.EqualError(t, err, tt.want)
			assert.Nil(t, cs)
			assert.Zero(t, f.totalCalls(), "nothing is sent without a token")
		})
	}
}

func TestMalformedClusterFailsTheListing(t *testing.T) {
	bad := managedCluster(subA, "rg", "alpha")
	bad.ID = to.Ptr("/subscriptions/" + subA + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm")
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "ok"), bad}}}))
	env := newTestEnv(t, explicit(subA), f, nil)
	cs, err := env.src.Clusters(context.Background())
	require.ErrorContains(t, err, "subscription "+subA+": list clusters: malformed response: cluster id")
	assert.Nil(t, cs)
	assert.Zero(t, f.Calls("credentials"))
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

func TestCancelledListingReturnsNothing(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha")}}}))
	env := newTestEnv(t, explicit(subA), f, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cs, err := env.src.Clusters(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, cs)
	assert.Equal(t, 0.0, testutil.ToFloat64(env.src.metrics.errors.WithLabelValues(errListClusters, subA)), "a cancelled listing is not an API error")
}

func TestNewRejectsBadConfigAndDuplicateMetrics(t *testing.T) {
	_, err := New("aks", Config{Subscriptions: []string{"nope"}, CATTL: "-1s"}, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "subscriptions[0]")
	assert.Contains(t, err.Error(), "caTTL: must be positive")

	_, err = New("", Config{}, Options{})
	require.EqualError(t, err, "aks source: no name")

	env := newTestEnv(t, explicit(subA), newFakeARM(t, staticPages(nil)), nil)
	_, err = New("again", explicit(subA), Options{Registerer: env.reg, Credential: &azfake.TokenCredential{}})
	require.ErrorContains(t, err, "register metrics")
}

func TestNewBuildsTheDefaultCredentialWithoutCallingAzure(t *testing.T) {
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", "/nonexistent/token")
	t.Setenv("AZURE_CLIENT_ID", "00000000-0000-0000-0000-000000000001")
	t.Setenv("AZURE_TENANT_ID", "00000000-0000-0000-0000-000000000002")
	src, err := New("aks", Config{ClientID: "00000000-0000-0000-0000-000000000003"}, Options{})
	require.NoError(t, err)
	assert.NotNil(t, src.cred)
	assert.NotNil(t, src.subs)
}

func TestMetricNames(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha"), managedCluster(subA, "rg", "beta", private(false))}}}))
	env := newTestEnv(t, explicit(subA), f, nil)
	_, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	mfs, err := env.reg.Gather()
	require.NoError(t, err)
	var got []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				assert.NotEqual(t, "source", l.GetName(), "the caller adds the source label")
			}
		}
	}
	assert.Equal(t, []string{
		"argocd_cluster_discovery_aks_api_requests_total",
		"argocd_cluster_discovery_aks_ca_cache_lookups_total",
		"argocd_cluster_discovery_aks_clusters_not_ready",
		"argocd_cluster_discovery_aks_clusters_skipped",
		"argocd_cluster_discovery_aks_listing_duration_seconds",
	}, got, "errors_total appears with its first error")
}

func TestARMOptions(t *testing.T) {
	m, err := newMetrics(nil)
	require.NoError(t, err)
	publicRM := cloud.AzurePublic.Services[cloud.ResourceManager].Endpoint

	o := armOptions(Config{Cloud: "AzureChina", ARMEndpoint: "https://arm.example.com"}, nil, m)
	assert.True(t, o.DisableRPRegistration, "a discovery service never registers resource providers")
	assert.Len(t, o.PerRetryPolicies, 1)
	assert.Equal(t, cloud.AzureChina.ActiveDirectoryAuthorityHost, o.Cloud.ActiveDirectoryAuthorityHost)
	assert.Equal(t, "https://arm.example.com", o.Cloud.Services[cloud.ResourceManager].Endpoint)
	assert.Equal(t, cloud.AzureChina.Services[cloud.ResourceManager].Audience, o.Cloud.Services[cloud.ResourceManager].Audience)
	assert.NotEqual(t, "https://arm.example.com", cloud.AzureChina.Services[cloud.ResourceManager].Endpoint, "the SDK's cloud is not modified")

	base := &arm.ClientOptions{}
	base.Transport = http.DefaultClient
	o = armOptions(Config{Cloud: "AzurePublic"}, base, m)
	assert.Equal(t, publicRM, o.Cloud.Services[cloud.ResourceManager].Endpoint)
	assert.Empty(t, base.PerRetryPolicies, "the caller's options are not modified")
	assert.False(t, base.DisableRPRegistration)
	assert.Equal(t, http.DefaultClient, o.Transport)
}
