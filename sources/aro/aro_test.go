package aro

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
)

const (
	prodID   = "/subscriptions/" + subA + "/resourceGroups/rg-aro-payments/providers/Microsoft.RedHatOpenShift/OpenShiftClusters/aro-payments-prod"
	sharedID = "/subscriptions/" + subA + "/resourceGroups/RG-Shared/providers/Microsoft.RedHatOpenShift/OpenShiftClusters/aro_Shared.(weu)"
	newID    = "/subscriptions/" + subA + "/resourceGroups/rg-aro-data/providers/Microsoft.RedHatOpenShift/OpenShiftClusters/aro-data-new"
	legacyID = "/subscriptions/" + subA + "/resourceGroups/rg-legacy/providers/Microsoft.RedHatOpenShift/OpenShiftClusters/aro-legacy-neu"
)

// TestFixturesOverHTTP lists the upstream-shaped fixture (two pages)
// through the real SDK and the fake ARM: every cluster is listed, each
// with what it lacks as its not-ready reason.
func TestFixturesOverHTTP(t *testing.T) {
	a := newARMServer(t)
	ca := base64.StdEncoding.EncodeToString(testCAPEM(t))
	cfg := Config{
		Subscriptions: []string{subA}, TenantTag: "team",
		PrivateEndpoints: PrivateEndpoints{ProxyURL: "http://proxy.internal:3128"},
		CustomDomainCA:   map[string]CARef{"OCP.contoso.com": {CAData: ca}},
	}
	// the Secret was annotated with the id as listed; bindings compare ids
	// case-insensitively
	bindings := tokenSecrets{}.bind(prodID, "aro-payments-prod-token").bind(strings.ToUpper(legacyID), "legacy-token")
	env := newTestEnv(t, cfg, a.clientOptions(), bindings, nil)
	cs, accounts, err := env.src.ClustersAndAccounts(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{subA}, subscriptionsOf(accounts))
	for _, c := range cs {
		assert.True(t, slices.ContainsFunc(accounts, func(s string) bool { return strings.HasPrefix(c.ID, s) }), "%s: its resource group covered", c.Name)
	}
	require.Equal(t, []string{"aro-data-new", "aro-legacy-neu", "aro-payments-prod", "aro-shared-weu"}, names(cs))

	assert.Equal(t, sources.Cluster{
		Provider: sources.ProviderARO,
		Name:     "aro-payments-prod",
		Server:   "https://api.p7k2m9xq.westeurope.aroapp.io:6443",
		Auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{
			Secret: &sources.SecretKeyRef{Name: "aro-payments-prod-token", Key: sources.TokenBindingKey},
		}},
		Labels: map[string]string{
			"env": "prod", "team": "payments", "argocd": "enabled",
			LabelResourceGroup: "rg-aro-payments", OpenShiftVersion: "4.15.27", LabelAPIVisibility: "Public",
		},
		Annotations: map[string]string{
			AnnotationResourceID: prodID, OpenShiftVersion: "4.15.27",
			AnnotationConsoleURL: "https://console-openshift-console.apps.p7k2m9xq.westeurope.aroapp.io",
		},
		Region: "westeurope", Account: subA, Group: "rg-aro-payments", Tenant: "payments", TenantFromOwner: true,
		ID: strings.ToLower(prodID), State: "Succeeded", Phase: sources.PhaseReady, Ready: true,
	}, byName(cs, "aro-payments-prod"), "a managed domain: no caData; the OpenShift version is no Kubernetes version")

	shared := byName(cs, "aro-shared-weu")
	assert.Equal(t, "https://api.ocp.contoso.com:6443", shared.Server)
	assert.Equal(t, ca, shared.CA.Data(), "the custom domain's configured CA")
	assert.Equal(t, "http://proxy.internal:3128", shared.ProxyURL, "a Private API server")
	assert.Equal(t, "Private", shared.Labels[LabelAPIVisibility])
	assert.Equal(t, "RG-Shared", shared.Group, "the resource group as the id spells it")
	assert.Equal(t, sources.PhaseDegraded, shared.Phase, "Updating")
	assert.False(t, shared.Ready)
	assert.Equal(t, "no token Secret: create one labelled argocd-cluster-discovery.io/token-for and annotated argocd-cluster-discovery.io/cluster-id="+
		strings.ToLower(sharedID)+", with the token under \"token\"", shared.NotReadyReason)
	assert.Equal(t, sources.AuthNone, shared.Auth.Kind)

	creating := byName(cs, "aro-data-new")
	assert.Equal(t, sources.PhasePending, creating.Phase)
	assert.False(t, creating.Ready)
	assert.Equal(t, "the cluster reports no API server URL (apiserverProfile.url)", creating.NotReadyReason)
	assert.Empty(t, creating.Server)

	legacy := byName(cs, "aro-legacy-neu")
	assert.Equal(t, sources.PhaseLeaving, legacy.Phase, "listed while it is being deleted")
	assert.True(t, legacy.Ready)
	assert.Equal(t, "northeurope", legacy.Region)
	assert.Equal(t, "legacy-token", legacy.Auth.TokenRef.Secret.Name)

	for _, c := range cs {
		assert.Empty(t, c.KubernetesVersion, c.Name)
		if c.Ready {
			require.NoError(t, c.Validate())
		}
	}
	seen := a.Seen()
	require.Len(t, seen, 3)
	assert.Equal(t, "GET /subscriptions/"+subA+"/resourcegroups?api-version=2025-04-01", seen[2], "the resource groups after the clusters")
	assert.Equal(t, "GET /subscriptions/"+subA+"/providers/Microsoft.RedHatOpenShift/openShiftClusters?api-version=2023-11-22", seen[0])
	assert.Regexp(t, `%24skipToken=[^&]+`, seen[1], "page 2 through the fixture's nextLink")
	assert.Equal(t, "Bearer fake_token", a.Authorizations()[0])
	assertNoToken(t, env, cs)
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.NotReady.WithLabelValues(notReadyToken)))
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.NotReady.WithLabelValues(notReadyServer)))
}

