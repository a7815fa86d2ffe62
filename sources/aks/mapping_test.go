package aks

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func testMapper(t *testing.T, cfg Config) *mapper {
	t.Helper()
	cfg.Default()
	require.Empty(t, cfg.Validate(field.NewPath("aks")))
	m, err := newMapper(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return m
}

// mappedID is the resource id of the cluster toCluster tests map.
const mappedID = "/subscriptions/" + subA + "/resourcegroups/rg-apps/providers/Microsoft.ContainerService/managedClusters/alpha"

// mappedBase is the model of managedCluster(subA, "rg-apps", "alpha")
// with the default configuration; mutate changes a copy of it.
func mappedBase(mutate ...func(*sources.Cluster)) sources.Cluster {
	c := sources.Cluster{
		Provider: sources.ProviderAKS, Name: "alpha",
		Server: "https://alpha-dns.hcp.westeurope.azmk8s.io:443",
		Auth: sources.Auth{Kind: sources.AuthExec, Exec: &sources.ExecProvider{
			Command: "argocd-k8s-auth", Args: []string{"azure"}, APIVersion: "client.authentication.k8s.io/v1beta1",
			Env: map[string]string{"AAD_LOGIN_METHOD": "workloadidentity"},
		}},
		CloudID:     "aks/" + subA + "/rg-apps/alpha",
		Labels:      map[string]string{"env": "prod", LabelResourceGroup: "rg-apps"},
		Annotations: map[string]string{AnnotationResourceID: mappedID},
		Region:      "westeurope", Account: subA, Group: "rg-apps", KubernetesVersion: "v1.31.4",
		ID: strings.ToLower(mappedID), State: "Succeeded", Phase: sources.PhaseReady, Ready: true,
	}
	for _, m := range mutate {
		m(&c)
	}
	return c
}

// withTags adds tags to a managed cluster.
func withTags(kv ...string) func(*armcontainerservice.ManagedCluster) {
	return func(mc *armcontainerservice.ManagedCluster) {
		for i := 0; i < len(kv); i += 2 {
			mc.Tags[kv[i]] = to.Ptr(kv[i+1])
		}
	}
}

// toClusterCase is a managed cluster, changed by mutate, mapped with cfg:
// skipped for skip, or want, not ready for notReady.
type toClusterCase struct {
	name     string
	cfg      Config
	mutate   []func(*armcontainerservice.ManagedCluster)
	want     sources.Cluster
	skip     skipReason
	notReady string
}

type mutations = []func(*armcontainerservice.ManagedCluster)

func runToCluster(t *testing.T, tests []toClusterCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := testMapper(t, tt.cfg)
			got, err := m.toCluster(subA, managedCluster(subA, "rg-apps", "alpha", tt.mutate...))
			require.NoError(t, err)
			assert.Equal(t, tt.skip, got.skip, got.detail)
			if tt.skip != "" {
				return
			}
			assert.Equal(t, tt.want, got.cluster)
			assert.Equal(t, tt.notReady, got.notReadyKind)
			assert.Equal(t, tt.notReady == "", got.needCA, "the CA is read only for clusters otherwise ready")
			assert.Equal(t, strings.ToLower(mappedID), got.id)
			assert.Equal(t, "rg-apps", got.resourceGroup)
		})
	}
}

// legacyScope names the scope tags as the defaults did before
// argocd-project and argocd-namespaces.
var legacyScope = Config{ProjectTag: "project", NamespacesTag: "namespaces"}

func TestToClusterScope(t *testing.T) {
	runToCluster(t, []toClusterCase{
		{name: "public cluster", want: mappedBase()},
		{name: "scope from tags", cfg: legacyScope, mutate: mutations{withTags("Tenant", "acme", "PROJECT", "acme-prod", "namespaces", "apps, jobs;apps")},
			want: mappedBase(func(c *sources.Cluster) {
				c.Tenant, c.Project, c.Namespaces = "acme", "acme-prod", []string{"apps", "jobs"}
				c.TenantFromOwner, c.ProjectFromOwner = true, true
				c.Labels["Tenant"], c.Labels["PROJECT"], c.Labels["namespaces"] = "acme", "acme-prod", "apps--jobs-apps"
			})},
		{name: "scope from the default tags", mutate: mutations{withTags("tenant", "acme", "ArgoCD-Project", "acme-prod", "argocd-namespaces", "apps jobs")},
			want: mappedBase(func(c *sources.Cluster) {
				c.Tenant, c.Project, c.Namespaces = "acme", "acme-prod", []string{"apps", "jobs"}
				c.TenantFromOwner, c.ProjectFromOwner = true, true
				c.Labels["tenant"], c.Labels["ArgoCD-Project"], c.Labels["argocd-namespaces"] = "acme", "acme-prod", "apps-jobs"
			})},
		{name: "project and namespaces are no default scope tags", mutate: mutations{withTags("project", "cost-center-42", "namespaces", "Not A Namespace")},
			want: mappedBase(func(c *sources.Cluster) {
				c.Labels["project"], c.Labels["namespaces"] = "cost-center-42", "Not-A-Namespace"
			})},
		{name: "invalid project is not ready", cfg: legacyScope, mutate: mutations{withTags("project", "Acme Prod")},
			notReady: notReadyScope, want: mappedBase(func(c *sources.Cluster) {
				c.Labels["project"] = "Acme-Prod"
				c.Ready, c.NotReadyReason = false, "tag project is not a valid AppProject name"
			})},
		{name: "invalid namespaces never widen the scope", cfg: legacyScope, mutate: mutations{withTags("namespaces", "apps,Bad_NS")},
			notReady: notReadyScope, want: mappedBase(func(c *sources.Cluster) {
				c.Labels["namespaces"] = "apps-Bad_NS"
				c.Ready, c.NotReadyReason = false, `tag namespaces holds "Bad_NS", not a namespace name`
			})},
		{name: "empty namespaces tag", cfg: legacyScope, mutate: mutations{withTags("namespaces", " , ")},
			notReady: notReadyScope, want: mappedBase(func(c *sources.Cluster) {
				c.Ready, c.NotReadyReason = false, "tag namespaces names no namespace"
			})},
	})
}

