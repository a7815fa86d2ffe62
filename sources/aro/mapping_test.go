package aro

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redhatopenshift/armredhatopenshift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func testMapper(t *testing.T, cfg Config) *mapper {
	t.Helper()
	cfg.Default()
	require.Empty(t, cfg.Validate(field.NewPath("aro")))
	m, err := newMapper(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return m
}

// mappedID is the resource id of the cluster toCluster tests map, as the
// resource provider spells it.
const mappedID = "/subscriptions/" + subA + "/resourceGroups/RG-Apps/providers/Microsoft.RedHatOpenShift/OpenShiftClusters/alpha"

// openShiftCluster is a ready cluster of subA on a managed domain, as the
// SDK decodes it; mutate changes it.
func openShiftCluster(mutate ...func(*armredhatopenshift.OpenShiftCluster)) *armredhatopenshift.OpenShiftCluster {
	oc := &armredhatopenshift.OpenShiftCluster{
		ID: to.Ptr(mappedID), Name: to.Ptr("alpha"), Type: to.Ptr("Microsoft.RedHatOpenShift/OpenShiftClusters"),
		Location: to.Ptr("WestEurope"), Tags: map[string]*string{"env": to.Ptr("prod")},
		Properties: &armredhatopenshift.OpenShiftClusterProperties{
			ProvisioningState: to.Ptr(armredhatopenshift.ProvisioningStateSucceeded),
			ClusterProfile: &armredhatopenshift.ClusterProfile{
				Domain: to.Ptr("abcd1234.westeurope.aroapp.io"), Version: to.Ptr("4.15.27"),
				ResourceGroupID: to.Ptr("/subscriptions/" + subA + "/resourceGroups/aro-abcd1234"),
			},
			ApiserverProfile: &armredhatopenshift.APIServerProfile{
				URL: to.Ptr("https://api.abcd1234.westeurope.aroapp.io:6443/"), Visibility: to.Ptr(armredhatopenshift.VisibilityPublic),
			},
			ConsoleProfile: &armredhatopenshift.ConsoleProfile{URL: to.Ptr("https://console-openshift-console.apps.abcd1234.westeurope.aroapp.io/")},
		},
	}
	for _, m := range mutate {
		m(oc)
	}
	return oc
}

// alphaBound binds one token Secret to the mapped cluster.
var alphaBound = tokenSecrets{}.bind(mappedID, "alpha-token")

// mappedBase is the model of openShiftCluster() with the default
// configuration and alphaBound; mutate changes a copy of it.
func mappedBase(mutate ...func(*sources.Cluster)) sources.Cluster {
	c := sources.Cluster{
		Provider: sources.ProviderARO, Name: "alpha",
		Server: "https://api.abcd1234.westeurope.aroapp.io:6443",
		Auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{
			Secret: &sources.SecretKeyRef{Name: "alpha-token", Key: "token"},
		}},
		Labels: map[string]string{"env": "prod", LabelResourceGroup: "RG-Apps", OpenShiftVersion: "4.15.27", LabelAPIVisibility: "Public"},
		Annotations: map[string]string{
			AnnotationResourceID: mappedID, OpenShiftVersion: "4.15.27",
			AnnotationConsoleURL: "https://console-openshift-console.apps.abcd1234.westeurope.aroapp.io",
		},
		Region: "westeurope", Account: subA, Group: "RG-Apps",
		ID: strings.ToLower(mappedID), State: "Succeeded", Phase: sources.PhaseReady, Ready: true,
	}
	for _, m := range mutate {
		m(&c)
	}
	return c
}

// notReady makes the expected cluster not ready for reason, without the
// token reference it was not given.
func notReady(reason string) func(*sources.Cluster) {
	return func(c *sources.Cluster) { c.Ready, c.NotReadyReason, c.Auth = false, reason, sources.Auth{} }
}

type mutations = []func(*armredhatopenshift.OpenShiftCluster)

// toClusterCase is a cluster, changed by mutate, mapped with cfg and
// bindings (alphaBound when nil): skipped for skip, or want, not ready of
// kind notReady.
type toClusterCase struct {
	name     string
	cfg      Config
	bindings tokenSecrets
	mutate   mutations
	want     sources.Cluster
	skip     skipReason
	notReady string
}

