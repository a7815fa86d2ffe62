package aks

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func testMapper(t *testing.T, cfg Config) *mapper {
	t.Helper()
	cfg.Default()
	require.NoError(t, cfg.Validate())
	m, err := newMapper(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return m
}

func TestMapCluster(t *testing.T) {
	const id = "/subscriptions/" + subA + "/resourcegroups/rg-apps/providers/Microsoft.ContainerService/managedClusters/alpha"
	base := sources.Cluster{
		Provider: sources.ProviderAKS, Name: "alpha",
		Server: "https://alpha-dns.hcp.westeurope.azmk8s.io:443",
		Auth: sources.Auth{Kind: sources.AuthExec, Exec: &sources.ExecProvider{
			Command: "argocd-k8s-auth", Args: []string{"azure"}, APIVersion: "client.authentication.k8s.io/v1beta1",
			Env: map[string]string{"AAD_LOGIN_METHOD": "workloadidentity"},
		}},
		CloudID:     "aks/" + subA + "/rg-apps/alpha",
		Labels:      map[string]string{"env": "prod", LabelResourceGroup: "rg-apps"},
		Annotations: map[string]string{AnnotationResourceID: id},
		Region:      "westeurope", Account: subA, KubernetesVersion: "v1.31.4",
		ID: strings.ToLower(id), State: "Succeeded", Phase: sources.PhaseReady, Ready: true,
	}
	with := func(mutate func(*sources.Cluster)) sources.Cluster {
		c := base
		c.Labels = map[string]string{"env": "prod", LabelResourceGroup: "rg-apps"}
		mutate(&c)
		return c
	}
	tags := func(kv ...string) func(*armcontainerservice.ManagedCluster) {
		return func(mc *armcontainerservice.ManagedCluster) {
			for i := 0; i < len(kv); i += 2 {
				mc.Tags[kv[i]] = to.Ptr(kv[i+1])
			}
		}
	}
	tests := []struct {
		name     string
		cfg      Config
		mutate   []func(*armcontainerservice.ManagedCluster)
		want     sources.Cluster
		skip     skipReason
		notReady string
	}{
		{name: "public cluster", want: base},
		{name: "scope from tags", mutate: []func(*armcontainerservice.ManagedCluster){tags("Tenant", "acme", "PROJECT", "acme-prod", "namespaces", "apps, jobs;apps")},
			want: with(func(c *sources.Cluster) {
				c.Tenant, c.Project, c.Namespaces = "acme", "acme-prod", []string{"apps", "jobs"}
				c.Labels["Tenant"], c.Labels["PROJECT"], c.Labels["namespaces"] = "acme", "acme-prod", "apps--jobs-apps"
			})},
		{name: "invalid project is not ready", mutate: []func(*armcontainerservice.ManagedCluster){tags("project", "Acme Prod")},
			notReady: notReadyScope, want: with(func(c *sources.Cluster) {
				c.Labels["project"] = "Acme-Prod"
				c.Ready, c.NotReadyReason = false, "tag project is not a valid AppProject name"
			})},
		{name: "invalid namespaces never widen the scope", mutate: []func(*armcontainerservice.ManagedCluster){tags("namespaces", "apps,Bad_NS")},
			notReady: notReadyScope, want: with(func(c *sources.Cluster) {
				c.Labels["namespaces"] = "apps-Bad_NS"
				c.Ready, c.NotReadyReason = false, `tag namespaces holds "Bad_NS", not a namespace name`
			})},
		{name: "empty namespaces tag", mutate: []func(*armcontainerservice.ManagedCluster){tags("namespaces", " , ")},
			notReady: notReadyScope, want: with(func(c *sources.Cluster) {
				c.Ready, c.NotReadyReason = false, "tag namespaces names no namespace"
			})},
		{name: "no fqdn", mutate: []func(*armcontainerservice.ManagedCluster){func(mc *armcontainerservice.ManagedCluster) { mc.Properties.Fqdn = nil }},
			notReady: notReadyServer, want: with(func(c *sources.Cluster) {
				c.Server, c.Ready, c.NotReadyReason = "", false, "the cluster reports no API server FQDN"
			})},
		{name: "requested version when no current one", mutate: []func(*armcontainerservice.ManagedCluster){func(mc *armcontainerservice.ManagedCluster) { mc.Properties.CurrentKubernetesVersion = nil }},
			want: with(func(c *sources.Cluster) { c.KubernetesVersion = "v1.31" })},
		{name: "name template and prefix", cfg: Config{NamePrefix: "aks-", NameTemplate: `{{.Name}}-{{index .Tags "env"}}-{{.Location}}`},
			want: with(func(c *sources.Cluster) { c.Name = "aks-alpha-prod-westeurope" })},
		{name: "template with a missing tag", cfg: Config{NameTemplate: `{{index .Tags "nope"}}`}, skip: skipName},
		{name: "label allow and deny lists", cfg: Config{LabelTags: []string{"ENV", "team"}, IgnoreTags: []string{"team"}},
			mutate: []func(*armcontainerservice.ManagedCluster){tags("team", "a", "cost", "b")}, want: base},
		{name: "auth configuration", cfg: Config{Auth: AuthConfig{
			LoginMethod: "msi", ClientID: "80faf920-1908-4b52-b5ef-a8e7bedfc67a", TenantID: "72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80",
			FederatedTokenFile: "/var/run/token", AuthorityHost: "https://login.microsoftonline.us/", Environment: "AzureUSGovernmentCloud",
			ServerApplicationID: "6dae42f8-4368-4678-94ff-3960e28e3630",
			Env:                 map[string]string{"AAD_LOGIN_METHOD": "overridden", "AZURE_CLIENT_CERTIFICATE_PATH": "/etc/cert.pem"},
		}}, want: with(func(c *sources.Cluster) {
			c.Auth.Exec = &sources.ExecProvider{Command: "argocd-k8s-auth", Args: []string{"azure"}, APIVersion: "client.authentication.k8s.io/v1beta1",
				Env: map[string]string{
					"AAD_LOGIN_METHOD": "msi", "AZURE_CLIENT_ID": "80faf920-1908-4b52-b5ef-a8e7bedfc67a", "AZURE_TENANT_ID": "72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80",
					"AZURE_FEDERATED_TOKEN_FILE": "/var/run/token", "AZURE_AUTHORITY_HOST": "https://login.microsoftonline.us/",
					"AAD_ENVIRONMENT_NAME": "AzureUSGovernmentCloud", "AAD_SERVER_APPLICATION_ID": "6dae42f8-4368-4678-94ff-3960e28e3630",
					"AZURE_CLIENT_CERTIFICATE_PATH": "/etc/cert.pem",
				}}
		})},
		{name: "resource group filter", cfg: Config{ResourceGroups: []string{"other"}}, skip: skipResourceGroup},
		{name: "updating is listed, degraded", mutate: []func(*armcontainerservice.ManagedCluster){func(mc *armcontainerservice.ManagedCluster) { mc.Properties.ProvisioningState = to.Ptr("Updating") }},
			want: with(func(c *sources.Cluster) { c.State, c.Phase = "Updating", sources.PhaseDegraded })},
		{name: "no power state is degraded", mutate: []func(*armcontainerservice.ManagedCluster){func(mc *armcontainerservice.ManagedCluster) { mc.Properties.PowerState = nil }},
			want: with(func(c *sources.Cluster) { c.Phase = sources.PhaseDegraded })},
		{name: "stopped is listed, degraded", mutate: []func(*armcontainerservice.ManagedCluster){stopped},
			want: with(func(c *sources.Cluster) { c.Phase = sources.PhaseDegraded })},
		{name: "deleting is listed, leaving", mutate: []func(*armcontainerservice.ManagedCluster){func(mc *armcontainerservice.ManagedCluster) { mc.Properties.ProvisioningState = to.Ptr("Deleting") }},
			want: with(func(c *sources.Cluster) { c.State, c.Phase = "Deleting", sources.PhaseLeaving })},
		{name: "failed creation: pending and not ready", mutate: []func(*armcontainerservice.ManagedCluster){func(mc *armcontainerservice.ManagedCluster) {
			mc.Properties.ProvisioningState, mc.Properties.Fqdn = to.Ptr("Failed"), nil
		}}, notReady: notReadyServer, want: with(func(c *sources.Cluster) {
			c.State, c.Phase = "Failed", sources.PhasePending
			c.Server, c.Ready, c.NotReadyReason = "", false, "the cluster reports no API server FQDN"
		})},
		{name: "failed private cluster with only a private fqdn ran before", cfg: Config{PrivateClusters: PrivateFQDN}, mutate: []func(*armcontainerservice.ManagedCluster){private(false), func(mc *armcontainerservice.ManagedCluster) {
			mc.Properties.ProvisioningState, mc.Properties.Fqdn = to.Ptr("Failed"), nil
		}}, want: with(func(c *sources.Cluster) {
			c.State, c.Phase, c.Server = "Failed", sources.PhaseDegraded, "https://alpha-dns.privatelink.westeurope.azmk8s.io:443"
		})},
		{name: "include tags", cfg: Config{IncludeTags: map[string]string{"ArgoCD": "enabled"}}, skip: skipTags},
		{name: "include tags match", cfg: Config{IncludeTags: map[string]string{"ArgoCD": "*"}}, mutate: []func(*armcontainerservice.ManagedCluster){tags("argocd", "yes")},
			want: with(func(c *sources.Cluster) { c.Labels["argocd"] = "yes" })},
		{name: "exclude tags", cfg: Config{ExcludeTags: map[string]string{"env": "prod"}}, skip: skipTags},
		{name: "no entra id", mutate: []func(*armcontainerservice.ManagedCluster){func(mc *armcontainerservice.ManagedCluster) { mc.Properties.AADProfile = nil }}, skip: skipNoAAD},
		{name: "private excluded", mutate: []func(*armcontainerservice.ManagedCluster){private(true)}, skip: skipPrivate},
		{name: "private without public fqdn", cfg: Config{PrivateClusters: PrivatePublicFQDN}, mutate: []func(*armcontainerservice.ManagedCluster){private(false)}, skip: skipPrivate},
		{name: "private without private fqdn", cfg: Config{PrivateClusters: PrivateFQDN}, mutate: []func(*armcontainerservice.ManagedCluster){private(true), func(mc *armcontainerservice.ManagedCluster) { mc.Properties.PrivateFQDN = nil }}, skip: skipPrivate},
		{name: "private fqdn with proxy", cfg: Config{PrivateClusters: PrivateFQDN, PrivateProxyURL: "http://proxy:3128"}, mutate: []func(*armcontainerservice.ManagedCluster){private(false)},
			want: with(func(c *sources.Cluster) {
				c.Server, c.ProxyURL = "https://alpha-dns.privatelink.westeurope.azmk8s.io:443", "http://proxy:3128"
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := testMapper(t, tt.cfg)
			got, err := m.mapCluster(subA, managedCluster(subA, "rg-apps", "alpha", tt.mutate...))
			require.NoError(t, err)
			assert.Equal(t, tt.skip, got.skip, got.detail)
			if tt.skip != "" {
				return
			}
			assert.Equal(t, tt.want, got.cluster)
			assert.Equal(t, tt.notReady, got.notReadyKind)
			assert.Equal(t, tt.notReady == "", got.needCA, "the CA is read only for clusters otherwise ready")
			assert.Equal(t, strings.ToLower(id), got.id)
			assert.Equal(t, "rg-apps", got.resourceGroup)
		})
	}
}

// TestPhaseOf is the table of the package doc, row by row, plus the
// case-insensitive and unknown values.
func TestPhaseOf(t *testing.T) {
	tests := []struct {
		provisioning, power string
		fqdn                bool
		want                sources.Phase
	}{
		{"Creating", "Running", true, sources.PhasePending},
		{"Creating", "", false, sources.PhasePending},
		{"Succeeded", "Running", true, sources.PhaseReady},
		{"Succeeded", "Running", false, sources.PhaseReady},
		{"Succeeded", "Stopped", true, sources.PhaseDegraded},
		{"Succeeded", "", true, sources.PhaseDegraded},
		{"Succeeded", "Hibernating", true, sources.PhaseDegraded},
		{"Updating", "Running", true, sources.PhaseDegraded},
		{"Upgrading", "Running", true, sources.PhaseDegraded},
		{"Scaling", "Running", true, sources.PhaseDegraded},
		{"Starting", "Stopped", true, sources.PhaseDegraded},
		{"Stopping", "Running", true, sources.PhaseDegraded},
		{"Canceling", "Running", true, sources.PhaseDegraded},
		{"Canceled", "Running", true, sources.PhaseDegraded},
		{"Migrating", "Running", true, sources.PhaseDegraded},
		{"Reconciling", "Running", true, sources.PhaseDegraded},
		{"Failed", "Running", true, sources.PhaseDegraded},
		{"Failed", "Stopped", true, sources.PhaseDegraded},
		{"Failed", "Running", false, sources.PhasePending},
		{"Failed", "", false, sources.PhasePending},
		{"Deleting", "Running", true, sources.PhaseLeaving},
		{"Deleting", "Stopped", false, sources.PhaseLeaving},
		{"SUCCEEDED", "running", true, sources.PhaseReady},
		{"succeeded", "STOPPED", true, sources.PhaseDegraded},
		{"creating", "", false, sources.PhasePending},
		{"fAiLeD", "Running", true, sources.PhaseDegraded},
		{"deleting", "", true, sources.PhaseLeaving},
		{"upgrading", "running", true, sources.PhaseDegraded},
		{"SomethingNew", "Running", true, sources.PhaseDegraded},
		{"", "", false, sources.PhaseDegraded},
		{"", "Running", true, sources.PhaseDegraded},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/fqdn=%v", tt.provisioning, tt.power, tt.fqdn), func(t *testing.T) {
			assert.Equal(t, tt.want, phaseOf(tt.provisioning, tt.power, tt.fqdn))
		})
	}
}