func TestToClusterNamesLabelsAndAuth(t *testing.T) {
	runToCluster(t, []toClusterCase{
		{name: "requested version when no current one", mutate: mutations{func(mc *armcontainerservice.ManagedCluster) { mc.Properties.CurrentKubernetesVersion = nil }},
			want: mappedBase(func(c *sources.Cluster) { c.KubernetesVersion = "v1.31" })},
		{name: "name template and prefix", cfg: Config{NamePrefix: "aks-", NameTemplate: `{{.Name}}-{{index .Tags "env"}}-{{.Location}}`},
			want: mappedBase(func(c *sources.Cluster) { c.Name = "aks-alpha-prod-westeurope" })},
		{name: "a template that fails lists the cluster not ready under its Azure name", cfg: Config{NameTemplate: `{{index .Tags "nope"}}`},
			notReady: notReadyName, want: mappedBase(func(c *sources.Cluster) {
				c.Server, c.Ready, c.NotReadyReason = "", false, "nameTemplate rendered an empty name"
			})},
		{name: "label allow and deny lists", cfg: Config{LabelTags: []string{"ENV", "team"}, IgnoreTags: []string{"team"}},
			mutate: mutations{withTags("team", "a", "cost", "b")}, want: mappedBase()},
		{name: "auth configuration", cfg: Config{Auth: AuthConfig{
			LoginMethod: "msi", ClientID: "80faf920-1908-4b52-b5ef-a8e7bedfc67a", TenantID: "72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80",
			FederatedTokenFile: "/var/run/token", AuthorityHost: "https://login.microsoftonline.us/", Environment: "AzureUSGovernmentCloud",
			ServerApplicationID: "6dae42f8-4368-4678-94ff-3960e28e3630",
			Env:                 map[string]string{"AAD_LOGIN_METHOD": "overridden", "AZURE_CLIENT_CERTIFICATE_PATH": "/etc/cert.pem"},
		}}, want: mappedBase(func(c *sources.Cluster) {
			c.Auth.Exec = &sources.ExecProvider{Command: "argocd-k8s-auth", Args: []string{"azure"}, APIVersion: "client.authentication.k8s.io/v1beta1",
				Env: map[string]string{
					"AAD_LOGIN_METHOD": "msi", "AZURE_CLIENT_ID": "80faf920-1908-4b52-b5ef-a8e7bedfc67a", "AZURE_TENANT_ID": "72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80",
					"AZURE_FEDERATED_TOKEN_FILE": "/var/run/token", "AZURE_AUTHORITY_HOST": "https://login.microsoftonline.us/",
					"AAD_ENVIRONMENT_NAME": "AzureUSGovernmentCloud", "AAD_SERVER_APPLICATION_ID": "6dae42f8-4368-4678-94ff-3960e28e3630",
					"AZURE_CLIENT_CERTIFICATE_PATH": "/etc/cert.pem",
				}}
		})},
	})
}