func runToCluster(t *testing.T, tests []toClusterCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := testMapper(t, tt.cfg)
			cfg := m.cfg
			b := tt.bindings
			if b == nil {
				b = alphaBound
			}
			got, err := m.toCluster(subA, openShiftCluster(tt.mutate...), &listing{bindings: b, trust: loadTrust(&cfg)})
			require.NoError(t, err)
			assert.Equal(t, tt.skip, got.skip, got.detail)
			if tt.skip != "" {
				return
			}
			assert.Equal(t, tt.want, got.cluster)
			assert.Equal(t, tt.notReady, got.notReadyKind)
			assert.Equal(t, tt.want.ID, got.id)
			assert.Equal(t, "RG-Apps", got.resourceGroup)
		})
	}
}

func state(s string) func(*armredhatopenshift.OpenShiftCluster) {
	return func(oc *armredhatopenshift.OpenShiftCluster) {
		oc.Properties.ProvisioningState = to.Ptr(armredhatopenshift.ProvisioningState(s))
	}
}

func noURL(oc *armredhatopenshift.OpenShiftCluster) { oc.Properties.ApiserverProfile.URL = nil }

func apiURL(u string) func(*armredhatopenshift.OpenShiftCluster) {
	return func(oc *armredhatopenshift.OpenShiftCluster) { oc.Properties.ApiserverProfile.URL = to.Ptr(u) }
}

func withTags(kv ...string) func(*armredhatopenshift.OpenShiftCluster) {
	return func(oc *armredhatopenshift.OpenShiftCluster) {
		for i := 0; i < len(kv); i += 2 {
			oc.Tags[kv[i]] = to.Ptr(kv[i+1])
		}
	}
}

func renamed(name string) func(*armredhatopenshift.OpenShiftCluster) {
	return func(oc *armredhatopenshift.OpenShiftCluster) {
		oc.ID, oc.Name = to.Ptr(strings.TrimSuffix(mappedID, "alpha")+name), to.Ptr(name)
	}
}

func TestToClusterStates(t *testing.T) {
	const noURLReason = "the cluster reports no API server URL (apiserverProfile.url)"
	runToCluster(t, []toClusterCase{
		{name: "succeeded", want: mappedBase()},
		{name: "creating without a URL: pending, not ready", mutate: mutations{state("Creating"), noURL}, notReady: notReadyServer,
			want: mappedBase(notReady(noURLReason), func(c *sources.Cluster) { c.State, c.Phase, c.Server = "Creating", sources.PhasePending, "" })},
		{name: "creating with a URL is still pending", mutate: mutations{state("Creating")},
			want: mappedBase(func(c *sources.Cluster) { c.State, c.Phase = "Creating", sources.PhasePending })},
		{name: "updating", mutate: mutations{state("Updating")},
			want: mappedBase(func(c *sources.Cluster) { c.State, c.Phase = "Updating", sources.PhaseDegraded })},
		{name: "admin updating", mutate: mutations{state("AdminUpdating")},
			want: mappedBase(func(c *sources.Cluster) { c.State, c.Phase = "AdminUpdating", sources.PhaseDegraded })},
		{name: "canceled", mutate: mutations{state("Canceled")},
			want: mappedBase(func(c *sources.Cluster) { c.State, c.Phase = "Canceled", sources.PhaseDegraded })},
		{name: "failed after it ran", mutate: mutations{state("Failed")},
			want: mappedBase(func(c *sources.Cluster) { c.State, c.Phase = "Failed", sources.PhaseDegraded })},
		{name: "failed creation", mutate: mutations{state("Failed"), noURL}, notReady: notReadyServer,
			want: mappedBase(notReady(noURLReason), func(c *sources.Cluster) { c.State, c.Phase, c.Server = "Failed", sources.PhasePending, "" })},
		{name: "deleting", mutate: mutations{state("Deleting")},
			want: mappedBase(func(c *sources.Cluster) { c.State, c.Phase = "Deleting", sources.PhaseLeaving })},
		{name: "unknown state, verbatim", mutate: mutations{state("Maintenance")},
			want: mappedBase(func(c *sources.Cluster) { c.State, c.Phase = "Maintenance", sources.PhaseDegraded })},
		{name: "no state", mutate: mutations{func(oc *armredhatopenshift.OpenShiftCluster) { oc.Properties.ProvisioningState = nil }},
			want: mappedBase(func(c *sources.Cluster) { c.State, c.Phase = "", sources.PhaseDegraded })},
		{name: "no apiserverProfile at all", mutate: mutations{state("Creating"), func(oc *armredhatopenshift.OpenShiftCluster) { oc.Properties.ApiserverProfile = nil }},
			notReady: notReadyServer, want: mappedBase(notReady(noURLReason), func(c *sources.Cluster) {
				c.State, c.Phase, c.Server = "Creating", sources.PhasePending, ""
				delete(c.Labels, LabelAPIVisibility)
			})},
	})
}

