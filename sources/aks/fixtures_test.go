package aks

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

func TestFixturesOverHTTP(t *testing.T) {
	const sub = "9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41"
	payments := sources.Cluster{
		Provider: sources.ProviderAKS,
		Name:     "aks-payments-prod-weu",
		Server:   "https://aks-payments-prod-weu-dns-5f3c1a9e.hcp.westeurope.azmk8s.io:443",
		CA:       sources.CAFromData(fixtureCAData(t)),
		Auth: sources.Auth{Kind: sources.AuthExec, Exec: &sources.ExecProvider{
			Command: "argocd-k8s-auth", Args: []string{"azure"}, APIVersion: "client.authentication.k8s.io/v1beta1",
			// the tenant of the cluster's aadProfile, the server application
			// left to argocd-k8s-auth's default (AKS-managed Entra ID)
			Env: map[string]string{
				"AAD_LOGIN_METHOD": "workloadidentity", "AZURE_CLIENT_ID": "80faf920-1908-4b52-b5ef-a8e7bedfc67a",
				"AZURE_TENANT_ID": "72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80",
			},
		}},
		CloudID: "aks/" + sub + "/rg-payments-prod/aks-payments-prod-weu",
		Labels:  map[string]string{"env": "prod", "team": "payments", "argocd": "enabled", LabelResourceGroup: "rg-payments-prod"},
		Annotations: map[string]string{
			AnnotationResourceID: "/subscriptions/" + sub + "/resourcegroups/rg-payments-prod/providers/Microsoft.ContainerService/managedClusters/aks-payments-prod-weu",
		},
		Region: "westeurope", Account: sub, Group: "rg-payments-prod", Tenant: "payments", TenantFromOwner: true,
		ID:                "/subscriptions/" + sub + "/resourcegroups/rg-payments-prod/providers/microsoft.containerservice/managedclusters/aks-payments-prod-weu",
		KubernetesVersion: "v1.31.11", State: "Succeeded", Phase: sources.PhaseReady, Ready: true,
	}
	tests := []struct {
		policy PrivatePolicy
		shared string // server of the private cluster; empty: excluded
	}{
		{PrivateExclude, ""},
		{PrivateFQDN, "https://aks-shared-neu-dns-5f3c1a9e.b1c9e2d4-7f3a-4e6b-8d5c-0a9f1e2b3c4d.privatelink.northeurope.azmk8s.io:443"},
		{PrivatePublicFQDN, "https://aks-shared-neu-dns-5f3c1a9e.hcp.northeurope.azmk8s.io:443"},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			a := newARMServer(t)
			// The fixture's second subscription is Disabled: still listed.
			a.SetList(subB, listJSON(t, armCluster(t, subB, "rg-legacy", "aks-legacy-weu", "Succeeded", "Running", true)))
			cfg := Config{
				PrivateEndpoints: PrivateEndpoints{Policy: tt.policy}, TenantTag: "team",
				Auth: AuthConfig{ClientID: "80faf920-1908-4b52-b5ef-a8e7bedfc67a"},
			}
			env := newTestEnvWithOptions(t, cfg, a.clientOptions(), nil)
			cs, err := env.src.Clusters(context.Background())
			require.NoError(t, err)

			want := []string{"aks-legacy-weu", "aks-payments-prod-weu"}
			if tt.shared != "" {
				want = append(want, "aks-shared-neu")
				assert.Equal(t, tt.shared, byName(cs, "aks-shared-neu").Server)
				assert.Equal(t, sources.PhaseReady, byName(cs, "aks-shared-neu").Phase)
			}
			require.Equal(t, want, names(cs), "the stopped sandbox has no aadProfile: left out for that, not for its state")
			assert.Equal(t, payments, byName(cs, "aks-payments-prod-weu"))
			legacy := byName(cs, "aks-legacy-weu")
			assert.Equal(t, sources.PhaseDegraded, legacy.Phase, "its subscription is Disabled")
			assert.Equal(t, "Disabled", legacy.Annotations[AnnotationSubscriptionState])
			assert.Equal(t, subB, legacy.Account)

			seen := a.Seen()
			assert.Equal(t, "GET /subscriptions?api-version=2022-12-01", seen[0])
			assert.Contains(t, seen, "GET /subscriptions/"+sub+"/providers/Microsoft.ContainerService/managedClusters?api-version=2025-10-01")
			assert.Contains(t, seen, "GET /subscriptions/"+subB+"/providers/Microsoft.ContainerService/managedClusters?api-version=2025-10-01")
			assert.True(t, slices.ContainsFunc(seen, func(s string) bool { return strings.Contains(s, "%24skiptoken=") }),
				"page 2 through the rewritten nextLink, followed verbatim")
			assert.Contains(t, seen, "GET /subscriptions/"+subB+"/resourcegroups?api-version=2025-04-01", "each subscription's resource groups")
			assert.Len(t, seen, 4+len(want)+2, "one credential read per served cluster, one group list per subscription")
			assert.Equal(t, "Bearer fake_token", a.Authorizations()[0])
		})
	}
}