func TestToClusterStates(t *testing.T) {
	state := func(s string) func(*armcontainerservice.ManagedCluster) {
		return func(mc *armcontainerservice.ManagedCluster) { mc.Properties.ProvisioningState = to.Ptr(s) }
	}
	noFQDN := func(mc *armcontainerservice.ManagedCluster) { mc.Properties.Fqdn = nil }
	runToCluster(t, []toClusterCase{
		{name: "no fqdn", mutate: mutations{noFQDN}, notReady: notReadyServer, want: mappedBase(func(c *sources.Cluster) {
			c.Server, c.Ready, c.NotReadyReason = "", false, "the cluster reports no API server FQDN"
		})},
		{name: "updating is listed, degraded", mutate: mutations{state("Updating")},
			want: mappedBase(func(c *sources.Cluster) { c.State, c.Phase = "Updating", sources.PhaseDegraded })},
		{name: "no power state is degraded", mutate: mutations{func(mc *armcontainerservice.ManagedCluster) { mc.Properties.PowerState = nil }},
			want: mappedBase(func(c *sources.Cluster) { c.Phase = sources.PhaseDegraded })},
		{name: "stopped is listed, degraded", mutate: mutations{stopped},
			want: mappedBase(func(c *sources.Cluster) { c.Phase = sources.PhaseDegraded })},
		{name: "deleting is listed, leaving", mutate: mutations{state("Deleting")},
			want: mappedBase(func(c *sources.Cluster) { c.State, c.Phase = "Deleting", sources.PhaseLeaving })},
		{name: "failed creation: pending and not ready", mutate: mutations{state("Failed"), noFQDN}, notReady: notReadyServer,
			want: mappedBase(func(c *sources.Cluster) {
				c.State, c.Phase = "Failed", sources.PhasePending
				c.Server, c.Ready, c.NotReadyReason = "", false, "the cluster reports no API server FQDN"
			})},
		{name: "failed private cluster with only a private fqdn ran before", cfg: Config{PrivateEndpoints: PrivateEndpoints{Policy: PrivateFQDN}},
			mutate: mutations{private(false), state("Failed"), noFQDN}, want: mappedBase(func(c *sources.Cluster) {
				c.State, c.Phase, c.Server = "Failed", sources.PhaseDegraded, "https://alpha-dns.privatelink.westeurope.azmk8s.io:443"
			})},
	})
}

func TestToClusterFilters(t *testing.T) {
	runToCluster(t, []toClusterCase{
		{name: "resource group filter", cfg: Config{ResourceGroups: []string{"other"}}, skip: skipResourceGroup},
		{name: "include tags", cfg: Config{IncludeTags: map[string]string{"ArgoCD": "enabled"}}, skip: skipTags},
		{name: "include tags match", cfg: Config{IncludeTags: map[string]string{"ArgoCD": "*"}}, mutate: mutations{withTags("argocd", "yes")},
			want: mappedBase(func(c *sources.Cluster) { c.Labels["argocd"] = "yes" })},
		{name: "exclude tags", cfg: Config{ExcludeTags: map[string]string{"env": "prod"}}, skip: skipTags},
		{name: "no entra id", mutate: mutations{func(mc *armcontainerservice.ManagedCluster) { mc.Properties.AADProfile = nil }}, skip: skipNoAAD},
	})
}

func TestToClusterPrivateEndpoints(t *testing.T) {
	policy := func(p PrivatePolicy, proxy string) Config {
		return Config{PrivateEndpoints: PrivateEndpoints{Policy: p, ProxyURL: proxy}}
	}
	noPrivateFQDN := func(mc *armcontainerservice.ManagedCluster) { mc.Properties.PrivateFQDN = nil }
	runToCluster(t, []toClusterCase{
		{name: "private excluded", mutate: mutations{private(true)}, skip: skipPrivate},
		{name: "private without public fqdn is listed not ready", cfg: policy(PrivatePublicFQDN, ""), mutate: mutations{private(false)},
			notReady: notReadyServer, want: mappedBase(func(c *sources.Cluster) {
				c.Server, c.Ready, c.NotReadyReason = "", false, "the private cluster has no public FQDN (enablePrivateClusterPublicFQDN is off)"
			})},
		{name: "private without private fqdn is listed not ready", cfg: policy(PrivateFQDN, ""), mutate: mutations{private(true), noPrivateFQDN},
			notReady: notReadyServer, want: mappedBase(func(c *sources.Cluster) {
				c.Server, c.Ready, c.NotReadyReason = "", false, "the private cluster reports no privateFQDN"
			})},
		{name: "private fqdn with proxy", cfg: policy(PrivateFQDN, "http://proxy:3128"), mutate: mutations{private(false)},
			want: mappedBase(func(c *sources.Cluster) {
				c.Server, c.ProxyURL = "https://alpha-dns.privatelink.westeurope.azmk8s.io:443", "http://proxy:3128"
			})},
		{name: "public fqdn with proxy", cfg: policy(PrivatePublicFQDN, "http://proxy:3128"), mutate: mutations{private(true)},
			want: mappedBase(func(c *sources.Cluster) { c.ProxyURL = "http://proxy:3128" })},
		{name: "the deprecated keys still work", cfg: Config{PrivateClusters: PrivateFQDN, PrivateProxyURL: "http://proxy:3128"}, mutate: mutations{private(false)},
			want: mappedBase(func(c *sources.Cluster) {
				c.Server, c.ProxyURL = "https://alpha-dns.privatelink.westeurope.azmk8s.io:443", "http://proxy:3128"
			})},
	})
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

func TestToClusterSharesNothingBetweenClusters(t *testing.T) {
	m := testMapper(t, Config{Auth: AuthConfig{Env: map[string]string{"X": "1"}}})
	a, err := m.toCluster(subA, managedCluster(subA, "rg", "a"))
	require.NoError(t, err)
	a.cluster.Auth.Exec.Env["X"] = "changed"
	b, err := m.toCluster(subA, managedCluster(subA, "rg", "b"))
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
		r, err := m.toCluster(subA, mc)
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
			_, err := m.toCluster(subA, tt.mc)
			require.ErrorContains(t, err, tt.want)
		})
	}
}