func TestInSubscription(t *testing.T) {
	tests := []struct {
		state armsubscriptions.SubscriptionState
		in    sources.Phase
		want  sources.Phase
	}{
		{"", sources.PhaseReady, sources.PhaseReady},
		{armsubscriptions.SubscriptionStateEnabled, sources.PhaseReady, sources.PhaseReady},
		{armsubscriptions.SubscriptionStatePastDue, sources.PhaseReady, sources.PhaseReady},
		{armsubscriptions.SubscriptionStateWarned, sources.PhaseReady, sources.PhaseReady},
		{armsubscriptions.SubscriptionStateWarned, sources.PhasePending, sources.PhasePending},
		{armsubscriptions.SubscriptionStateDisabled, sources.PhaseReady, sources.PhaseDegraded},
		{armsubscriptions.SubscriptionStateDisabled, sources.PhasePending, sources.PhaseDegraded},
		{armsubscriptions.SubscriptionStateDisabled, sources.PhaseDegraded, sources.PhaseDegraded},
		{armsubscriptions.SubscriptionStateDisabled, sources.PhaseLeaving, sources.PhaseLeaving},
		{"disabled", sources.PhaseReady, sources.PhaseDegraded},
		{"Frozen", sources.PhaseReady, sources.PhaseReady},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s", tt.state, tt.in), func(t *testing.T) {
			assert.Equal(t, tt.want, inSubscription(tt.in, tt.state))
		})
	}
}