func TestToClusterServer(t *testing.T) {
	runToCluster(t, []toClusterCase{
		{name: "the trailing slash is trimmed", mutate: mutations{apiURL("https://api.abcd1234.westeurope.aroapp.io:6443///")}, want: mappedBase()},
		{name: "case and port stay as listed", mutate: mutations{apiURL("https://API.abcd1234.westeurope.aroapp.io:6443/")},
			want: mappedBase(func(c *sources.Cluster) { c.Server = "https://API.abcd1234.westeurope.aroapp.io:6443" })},
		{name: "not https", mutate: mutations{apiURL("http://api.abcd1234.westeurope.aroapp.io:6443/")}, notReady: notReadyServer,
			want: mappedBase(notReady("apiserverProfile.url is not an https URL"), func(c *sources.Cluster) { c.Server = "" })},
		{name: "user info", mutate: mutations{apiURL("https://u:p@api.example.com:6443/")}, notReady: notReadyServer,
			want: mappedBase(notReady("apiserverProfile.url: server url must not carry user info"), func(c *sources.Cluster) { c.Server = "" })},
		{name: "no host", mutate: mutations{apiURL("https://:6443/")}, notReady: notReadyServer,
			want: mappedBase(notReady("apiserverProfile.url: server url has no host"), func(c *sources.Cluster) { c.Server = "" })},
		{name: "private with proxy", cfg: Config{PrivateEndpoints: PrivateEndpoints{ProxyURL: "http://proxy:3128"}},
			mutate: mutations{func(oc *armredhatopenshift.OpenShiftCluster) {
				oc.Properties.ApiserverProfile.Visibility = to.Ptr(armredhatopenshift.VisibilityPrivate)
			}},
			want: mappedBase(func(c *sources.Cluster) { c.ProxyURL, c.Labels[LabelAPIVisibility] = "http://proxy:3128", "Private" })},
		{name: "private excluded", cfg: Config{PrivateEndpoints: PrivateEndpoints{Policy: PrivateExclude}}, skip: skipPrivate,
			mutate: mutations{func(oc *armredhatopenshift.OpenShiftCluster) {
				oc.Properties.ApiserverProfile.Visibility = to.Ptr(armredhatopenshift.Visibility("private"))
			}}},
	})
}

