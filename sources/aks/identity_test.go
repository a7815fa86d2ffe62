package aks

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Entra ID ids of the identity tests: the tenant of the fixture's
// clusters, a tenant that delegates its subscription (Azure Lighthouse),
// the configured tenant, and a legacy cluster's own server application.
const (
	homeTenant      = "72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80"
	delegatedTenant = "b0a1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"
	configTenant    = "11111111-2222-4333-8444-555555555555"
	legacyServerApp = "d2f9a3c1-7e4b-4f6a-9b8c-1a2b3c4d5e6f"
	legacyClientApp = "e3a0b4d2-8f5c-4a7b-8c9d-2b3c4d5e6f70"
	configServerApp = "6dae42f8-4368-4678-94ff-3960e28e3630"
)

// withAAD replaces a managed cluster's aadProfile.
func withAAD(aad armcontainerservice.ManagedClusterAADProfile) func(*armcontainerservice.ManagedCluster) {
	return func(mc *armcontainerservice.ManagedCluster) { mc.Properties.AADProfile = &aad }
}

// withEnv sets exec env variables on the expected cluster.
func withEnv(kv ...string) func(*sources.Cluster) {
	return func(c *sources.Cluster) {
		for i := 0; i < len(kv); i += 2 {
			c.Auth.Exec.Env[kv[i]] = kv[i+1]
		}
	}
}

// notReadyAs marks the expected cluster not ready for reason.
func notReadyAs(reason string) func(*sources.Cluster) {
	return func(c *sources.Cluster) { c.Ready, c.NotReadyReason = false, reason }
}

// TestToClusterIdentity is the table of identityOf, through toCluster:
// the tenant and server application of each cluster's exec env, and the
// aadProfiles that list a cluster not ready, whose env then holds only
// configured values.
func TestToClusterIdentity(t *testing.T) {
	tenantCfg := Config{Auth: AuthConfig{TenantID: configTenant}}
	bothCfg := Config{Auth: AuthConfig{TenantID: configTenant, ServerApplicationID: configServerApp}}
	const (
		badTenant = "aadProfile.tenantID is not a tenant id (a GUID)"
		badServer = "aadProfile.serverAppID is not an application id (a GUID)"
		noServer  = "legacy Entra ID integration (aadProfile.managed is not true) without aadProfile.serverAppID"
	)
	runToCluster(t, []toClusterCase{
		{name: "managed, the cluster's tenant", mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{
			Managed: to.Ptr(true), TenantID: to.Ptr(homeTenant), EnableAzureRBAC: to.Ptr(true)})},
			want: mappedBase(withEnv("AZURE_TENANT_ID", homeTenant))},
		{name: "delegated tenant wins over the configured one, lower-cased", cfg: tenantCfg,
			mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{Managed: to.Ptr(true), TenantID: to.Ptr(strings.ToUpper(delegatedTenant))})},
			want:   mappedBase(withEnv("AZURE_TENANT_ID", delegatedTenant))},
		{name: "and over auth.env", cfg: Config{Auth: AuthConfig{Env: map[string]string{"AZURE_TENANT_ID": configTenant}}},
			mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{Managed: to.Ptr(true), TenantID: to.Ptr(delegatedTenant)})},
			want:   mappedBase(withEnv("AZURE_TENANT_ID", delegatedTenant))},
		{name: "managed without a tenant: the configured one", cfg: tenantCfg,
			want: mappedBase(withEnv("AZURE_TENANT_ID", configTenant))},
		{name: "managed with an empty tenant: the configured one", cfg: tenantCfg,
			mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{Managed: to.Ptr(true), TenantID: to.Ptr("")})},
			want:   mappedBase(withEnv("AZURE_TENANT_ID", configTenant))},
		{name: "managed without a tenant or configuration: the environment's", want: mappedBase()},
		{name: "managed: the configured server application", cfg: bothCfg,
			want: mappedBase(withEnv("AZURE_TENANT_ID", configTenant, "AAD_SERVER_APPLICATION_ID", configServerApp))},
		{name: "managed: a serverAppID left from legacy is not used", mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{
			Managed: to.Ptr(true), ServerAppID: to.Ptr("not-a-guid")})}, want: mappedBase()},
		{name: "legacy: its own server application and tenant", cfg: bothCfg, mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{
			Managed: to.Ptr(false), TenantID: to.Ptr(delegatedTenant), ServerAppID: to.Ptr(strings.ToUpper(legacyServerApp)),
			ClientAppID: to.Ptr(legacyClientApp), ServerAppSecret: to.Ptr("never-read")})},
			want: mappedBase(withEnv("AZURE_TENANT_ID", delegatedTenant, "AAD_SERVER_APPLICATION_ID", legacyServerApp))},
		{name: "legacy without managed", mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{ServerAppID: to.Ptr(legacyServerApp)})},
			want: mappedBase(withEnv("AAD_SERVER_APPLICATION_ID", legacyServerApp))},
		{name: "legacy without serverAppID is not ready", cfg: bothCfg, notReady: notReadyAAD,
			mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{Managed: to.Ptr(false), TenantID: to.Ptr(delegatedTenant)})},
			want:   mappedBase(notReadyAs(noServer), withEnv("AZURE_TENANT_ID", configTenant, "AAD_SERVER_APPLICATION_ID", configServerApp))},
		{name: "malformed serverAppID is not ready", notReady: notReadyAAD,
			mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{Managed: to.Ptr(false), ServerAppID: to.Ptr("api://aks-server")})},
			want:   mappedBase(notReadyAs(badServer))},
		{name: "malformed tenant is not ready", cfg: tenantCfg, notReady: notReadyAAD,
			mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{Managed: to.Ptr(true), TenantID: to.Ptr("contoso.onmicrosoft.com")})},
			want:   mappedBase(notReadyAs(badTenant), withEnv("AZURE_TENANT_ID", configTenant))},
		{name: "tenant in braces is not ready", notReady: notReadyAAD,
			mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{Managed: to.Ptr(true), TenantID: to.Ptr("{" + homeTenant + "}")})},
			want:   mappedBase(notReadyAs(badTenant))},
		{name: "tenant with a newline is not ready", notReady: notReadyAAD,
			mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{Managed: to.Ptr(true), TenantID: to.Ptr(homeTenant + "\n")})},
			want:   mappedBase(notReadyAs(badTenant))},
		{name: "malformed tenant of a legacy cluster", notReady: notReadyAAD,
			mutate: mutations{withAAD(armcontainerservice.ManagedClusterAADProfile{TenantID: to.Ptr("x"), ServerAppID: to.Ptr(legacyServerApp)})},
			want:   mappedBase(notReadyAs(badTenant))},
		{name: "local accounts only (no aadProfile) are left out", mutate: mutations{func(mc *armcontainerservice.ManagedCluster) {
			mc.Properties.AADProfile = nil
		}}, skip: skipNoAAD},
	})
}