func TestMapClusterSharesNothingBetweenClusters(t *testing.T) {
	m := testMapper(t, Config{Auth: AuthConfig{Env: map[string]string{"X": "1"}}})
	a, err := m.mapCluster(subA, managedCluster(subA, "rg", "a"))
	require.NoError(t, err)
	a.cluster.Auth.Exec.Env["X"] = "changed"
	b, err := m.mapCluster(subA, managedCluster(subA, "rg", "b"))
	require.NoError(t, err)
	assert.Equal(t, "1", b.cluster.Auth.Exec.Env["X"])
	assert.Equal(t, "1", m.cfg.Auth.Env["X"])
}

func TestMapFixtureClusters(t *testing.T) {
	var page armcontainerservice.ManagedClusterListResult
	require.NoError(t, page.UnmarshalJSON(fixture(t, "aks-managed-clusters-list.json")))
	require.Len(t, page.Value, 3)
	m := testMapper(t, Config{})
	var got []string
	for _, mc := range page.Value {
		r, err := m.mapCluster(subA, mc)
		require.NoError(t, err)
		if r.skip != "" {
			got = append(got, r.azureName+":"+string(r.skip))
		} else {
			got = append(got, r.azureName+":"+string(r.cluster.Phase))
		}
	}
	assert.Equal(t, []string{"aks-payments-prod-weu:ready", "aks-shared-neu:private", "aks-sandbox-01:no_aad"}, got, "the stopped sandbox is left out for its missing aadProfile, not for its state")
}