func TestToClusterCA(t *testing.T) {
	ca := base64.StdEncoding.EncodeToString(testCAPEM(t))
	custom := func(oc *armredhatopenshift.OpenShiftCluster) {
		oc.Properties.ApiserverProfile.URL = to.Ptr("https://api.ocp.contoso.com:6443/")
		oc.Properties.ClusterProfile.Domain = to.Ptr("ocp.contoso.com")
	}
	customServer := func(c *sources.Cluster) { c.Server = "https://api.ocp.contoso.com:6443" }
	runToCluster(t, []toClusterCase{
		{name: "managed domain: no caData", want: mappedBase()},
		{name: "another managed suffix", cfg: Config{ManagedDomains: []string{"aroapp.azure.cn"}},
			mutate: mutations{apiURL("https://api.x.chinaeast2.aroapp.azure.cn:6443/")},
			want:   mappedBase(func(c *sources.Cluster) { c.Server = "https://api.x.chinaeast2.aroapp.azure.cn:6443" })},
		{name: "a managed suffix replaced", cfg: Config{ManagedDomains: []string{".aroapp.azure.cn"}}, notReady: notReadyCA,
			want: mappedBase(notReady("custom domain: api.abcd1234.westeurope.aroapp.io is not under a managed domain (managedDomains: .aroapp.azure.cn), and no CA is configured for it (customDomainCA or defaultCA)"))},
		{name: "custom domain without a CA", mutate: mutations{custom}, notReady: notReadyCA,
			want: mappedBase(customServer, notReady("custom domain: api.ocp.contoso.com is not under a managed domain (managedDomains: .aroapp.io), and no CA is configured for it (customDomainCA or defaultCA)"))},
		{name: "custom domain with its CA", cfg: Config{CustomDomainCA: map[string]CARef{"Contoso.COM.": {CAData: ca}}}, mutate: mutations{custom},
			want: mappedBase(customServer, func(c *sources.Cluster) { c.CA = sources.CAFromData(ca) })},
		{name: "custom domain with the default CA", cfg: Config{DefaultCA: CARef{CAData: ca}}, mutate: mutations{custom},
			want: mappedBase(customServer, func(c *sources.Cluster) { c.CA = sources.CAFromData(ca) })},
		{name: "a key matches whole labels only", cfg: Config{CustomDomainCA: map[string]CARef{"toso.com": {CAData: ca}}}, mutate: mutations{custom},
			notReady: notReadyCA, want: mappedBase(customServer, notReady("custom domain: api.ocp.contoso.com is not under a managed domain (managedDomains: .aroapp.io), and no CA is configured for it (customDomainCA or defaultCA)"))},
	})
}

func TestToClusterTokenBindings(t *testing.T) {
	runToCluster(t, []toClusterCase{
		{name: "one Secret bound", want: mappedBase()},
		{name: "bound with the id in another case", bindings: tokenSecrets{}.bind(strings.ToUpper(mappedID), "alpha-token"), want: mappedBase()},
		{name: "none bound", bindings: tokenSecrets{}.bind(strings.Replace(mappedID, "alpha", "beta", 1), "beta-token"), notReady: notReadyToken,
			want: mappedBase(notReady(`no token Secret: create one labelled argocd-cluster-discovery.io/token-for and annotated argocd-cluster-discovery.io/cluster-id=` +
				strings.ToLower(mappedID) + `, with the token under "token"`))},
		{name: "two bound", bindings: alphaBound.bind(mappedID, "alpha-token-2"), notReady: notReadyToken,
			want: mappedBase(notReady("2 token Secrets are bound to it (alpha-token, alpha-token-2): keep one"))},
	})
}