// TestPagingDrainsEveryPage: the resource provider pages at 10; 25
// clusters are three pages, all drained, in two subscriptions at once.
func TestPagingDrainsEveryPage(t *testing.T) {
	a := newARMServer(t)
	var all []fakeazure.OpenShiftCluster
	for i := range 25 {
		all = append(all, cluster(subC, "rg", fmt.Sprintf("aro-%02d", i)))
	}
	all = append(all, cluster(subB, "rg", "other"))
	a.SetOpenShiftClusters(all...)
	env := newTestEnv(t, explicit(subC, strings.ToUpper(subB)), a.clientOptions(), boundAll(all...), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 26)
	for _, c := range cs {
		assert.True(t, c.Ready, c.Name)
		assert.Equal(t, sources.PhaseReady, c.Phase)
	}
	assert.Equal(t, subB, byName(cs, "other").Account, "subscription ids are lower-cased")
	assert.Equal(t, 4, a.AROLists(), "3 pages of subC, 1 of subB")
	assert.Equal(t, 4.0, testutil.ToFloat64(env.src.metrics.APIRequests.WithLabelValues(opClusters, "success")))
}

// TestEveryProvisioningStateOverHTTP: every state of the SDK's enum, and
// one it does not know, is listed with its state verbatim and its phase.
func TestEveryProvisioningStateOverHTTP(t *testing.T) {
	tests := []struct {
		name, state string
		noURL       bool
		phase       sources.Phase
	}{
		{"creating", "Creating", true, sources.PhasePending},
		{"succeeded", "Succeeded", false, sources.PhaseReady},
		{"updating", "Updating", false, sources.PhaseDegraded},
		{"admin-updating", "AdminUpdating", false, sources.PhaseDegraded},
		{"canceled", "Canceled", false, sources.PhaseDegraded},
		{"failed-update", "Failed", false, sources.PhaseDegraded},
		{"failed-creation", "Failed", true, sources.PhasePending},
		{"deleting", "Deleting", false, sources.PhaseLeaving},
		{"maintenance", "Maintenance", false, sources.PhaseDegraded},
	}
	a := newARMServer(t)
	var all []fakeazure.OpenShiftCluster
	for _, tt := range tests {
		c := cluster(subC, "RG-Apps", tt.name)
		c.Provisioning, c.NoURL = tt.state, tt.noURL
		all = append(all, c)
	}
	a.SetOpenShiftClusters(all...)
	env := newTestEnv(t, explicit(subC), a.clientOptions(), boundAll(all...), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, len(tests), "every cluster is listed, whatever its state")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := byName(cs, tt.name)
			assert.Equal(t, tt.state, c.State)
			assert.Equal(t, tt.phase, c.Phase)
			assert.Equal(t, "/subscriptions/"+subC+"/resourcegroups/rg-apps/providers/microsoft.redhatopenshift/openshiftclusters/"+tt.name, c.ID)
			assert.Equal(t, !tt.noURL, c.Ready, "renderable exactly when there is a server")
		})
	}
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.Upstream.WithLabelValues("Maintenance")))
}