// TestLifecycleStatesOverHTTP lists, through the ARM fake, clusters in
// every AKS state that used to be filtered out: each is listed, with its
// state verbatim, its phase and its lower-cased resource id.
func TestLifecycleStatesOverHTTP(t *testing.T) {
	tests := []struct {
		name, provisioning, power string
		fqdn                      bool
		phase                     sources.Phase
	}{
		{"running", "Succeeded", "Running", true, sources.PhaseReady},
		{"upgrading", "Upgrading", "Running", true, sources.PhaseDegraded},
		{"updating", "Updating", "Running", true, sources.PhaseDegraded},
		{"scaling", "Scaling", "Running", true, sources.PhaseDegraded},
		{"failed-running", "Failed", "Running", true, sources.PhaseDegraded},
		{"failed-creation", "Failed", "Running", false, sources.PhasePending},
		{"stopped", "Succeeded", "Stopped", true, sources.PhaseDegraded},
		{"starting", "Starting", "Running", true, sources.PhaseDegraded},
		{"canceled", "Canceled", "Running", true, sources.PhaseDegraded},
		{"creating", "Creating", "Running", false, sources.PhasePending},
		{"deleting", "Deleting", "Running", true, sources.PhaseLeaving},
		{"unknown", "Hibernating", "Stopped", true, sources.PhaseDegraded},
	}
	var clusters []map[string]any
	for _, tt := range tests {
		mc := armCluster(t, subA, "RG-Apps", tt.name, tt.provisioning, tt.power, tt.fqdn)
		// the fixture's sandbox, once given Entra ID, would be listed too
		mc["properties"].(map[string]any)["aadProfile"] = map[string]any{"managed": true}
		clusters = append(clusters, mc)
	}
	a := newARMServer(t)
	a.SetList(subA, listJSON(t, clusters...))
	env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, len(tests), "every cluster is listed, whatever its state")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := byName(cs, tt.name)
			require.Equal(t, tt.name, c.Name)
			assert.Equal(t, tt.provisioning, c.State)
			assert.Equal(t, tt.phase, c.Phase)
			assert.Equal(t, "/subscriptions/"+subA+"/resourcegroups/rg-apps/providers/microsoft.containerservice/managedclusters/"+tt.name, c.ID)
			assert.Equal(t, tt.fqdn, c.Ready, "renderable exactly when there is a server")
			if tt.fqdn {
				assert.Equal(t, fixtureCAData(t), c.CA.Data())
			} else {
				assert.Equal(t, "the cluster reports no API server FQDN", c.NotReadyReason)
			}
			assert.NotContains(t, c.Annotations, AnnotationSubscriptionState, "configured subscriptions have no known state")
		})
	}
	assert.Zero(t, testutil.CollectAndCount(env.src.metrics.Skipped), "nothing is skipped for its state")
}