func TestToClusterNamesAndLabels(t *testing.T) {
	long := strings.Repeat("a", 88) + "_x"
	runToCluster(t, []toClusterCase{
		{name: "ARM characters become a DNS label", mutate: mutations{renamed("Team_A.(Prod)")}, bindings: tokenSecrets{}.bind(strings.TrimSuffix(mappedID, "alpha")+"Team_A.(Prod)", "t"),
			want: mappedBase(func(c *sources.Cluster) {
				c.Name, c.ID = "team-a-prod", strings.ToLower(strings.TrimSuffix(mappedID, "alpha")+"Team_A.(Prod)")
				c.Annotations[AnnotationResourceID] = strings.TrimSuffix(mappedID, "alpha") + "Team_A.(Prod)"
				c.Auth.TokenRef.Secret.Name = "t"
			})},
		{name: "90 characters are cut, with a hash of the id", mutate: mutations{renamed(long)}, bindings: tokenSecrets{}.bind(strings.TrimSuffix(mappedID, "alpha")+long, "t"),
			want: mappedBase(func(c *sources.Cluster) {
				id := strings.TrimSuffix(mappedID, "alpha") + long
				c.Name, c.ID = dnsLabel(long, strings.ToLower(id)), strings.ToLower(id)
				c.Annotations[AnnotationResourceID] = id
				c.Auth.TokenRef.Secret.Name = "t"
			})},
		{name: "prefix and template", cfg: Config{NamePrefix: "aro-", NameTemplate: `{{.Name}}-{{.ResourceGroup}}-{{index .Tags "env"}}`},
			want: mappedBase(func(c *sources.Cluster) { c.Name = "aro-alpha-rg-apps-prod" })},
		{name: "a template that renders nothing lists the cluster not ready under its ARM name", cfg: Config{NameTemplate: `{{index .Tags "nope"}}`},
			notReady: notReadyName, want: mappedBase(notReady("nameTemplate rendered an empty name"), func(c *sources.Cluster) { c.Server = "" })},
		{name: "a name without a letter or digit", cfg: Config{NameTemplate: `{{index .Tags "odd"}}`}, mutate: mutations{withTags("odd", "__()")},
			notReady: notReadyName, want: mappedBase(notReady(`name "__()" has no letter or digit to make a DNS label of`), func(c *sources.Cluster) {
				c.Server = "" // and the tag's value cannot be a label
			})},
		{name: "labels from tags, allow and deny lists", cfg: Config{LabelTags: []string{"ENV", "team"}, IgnoreTags: []string{"team"}},
			mutate: mutations{withTags("team", "a", "cost center", "b")}, want: mappedBase()},
		{name: "tag keys and values sanitized", mutate: mutations{withTags("cost center", "cc 4711")},
			want: mappedBase(func(c *sources.Cluster) { c.Labels["cost-center"] = "cc-4711" })},
		{name: "no version", mutate: mutations{func(oc *armredhatopenshift.OpenShiftCluster) { oc.Properties.ClusterProfile.Version = nil }},
			want: mappedBase(func(c *sources.Cluster) {
				delete(c.Labels, OpenShiftVersion)
				delete(c.Annotations, OpenShiftVersion)
			})},
		{name: "a version no label can hold stays an annotation", mutate: mutations{func(oc *armredhatopenshift.OpenShiftCluster) {
			oc.Properties.ClusterProfile.Version = to.Ptr("4.16.0-rc.1+" + strings.Repeat("b", 60))
		}}, want: mappedBase(func(c *sources.Cluster) {
			delete(c.Labels, OpenShiftVersion)
			c.Annotations[OpenShiftVersion] = "4.16.0-rc.1+" + strings.Repeat("b", 60)
		})},
		{name: "resource group filter, case-insensitive", cfg: Config{ResourceGroups: []string{"rg-apps"}}, want: mappedBase()},
		{name: "resource group filtered out", cfg: Config{ResourceGroups: []string{"rg-other"}}, skip: skipResourceGroup},
		{name: "include tags", cfg: Config{IncludeTags: map[string]string{"argocd": "*"}}, skip: skipTags},
		{name: "exclude tags, keys case-insensitive", cfg: Config{ExcludeTags: map[string]string{"ENV": "prod"}}, skip: skipTags},
	})
}

func TestToClusterScope(t *testing.T) {
	runToCluster(t, []toClusterCase{
		{name: "scope from the default tags", mutate: mutations{withTags("Tenant", "acme", "argocd-project", "acme-prod", "argocd-namespaces", "apps, jobs;apps")},
			want: mappedBase(func(c *sources.Cluster) {
				c.Tenant, c.Project, c.Namespaces = "acme", "acme-prod", []string{"apps", "jobs"}
				c.TenantFromOwner, c.ProjectFromOwner = true, true
				c.Labels["Tenant"], c.Labels["argocd-project"], c.Labels["argocd-namespaces"] = "acme", "acme-prod", "apps--jobs-apps"
			})},
		{name: "invalid project", mutate: mutations{withTags("argocd-project", "Acme Prod")}, notReady: notReadyScope,
			want: mappedBase(notReady("tag argocd-project is not a valid AppProject name"), func(c *sources.Cluster) { c.Labels["argocd-project"] = "Acme-Prod" })},
		{name: "invalid namespaces never widen the scope", mutate: mutations{withTags("argocd-namespaces", "apps,Bad_NS")}, notReady: notReadyScope,
			want: mappedBase(notReady(`tag argocd-namespaces holds "Bad_NS", not a namespace name`), func(c *sources.Cluster) {
				c.Labels["argocd-namespaces"] = "apps-Bad_NS"
			})},
		{name: "empty namespaces tag", mutate: mutations{withTags("argocd-namespaces", " , ")}, notReady: notReadyScope,
			want: mappedBase(notReady("tag argocd-namespaces names no namespace"))},
	})
}