// TestSubscriptionStatesOverHTTP discovers subscriptions through the fake:
// an Enabled one is listed as it is, the clusters of a Disabled one are
// degraded (or leaving), a Warned one is annotated, and a Deleted one is
// never requested.
func TestSubscriptionStatesOverHTTP(t *testing.T) {
	const subWarned, subDeleted = "0b1f6471-1bf0-4dda-aec3-00000000000b", "0b1f6471-1bf0-4dda-aec3-00000000000c"
	a := newARMServer(t)
	a.SetSubscriptions([]string{subA, subB, subWarned, subDeleted},
		map[string]string{subB: "Disabled", subWarned: "Warned", subDeleted: "Deleted"})
	deleting := cluster(subB, "rg", "disabled-deleting")
	deleting.Provisioning = "Deleting"
	all := []fakeazure.OpenShiftCluster{
		cluster(subA, "rg", "enabled"), cluster(subB, "rg", "disabled"), deleting,
		cluster(subWarned, "rg", "warned"), cluster(subDeleted, "rg", "deleted"),
	}
	a.SetOpenShiftClusters(all...)
	env := newTestEnv(t, Config{}, a.clientOptions(), boundAll(all...), nil)
	cs, accounts, err := env.src.ClustersAndAccounts(context.Background())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{subA, subB, subWarned}, subscriptionsOf(accounts))
	type got struct {
		Phase    sources.Phase
		SubState string
	}
	have := map[string]got{}
	for _, c := range cs {
		have[c.Name] = got{c.Phase, c.Annotations[AnnotationSubscriptionState]}
		assert.True(t, c.Ready, c.Name)
	}
	assert.Equal(t, map[string]got{
		"enabled":           {sources.PhaseReady, ""},
		"disabled":          {sources.PhaseDegraded, "Disabled"},
		"disabled-deleting": {sources.PhaseLeaving, "Disabled"},
		"warned":            {sources.PhaseReady, "Warned"},
	}, have)
	for _, s := range a.Seen() {
		assert.NotContains(t, s, subDeleted, "the Deleted subscription is never requested")
	}
	assert.Contains(t, env.logs.String(), `"msg":"subscription skipped","source":"aro-prod","subscription":"`+subDeleted+`","state":"Deleted"`)
}

// TestLostSubscriptionIsAHeldDrop: a subscription that drops out of the
// list (Reader removed) takes its clusters out of the listing, and
// ClustersAndAccounts no longer names it, so the inventory holds their
// departure; a cluster deleted in a subscription still listed departs as
// usual.
func TestLostSubscriptionIsAHeldDrop(t *testing.T) {
	a := newARMServer(t)
	a.SetSubscriptions([]string{subA, subC}, nil)
	all := []fakeazure.OpenShiftCluster{
		cluster(subA, "rg", "a1"), cluster(subA, "rg", "a2"), cluster(subA, "rg", "a3"), cluster(subA, "rg", "a4"),
		cluster(subC, "rg", "c1"),
	}
	a.SetOpenShiftClusters(all...)
	env, inv := listedOnce(t, a, all, 5)

	a.SetSubscriptions([]string{subA}, nil) // c1's subscription went out of sight
	a.RemoveOpenShiftClusters(subA, "a4")   // a4 was deleted
	cs, accounts, err := env.src.ClustersAndAccounts(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"a1", "a2", "a3"}, names(cs))
	assert.Equal(t, []string{azurearm.Scope(subA, "rg")}, accounts)
	for range 2 {
		require.NoError(t, inv.RefreshAll(t.Context()))
	}
	snap := inv.Snapshot()
	assert.Equal(t, []string{"a1", "a2", "a3", "c1"}, servedNames(snap), "c1 is held, a4 departed")
	st, ok := snap.Source("aro-prod")
	require.True(t, ok)
	assert.Equal(t, 1, st.HeldDepartures)
	assert.NotContains(t, env.src.client.clusters.Subscriptions(), subC, "its client is forgotten")
}