// TestSubscriptionStatesOverHTTP discovers subscriptions through the ARM
// fake: Enabled, PastDue and Warned ones are listed as they are, the
// clusters of a Disabled one are degraded (or leaving), and a Deleted one
// is never requested.
func TestSubscriptionStatesOverHTTP(t *testing.T) {
	const (
		subPastDue = "0b1f6471-1bf0-4dda-aec3-00000000000a"
		subWarned  = "0b1f6471-1bf0-4dda-aec3-00000000000b"
		subDeleted = "0b1f6471-1bf0-4dda-aec3-00000000000c"
	)
	a := newARMServer(t)
	// The fixture lists subA (Enabled) and subB (Disabled).
	a.SetSubscriptionsBody(subscriptionsJSON(t, map[string]string{subPastDue: "PastDue", subWarned: "Warned", subDeleted: "Deleted"}))
	a.SetList(subB, listJSON(t,
		armCluster(t, subB, "rg", "disabled-running", "Succeeded", "Running", true),
		armCluster(t, subB, "rg", "disabled-upgrading", "Upgrading", "Running", true),
		armCluster(t, subB, "rg", "disabled-deleting", "Deleting", "Running", true)))
	a.SetList(subPastDue, listJSON(t, armCluster(t, subPastDue, "rg", "pastdue-running", "Succeeded", "Running", true)))
	a.SetList(subWarned, listJSON(t,
		armCluster(t, subWarned, "rg", "warned-running", "Succeeded", "Running", true),
		armCluster(t, subWarned, "rg", "warned-stopped", "Succeeded", "Stopped", true)))
	a.SetList(subDeleted, `{"value": [`) // never served: listing it would fail the whole listing
	env := newTestEnvWithOptions(t, Config{}, a.clientOptions(), nil)
	ctx := context.Background()
	cs, err := env.src.Clusters(ctx)
	require.NoError(t, err)

	type got struct {
		Phase     sources.Phase
		SubState  string
		Ready     bool
		ReasonHas string
	}
	want := map[string]got{
		"aks-payments-prod-weu": {sources.PhaseReady, "", true, ""},
		"disabled-running":      {sources.PhaseDegraded, "Disabled", true, ""},
		"disabled-upgrading":    {sources.PhaseDegraded, "Disabled", true, ""},
		"disabled-deleting":     {sources.PhaseLeaving, "Disabled", true, ""},
		"pastdue-running":       {sources.PhaseReady, "PastDue", true, ""},
		"warned-running":        {sources.PhaseReady, "Warned", true, ""},
		"warned-stopped":        {sources.PhaseDegraded, "Warned", true, ""},
	}
	check := func(t *testing.T, cs []sources.Cluster, want map[string]got) {
		t.Helper()
		have := map[string]got{}
		for _, c := range cs {
			g := got{Phase: c.Phase, SubState: c.Annotations[AnnotationSubscriptionState], Ready: c.Ready}
			if w := want[c.Name].ReasonHas; w != "" && strings.Contains(c.NotReadyReason, w) {
				g.ReasonHas = w
			}
			have[c.Name] = g
		}
		assert.Equal(t, want, have)
	}
	check(t, cs, want)
	for _, s := range a.Seen() {
		assert.NotContains(t, s, subDeleted, "the Deleted subscription is never requested")
	}

	// The Disabled subscription now refuses POSTs, as ARM does: a cluster
	// whose CA is cached keeps it, a new one is listed not ready.
	a.SetReadOnly(subB)
	a.SetList(subB, listJSON(t,
		armCluster(t, subB, "rg", "disabled-running", "Succeeded", "Running", true),
		armCluster(t, subB, "rg", "disabled-new", "Succeeded", "Running", true)))
	cs, err = env.src.Clusters(ctx)
	require.NoError(t, err)
	delete(want, "disabled-upgrading")
	delete(want, "disabled-deleting")
	want["disabled-new"] = got{sources.PhaseDegraded, "Disabled", false, "HTTP 409 ReadOnlyDisabledSubscription"}
	check(t, cs, want)
	assert.Equal(t, fixtureCAData(t), byName(cs, "disabled-running").CA.Data())
}

// TestEverySubscriptionGoneKeepsTheFleet: the identity that listed the
// fleet loses every subscription (its Reader role removed everywhere):
// ARM answers an empty subscription list, which is an error of the
// listing, not an empty fleet, so the inventory keeps serving what it
// served and counts no departure.
func TestEverySubscriptionGoneKeepsTheFleet(t *testing.T) {
	a := newARMServer(t)
	a.SetList(subB, listJSON(t, armCluster(t, subB, "rg-legacy", "aks-legacy-weu", "Succeeded", "Running", true)))
	cfg := Config{Auth: AuthConfig{ClientID: "80faf920-1908-4b52-b5ef-a8e7bedfc67a"}}
	env := newTestEnvWithOptions(t, cfg, a.clientOptions(), nil)
	inv, err := inventory.New([]inventory.SourceSpec{{Name: "azure-prod", Provider: sources.ProviderAKS, Source: env.src,
		Interval: time.Hour, Timeout: 30 * time.Second}}, inventory.Options{Departure: inventory.Departure{AfterListings: 1, GracePeriod: -1, MaxFraction: 1}})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(t.Context()))
	before := inv.Snapshot()
	require.NotEmpty(t, before.Clusters)

	a.SetSubscriptions(nil, nil)
	for range 3 {
		err = inv.RefreshAll(t.Context())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no subscription is visible to the identity")
	}
	after := inv.Snapshot()
	served := func(snap *inventory.Snapshot) []string {
		var out []string
		for _, c := range snap.Clusters {
			out = append(out, c.Name)
		}
		return out
	}
	assert.Equal(t, served(before), served(after), "served as before: no listing confirmed a departure")
	st := inv.Status()
	require.Len(t, st.Sources, 1)
	assert.Contains(t, st.Sources[0].LastError, "no subscription is visible")
}