// TestIdentityOverHTTP lists, through the ARM fake, the fixture's
// subscription and one of clusters with every kind of Entra ID integration,
// and shows the exec env each cluster's Secret gets.
func TestIdentityOverHTTP(t *testing.T) {
	variant := func(name string, aad map[string]any) map[string]any {
		mc := armCluster(t, subC, "rg-tenants", name, "Succeeded", "Running", true)
		mc["properties"].(map[string]any)["aadProfile"] = aad
		return mc
	}
	a := newARMServer(t)
	a.SetList(subC, listJSON(t,
		variant("delegated", map[string]any{"managed": true, "enableAzureRBAC": true, "tenantID": strings.ToUpper(delegatedTenant)}),
		variant("legacy", map[string]any{"managed": false, "clientAppID": legacyClientApp, "serverAppID": legacyServerApp, "tenantID": homeTenant}),
		variant("no-tenant", map[string]any{"managed": true}),
		variant("bad-tenant", map[string]any{"managed": true, "tenantID": "contoso.onmicrosoft.com"}),
		variant("legacy-no-server", map[string]any{"managed": false, "tenantID": homeTenant}),
	))
	const client = "80faf920-1908-4b52-b5ef-a8e7bedfc67a"
	cfg := explicit(subA, subC)
	cfg.Auth = AuthConfig{ClientID: client, TenantID: configTenant}
	env := newTestEnvWithOptions(t, cfg, a.clientOptions(), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)

	base := map[string]string{"AAD_LOGIN_METHOD": "workloadidentity", "AZURE_CLIENT_ID": client}
	envOf := func(kv ...string) map[string]string {
		out := maps.Clone(base)
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	type got struct {
		Env    map[string]string
		Reason string
	}
	want := map[string]got{
		// the fixture's own: AKS-managed, the tenant of its aadProfile
		"aks-payments-prod-weu": {Env: envOf("AZURE_TENANT_ID", homeTenant)},
		"delegated":             {Env: envOf("AZURE_TENANT_ID", delegatedTenant)},
		"legacy":                {Env: envOf("AZURE_TENANT_ID", homeTenant, "AAD_SERVER_APPLICATION_ID", legacyServerApp)},
		"no-tenant":             {Env: envOf("AZURE_TENANT_ID", configTenant)},
		// not ready: only configured values, nothing of the aadProfile
		"bad-tenant":       {Env: envOf("AZURE_TENANT_ID", configTenant), Reason: "aadProfile.tenantID is not a tenant id (a GUID)"},
		"legacy-no-server": {Env: envOf("AZURE_TENANT_ID", configTenant), Reason: "legacy Entra ID integration (aadProfile.managed is not true) without aadProfile.serverAppID"},
	}
	have := map[string]got{}
	for _, c := range cs {
		require.Equal(t, sources.AuthExec, c.Auth.Kind)
		assert.Equal(t, []string{"azure"}, c.Auth.Exec.Args)
		assert.Equal(t, c.NotReadyReason == "", c.Ready, c.Name)
		have[c.Name] = got{Env: c.Auth.Exec.Env, Reason: c.NotReadyReason}
	}
	assert.Equal(t, want, have, "the private aks-shared-neu is excluded, the sandbox without aadProfile is left out")

	m := env.src.metrics
	assert.Equal(t, 2.0, testutil.ToFloat64(m.NotReady.WithLabelValues(notReadyAAD)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Skipped.WithLabelValues(string(skipNoAAD))), "aks-sandbox-01 has local accounts only")
	posts := 0
	for _, s := range a.Seen() {
		if strings.HasPrefix(s, "POST ") {
			posts++
			assert.NotContains(t, s, "bad-tenant")
			assert.NotContains(t, s, "legacy-no-server")
		}
	}
	assert.Equal(t, 4, posts, "a CA is read only for clusters whose identity is known")
}