// TestTokenBindings: no Secret, one, or two bound to a cluster; a Secret
// bound to another provider's cluster binds nothing here.
func TestTokenBindings(t *testing.T) {
	a := newARMServer(t)
	none, one, two := cluster(subC, "rg", "none"), cluster(subC, "rg", "one"), cluster(subC, "rg", "two")
	a.SetOpenShiftClusters(none, one, two)
	bindings := tokenSecrets{}.bind(one.ID(), "token-one").bind(two.ID(), "token-two-b").bind(two.ID(), "token-two-a")
	env := newTestEnv(t, explicit(subC), a.clientOptions(), bindings, nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"none", "one", "two"}, names(cs))
	assert.False(t, cs[0].Ready)
	assert.True(t, strings.HasPrefix(cs[0].NotReadyReason, "no token Secret: "), cs[0].NotReadyReason)
	assert.True(t, cs[1].Ready)
	assert.Equal(t, &sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "token-one", Key: "token"}}, cs[1].Auth.TokenRef)
	assert.False(t, cs[2].Ready)
	assert.Equal(t, "2 token Secrets are bound to it (token-two-a, token-two-b): keep one", cs[2].NotReadyReason)
	assert.Equal(t, 2.0, testutil.ToFloat64(env.src.metrics.NotReady.WithLabelValues(notReadyToken)))
}

// TestNameCollisions: two clusters whose names normalise to one are both
// listed not ready, each naming the other; a name template with the
// resource group tells them apart.
func TestNameCollisions(t *testing.T) {
	a := newARMServer(t)
	first, second := cluster(subC, "rg-weu", "Payments_Prod"), cluster(subC, "rg-neu", "payments.prod")
	third := cluster(subC, "rg-neu", "other")
	a.SetOpenShiftClusters(first, second, third)
	bindings := boundAll(first, second, third)

	env := newTestEnv(t, explicit(subC), a.clientOptions(), bindings, nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"other", "payments-prod", "payments-prod"}, names(cs), "both listed, none dropped")
	for _, c := range cs[1:] {
		assert.False(t, c.Ready)
		other := first.ID()
		if c.Annotations[AnnotationResourceID] == first.ID() {
			other = second.ID()
		}
		assert.Equal(t, "name payments-prod is also the name of "+other+": set nameTemplate (e.g. {{.Name}}-{{.ResourceGroup | lower}}) to tell them apart",
			c.NotReadyReason)
	}
	assert.True(t, cs[0].Ready)
	assert.Equal(t, 2.0, testutil.ToFloat64(env.src.metrics.NotReady.WithLabelValues(notReadyConflict)))
	assert.Contains(t, env.logs.String(), "two ARO clusters have the same name")

	cfg := Config{Subscriptions: []string{subC}, NamePrefix: "aro-", NameTemplate: "{{.Name}}-{{.ResourceGroup}}"}
	env = newTestEnv(t, cfg, a.clientOptions(), bindings, nil)
	cs, err = env.src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"aro-other-rg-neu", "aro-payments-prod-rg-neu", "aro-payments-prod-rg-weu"}, names(cs))
	for _, c := range cs {
		assert.True(t, c.Ready, c.Name)
	}
}

func TestProvider(t *testing.T) {
	var reg sources.Registration = Provider{}
	assert.Equal(t, sources.ProviderARO, reg.Name())
	assert.Equal(t, sources.KindCloud, reg.Kind())
	cfg, ok := reg.NewConfig().(*Config)
	require.True(t, ok, "the section is a *Config")
	assert.Equal(t, &Config{}, cfg, "empty until Default")
	assert.JSONEq(t, string(configSchema), string(Provider{}.ConfigSchema()))
}