// TestResourceIDs: the id gives the resource group and name, compared
// case-insensitively; anything but an OpenShift cluster of the listed
// subscription is a malformed answer.
func TestResourceIDs(t *testing.T) {
	good := []string{
		mappedID,
		strings.ToLower(mappedID),
		"/subscriptions/" + strings.ToUpper(subA) + "/resourcegroups/RG-Apps/providers/microsoft.redhatopenshift/openShiftClusters/alpha",
	}
	for _, id := range good {
		t.Run(id, func(t *testing.T) {
			rid, err := clusterID(subA, openShiftCluster(func(oc *armredhatopenshift.OpenShiftCluster) { oc.ID = to.Ptr(id) }))
			require.NoError(t, err)
			assert.True(t, strings.EqualFold("RG-Apps", rid.ResourceGroupName))
			assert.Equal(t, "alpha", rid.Name)
		})
	}
	bad := map[string]string{
		"":     "cluster without id",
		"nope": `cluster id "nope": invalid resource ID`,
		"/subscriptions/" + subA + "/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/a":  "is not an OpenShift cluster",
		"/subscriptions/" + subC + "/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/a": "is outside the subscription",
		"/subscriptions/" + subA + "/providers/Microsoft.RedHatOpenShift/openShiftClusters/a":                   "is not an OpenShift cluster",
	}
	for id, want := range bad {
		t.Run("bad "+id, func(t *testing.T) {
			oc := openShiftCluster()
			oc.ID = to.Ptr(id)
			if id == "" {
				oc.ID = nil
			}
			_, err := clusterID(subA, oc)
			require.ErrorContains(t, err, want)
			m := testMapper(t, Config{})
			_, err = m.toCluster(subA, oc, &listing{trust: &trust{}})
			require.Error(t, err, "fails the listing")
		})
	}
	m := testMapper(t, Config{})
	_, err := m.toCluster(subA, openShiftCluster(func(oc *armredhatopenshift.OpenShiftCluster) { oc.Properties = nil }), &listing{trust: &trust{}})
	require.EqualError(t, err, "cluster alpha has no properties")
}

// TestPhaseOf is the table of the package doc, row by row, plus the
// case-insensitive and unknown values.
func TestPhaseOf(t *testing.T) {
	tests := []struct {
		state string
		url   bool
		want  sources.Phase
	}{
		{"Creating", false, sources.PhasePending},
		{"Creating", true, sources.PhasePending},
		{"Succeeded", true, sources.PhaseReady},
		{"Succeeded", false, sources.PhaseReady},
		{"Updating", true, sources.PhaseDegraded},
		{"AdminUpdating", true, sources.PhaseDegraded},
		{"Canceled", true, sources.PhaseDegraded},
		{"Failed", true, sources.PhaseDegraded},
		{"Failed", false, sources.PhasePending},
		{"Deleting", true, sources.PhaseLeaving},
		{"Deleting", false, sources.PhaseLeaving},
		{"SUCCEEDED", true, sources.PhaseReady},
		{"creating", false, sources.PhasePending},
		{"fAiLeD", false, sources.PhasePending},
		{"deleting", true, sources.PhaseLeaving},
		{"adminupdating", true, sources.PhaseDegraded},
		{"Maintenance", true, sources.PhaseDegraded},
		{"", false, sources.PhaseDegraded},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/url=%v", tt.state, tt.url), func(t *testing.T) {
			assert.Equal(t, tt.want, phaseOf(tt.state, tt.url))
		})
	}
	for _, s := range armredhatopenshift.PossibleProvisioningStateValues() {
		assert.NotEqual(t, sources.PhaseAbsent, phaseOf(string(s), true), "every state of the SDK's enum has a phase")
	}
}