func TestMalformedClusters(t *testing.T) {
	tests := []struct {
		name string
		mc   *armcontainerservice.ManagedCluster
		want string
	}{
		{"nil", nil, "cluster without id"},
		{"no id", &armcontainerservice.ManagedCluster{Name: to.Ptr("x")}, "cluster without id"},
		{"unparsable id", &armcontainerservice.ManagedCluster{ID: to.Ptr("not-an-id")}, `cluster id "not-an-id": invalid resource ID`},
		{"not a managed cluster", &armcontainerservice.ManagedCluster{ID: to.Ptr("/subscriptions/" + subA + "/resourceGroups/rg")}, "is not a managed cluster"},
		{"other subscription", managedCluster(subB, "rg", "x"), "is outside the subscription"},
		{"no properties", &armcontainerservice.ManagedCluster{ID: managedCluster(subA, "rg", "x").ID}, "cluster x has no properties"},
	}
	m := testMapper(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.mapCluster(subA, tt.mc)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestLabels(t *testing.T) {
	long := strings.Repeat("x", 64)
	m := testMapper(t, Config{})
	got := m.labels(map[string]string{
		"env":         "prod",
		"cost center": "dropped: cost-center is taken",
		"cost-center": "kept: the valid key wins",
		"team name":   "Payments EU",
		"Owner":       "team@example.com",
		"-edge-":      "--v--",
		"ünïcode":     "ok",
		long:          "dropped: key too long",
		"toolong":     long,
		"empty":       "",
		"only:::":     "x",
		"::":          "dropped: nothing left",
		"bad-value":   "::",
	}, "c")
	assert.Equal(t, map[string]string{
		"env":         "prod",
		"cost-center": "kept--the-valid-key-wins",
		"team-name":   "Payments-EU",
		"Owner":       "team-example.com",
		"edge":        "v",
		"n-code":      "ok",
		"empty":       "",
		"only":        "x",
	}, got)
}

func TestSanitizeLabelValue(t *testing.T) {
	for in, want := range map[string]string{"": "", "1.31": "1.31", "a b": "a-b", " a ": "a", "rg(prod)": "rg-prod", "a_b": "a_b"} {
		got, ok := sanitizeLabelValue(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"(x)"[0:1], "...", strings.Repeat("a", 64)} {
		_, ok := sanitizeLabelValue(in)
		assert.False(t, ok, in)
	}
}

func TestCAFromCredentials(t *testing.T) {
	ca := testCAPEM(t)
	caData := base64.StdEncoding.EncodeToString(ca)
	twoClusters := strings.Replace(string(kubeconfig("a", ca)), "clusters:\n", "clusters:\n- name: other\n  cluster:\n    server: https://other:443\n", 1)
	result := func(kcs ...[]byte) armcontainerservice.CredentialResults {
		var r armcontainerservice.CredentialResults
		for _, kc := range kcs {
			r.Kubeconfigs = append(r.Kubeconfigs, &armcontainerservice.CredentialResult{Name: to.Ptr("clusterUser"), Value: kc})
		}
		return r
	}
	var fromFixture armcontainerservice.CredentialResults
	require.NoError(t, fromFixture.UnmarshalJSON(fixture(t, "aks-list-cluster-user-credentials.json")))

	tests := []struct {
		name    string
		in      armcontainerservice.CredentialResults
		want    string
		wantErr string
	}{
		{"fixture (kubelogin user)", fromFixture, fixtureCAData(t), ""},
		{"token user", result(kubeconfig("a", ca)), caData, ""},
		{"current context picks the cluster", result([]byte(twoClusters)), caData, ""},
		{"first non-empty kubeconfig", result(nil, kubeconfig("a", ca)), caData, ""},
		{"no kubeconfig", result(), "", "the response holds no kubeconfig"},
		{"not yaml", result([]byte("\t" + secretToken + ": [")), "", "the kubeconfig does not parse"},
		{"no cluster", result([]byte("apiVersion: v1\nkind: Config\n")), "", "the kubeconfig names no cluster"},
		{"no ca", result([]byte(strings.Replace(string(kubeconfig("a", ca)), "certificate-authority-data", "certificate-authority", 1))), "", "no certificate-authority-data"},
		{"not a certificate", result(kubeconfig("a", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))), "", "certificate-authority-data: pem block 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := caFromCredentials(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), secretToken)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Data())
		})
	}
}

func TestCATTLSpreadsReads(t *testing.T) {
	seen := map[time.Duration]bool{}
	for i := range 100 {
		d := caTTL(time.Hour, fmt.Sprintf("/subscriptions/x/resourcegroups/rg/providers/microsoft.containerservice/managedclusters/c%d", i))
		assert.Greater(t, d, 48*time.Minute)
		assert.LessOrEqual(t, d, time.Hour)
		seen[d.Truncate(time.Minute)] = true
	}
	assert.Greater(t, len(seen), 8, "spread over the last fifth of the TTL")
	assert.Equal(t, caTTL(time.Hour, "a"), caTTL(time.Hour, "a"), "fixed per cluster")
}

func TestDescribe(t *testing.T) {
	resp := &http.Response{
		StatusCode: http.StatusForbidden,
		Header:     http.Header{"X-Ms-Error-Code": {"AuthorizationFailed"}},
		Body:       http.NoBody,
		Request:    &http.Request{Method: http.MethodGet},
	}
	re := &azcore.ResponseError{StatusCode: 403, ErrorCode: "AuthorizationFailed", RawResponse: resp}
	assert.Equal(t, "HTTP 403 AuthorizationFailed", describe(re))
	assert.Equal(t, "first", describe(errors.New("first\nsecond")))
	long := describe(errors.New(strings.Repeat("é", 400)))
	assert.LessOrEqual(t, len(long), maxDetail+len("…"))
	assert.True(t, strings.HasSuffix(long, "…"))
	assert.NotContains(t, long, "\uFFFD")
}