func TestNewSourceErrors(t *testing.T) {
	bindings := tokenSecrets{}
	cfg := &Config{Subscriptions: []string{"nope"}, Auth: "password"}
	cfg.Default()
	_, err := cfg.NewSource(sources.SourceOptions{Name: "aro", TokenBindings: bindings})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "aro.subscriptions[0]")
	assert.Contains(t, err.Error(), `aro.auth: Unsupported value: "password": supported values: "bearerToken", "agent"`)

	_, err = (&Config{}).NewSource(sources.SourceOptions{Name: "aro", TokenBindings: bindings})
	require.ErrorContains(t, err, "aro.cloud: Unsupported value", "a section without its defaults is no valid section")

	cfg = &Config{}
	cfg.Default()
	src, err := cfg.NewSource(sources.SourceOptions{TokenBindings: bindings})
	require.EqualError(t, err, "aro source: no name")
	assert.Nil(t, src, "no typed nil in the interface")

	src, err = cfg.NewSource(sources.SourceOptions{Name: "aro"})
	require.EqualError(t, err, "aro source aro: the aro provider needs the Kubernetes API to find the token Secrets or the agents bound to its clusters (secrets.kubeconfig, or running in a cluster)")
	assert.Nil(t, src)
	agentMode := &Config{Auth: AuthAgent}
	agentMode.Default()
	src, err = agentMode.NewSource(sources.SourceOptions{Name: "aro", TokenBindings: bindings})
	require.ErrorContains(t, err, "needs the Kubernetes API to find the token Secrets or the agents", "agent mode without the agents' reader")
	assert.Nil(t, src)

	missing := filepath.Join(t.TempDir(), "missing.pem")
	cfg = &Config{DefaultCA: CARef{CAFile: missing}}
	cfg.Default()
	_, err = cfg.NewSource(sources.SourceOptions{Name: "aro", TokenBindings: bindings})
	require.EqualError(t, err, "aro source aro: defaultCA.caFile "+missing+": no such file or directory", "a CA file is read at start-up")

	a := newARMServer(t)
	env := newTestEnv(t, explicit(subA), a.clientOptions(), bindings, nil)
	cfg = &Config{Subscriptions: []string{subA}}
	cfg.Default()
	_, err = newSource(*cfg, sources.SourceOptions{Name: "again", Registerer: env.reg, TokenBindings: bindings}, azurearm.Hooks{Credential: &azfake.TokenCredential{}})
	require.ErrorContains(t, err, "register metrics")
}

func TestNewBuildsTheDefaultCredentialWithoutCallingAzure(t *testing.T) {
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", "/nonexistent/token")
	t.Setenv("AZURE_CLIENT_ID", "00000000-0000-0000-0000-000000000001")
	t.Setenv("AZURE_TENANT_ID", "00000000-0000-0000-0000-000000000002")
	cfg := &Config{ClientID: "00000000-0000-0000-0000-000000000003"}
	cfg.Default()
	src, err := cfg.NewSource(sources.SourceOptions{Name: "aro", TokenBindings: tokenSecrets{}})
	require.NoError(t, err)
	require.IsType(t, &Source{}, src)
	assert.NotNil(t, src.(*Source).client.Cred)
	assert.NotNil(t, src.(*Source).client.Subs)
}

// TestBindingsAreReadOncePerListing: the token bindings are listed once
// per listing, whatever the number of subscriptions and pages; a failure
// to list them fails the listing before ARM is called.
func TestBindingsAreReadOncePerListing(t *testing.T) {
	a := newARMServer(t)
	var all []fakeazure.OpenShiftCluster
	for i := range 12 {
		all = append(all, cluster(subC, "rg", fmt.Sprintf("c%d", i)), cluster(subB, "rg", fmt.Sprintf("b%d", i)))
	}
	a.SetOpenShiftClusters(all...)
	counted := &countingBindings{tokenSecrets: boundAll(all...)}
	env := newTestEnv(t, explicit(subB, subC), a.clientOptions(), counted, nil)
	_, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	_, err = env.src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, counted.calls)

	before := len(a.Seen())
	env = newTestEnv(t, explicit(subC), a.clientOptions(), unreachableAPI{errors.New("dial tcp 10.0.0.1:443: connect: connection refused")}, nil)
	cs, err := env.src.Clusters(context.Background())
	require.EqualError(t, err, "token bindings: dial tcp 10.0.0.1:443: connect: connection refused")
	assert.Nil(t, cs)
	assert.Len(t, a.Seen(), before, "ARM is not called")
}

// countingBindings counts the listings of its bindings.
type countingBindings struct {
	tokenSecrets
	calls int
}

func (c *countingBindings) Bound(ctx context.Context, p sources.Provider) (map[string][]string, error) {
	c.calls++
	return c.tokenSecrets.Bound(ctx, p)
}

// TestNoCredentialActionIsEverCalled: listCredentials and
// listAdminCredentials hand out admin material; the source's code never
// calls them (its only ARM calls are the two list pagers), and listings
// over the fake send none (newARMServer checks it after every test).
func TestNoCredentialActionIsEverCalled(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		n++
		for _, call := range []string{"ListCredentials", "ListAdminCredentials"} {
			assert.NotContains(t, string(b), call, f)
		}
	}
	assert.Positive(t, n)
	a := newARMServer(t)
	env := newTestEnv(t, explicit(subA), a.clientOptions(), tokenSecrets{}, nil)
	_, err = env.src.Clusters(context.Background())
	require.NoError(t, err)
	for _, s := range a.Seen() {
		assert.True(t, strings.HasPrefix(s, http.MethodGet+" "), s)
	}
}
