package aks

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// armServer serves the fixtures the way Azure Resource Manager does, with
// nextLink rewritten to the test server. Hooks inject failures.
type armServer struct {
	t   testing.TB
	srv *httptest.Server

	mu sync.Mutex
	// throttle answers this many list requests with 429 first.
	throttle int
	// listBody, when set, answers every list request; {{URL}} becomes the
	// server's URL.
	listBody string
	// lists answers the list requests of a subscription (lower-case id).
	// Without listBody or an entry, the fixture pages answer for the
	// fixture's subscription (subA) and 404 SubscriptionNotFound for others.
	lists map[string]string
	// subsBody, when set, answers GET /subscriptions instead of the fixture.
	subsBody string
	// credStatus/credBody, when set, answer listClusterUserCredential.
	credStatus int
	credBody   string
	// readOnly lists subscriptions (lower-case ids) whose POSTs fail as
	// in a Disabled subscription.
	readOnly map[string]bool
	requests []string
	authz    []string
}

func newARMServer(t testing.TB) *armServer {
	a := &armServer{t: t}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *armServer) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.requests = append(a.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	a.authz = append(a.authz, r.Header.Get("Authorization"))
	throttled := false
	if strings.HasSuffix(r.URL.Path, "/managedClusters") && a.throttle > 0 {
		a.throttle--
		throttled = true
	}
	listBody, credStatus, credBody, subsBody := a.listBody, a.credStatus, a.credBody, a.subsBody
	sub := ""
	if parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/"); len(parts) > 1 && parts[0] == "subscriptions" {
		sub = strings.ToLower(parts[1])
	}
	subList, hasSubList := a.lists[sub]
	readOnly := a.readOnly[sub]
	a.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	write := func(status int, body string) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
	switch {
	case throttled:
		w.Header().Set("Retry-After", "0")
		write(http.StatusTooManyRequests, `{"error":{"code":"TooManyRequests","message":"Rate limit exceeded."}}`)
	case r.Method == http.MethodGet && r.URL.Path == "/subscriptions":
		if subsBody != "" {
			write(http.StatusOK, subsBody)
			return
		}
		write(http.StatusOK, string(fixture(a.t, "azure-subscriptions-list.json")))
	case r.Method == http.MethodPost && readOnly:
		write(http.StatusConflict, `{"error":{"code":"ReadOnlyDisabledSubscription","message":"The subscription '`+sub+`' is disabled and therefore marked as read only. You cannot perform any write actions on this subscription until it is re-enabled."}}`)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/providers/Microsoft.ContainerService/managedClusters"):
		switch {
		case listBody != "":
			write(http.StatusOK, strings.ReplaceAll(listBody, "{{URL}}", a.srv.URL))
		case hasSubList:
			write(http.StatusOK, strings.ReplaceAll(subList, "{{URL}}", a.srv.URL))
		case sub != subA:
			write(http.StatusNotFound, `{"error":{"code":"SubscriptionNotFound","message":"The subscription '`+sub+`' could not be found."}}`)
		case r.URL.Query().Get("$skiptoken") != "":
			write(http.StatusOK, string(fixture(a.t, "aks-managed-clusters-list-page2.json")))
		default:
			page := strings.ReplaceAll(string(fixture(a.t, "aks-managed-clusters-list.json")), "https://management.azure.com", a.srv.URL)
			write(http.StatusOK, page)
		}
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/listClusterUserCredential"):
		if credStatus != 0 {
			write(credStatus, credBody)
			return
		}
		write(http.StatusOK, string(fixture(a.t, "aks-list-cluster-user-credentials.json")))
	default:
		write(http.StatusNotFound, `{"error":{"code":"NotFound","message":"no fixture"}}`)
	}
}

func (a *armServer) clientOptions() *arm.ClientOptions {
	co := &arm.ClientOptions{}
	co.Cloud = cloud.Configuration{
		ActiveDirectoryAuthorityHost: "https://login.microsoftonline.com/",
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: a.srv.URL, Audience: "https://management.core.windows.net/"},
		},
	}
	co.InsecureAllowCredentialWithHTTP = true
	co.Transport = a.srv.Client()
	co.Retry = fastRetry
	return co
}

func (a *armServer) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.requests...)
}

// armCluster is the fixture's aks-payments-prod-weu cluster as ARM lists
// it, moved to sub/rg/name, with these states and, when fqdn is false,
// without an API server FQDN.
func armCluster(t testing.TB, sub, rg, name, provisioningState, powerState string, fqdn bool) map[string]any {
	t.Helper()
	var page struct{ Value []map[string]any }
	require.NoError(t, json.Unmarshal(fixture(t, "aks-managed-clusters-list.json"), &page))
	mc := page.Value[0]
	require.Equal(t, "aks-payments-prod-weu", mc["name"])
	mc["id"] = "/subscriptions/" + sub + "/resourcegroups/" + rg + "/providers/Microsoft.ContainerService/managedClusters/" + name
	mc["name"] = name
	props := mc["properties"].(map[string]any)
	props["provisioningState"] = provisioningState
	props["powerState"] = map[string]any{"code": powerState}
	props["fqdn"] = name + "-dns-5f3c1a9e.hcp.westeurope.azmk8s.io"
	if !fqdn {
		delete(props, "fqdn")
		delete(props, "azurePortalFQDN")
	}
	return mc
}

// listJSON is one list page holding these clusters.
func listJSON(t testing.TB, clusters ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"value": clusters})
	require.NoError(t, err)
	return string(b)
}

// subscriptionsJSON is the fixture's subscription list with these
// subscriptions (id → state) added, each a copy of the fixture's first.
func subscriptionsJSON(t testing.TB, extra map[string]string) string {
	t.Helper()
	var list struct {
		Value []map[string]any `json:"value"`
	}
	require.NoError(t, json.Unmarshal(fixture(t, "azure-subscriptions-list.json"), &list))
	for _, id := range sortedKeys(extra) {
		sub := maps.Clone(list.Value[0])
		sub["id"], sub["subscriptionId"], sub["displayName"], sub["state"] = "/subscriptions/"+id, id, "sub-"+extra[id], extra[id]
		list.Value = append(list.Value, sub)
	}
	b, err := json.Marshal(list)
	require.NoError(t, err)
	return string(b)
}

// fixtureCAData is certificate-authority-data of the decoded fixture.
func fixtureCAData(t testing.TB) string {
	m := regexp.MustCompile(`certificate-authority-data: (\S+)`).FindSubmatch(fixture(t, "aks-user-kubeconfig.decoded.yaml"))
	require.NotNil(t, m)
	return string(m[1])
}

func TestFixturesOverHTTP(t *testing.T) {
	const sub = "9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41"
	payments := sources.Cluster{
		Provider: sources.ProviderAKS,
		Name:     "aks-payments-prod-weu",
		Server:   "https://aks-payments-prod-weu-dns-5f3c1a9e.hcp.westeurope.azmk8s.io:443",
		CA:       sources.CAFromData(fixtureCAData(t)),
		Auth: sources.Auth{Kind: sources.AuthExec, Exec: &sources.ExecProvider{
			Command: "argocd-k8s-auth", Args: []string{"azure"}, APIVersion: "client.authentication.k8s.io/v1beta1",
			Env: map[string]string{"AAD_LOGIN_METHOD": "workloadidentity", "AZURE_CLIENT_ID": "80faf920-1908-4b52-b5ef-a8e7bedfc67a"},
		}},
		CloudID: "aks/" + sub + "/rg-payments-prod/aks-payments-prod-weu",
		Labels:  map[string]string{"env": "prod", "team": "payments", "argocd": "enabled", LabelResourceGroup: "rg-payments-prod"},
		Annotations: map[string]string{
			AnnotationResourceID: "/subscriptions/" + sub + "/resourcegroups/rg-payments-prod/providers/Microsoft.ContainerService/managedClusters/aks-payments-prod-weu",
		},
		Region: "westeurope", Account: sub, Tenant: "payments",
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
			a.lists = map[string]string{subB: listJSON(t, armCluster(t, subB, "rg-legacy", "aks-legacy-weu", "Succeeded", "Running", true))}
			cfg := Config{
				PrivateClusters: tt.policy, TenantTag: "team",
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

			seen := a.seen()
			assert.Equal(t, "GET /subscriptions?api-version=2022-12-01", seen[0])
			assert.Contains(t, seen, "GET /subscriptions/"+sub+"/providers/Microsoft.ContainerService/managedClusters?api-version=2025-10-01")
			assert.Contains(t, seen, "GET /subscriptions/"+subB+"/providers/Microsoft.ContainerService/managedClusters?api-version=2025-10-01")
			assert.True(t, slices.ContainsFunc(seen, func(s string) bool { return strings.Contains(s, "%24skiptoken=") }),
				"page 2 through the rewritten nextLink, followed verbatim")
			assert.Len(t, seen, 4+len(want), "one credential read per served cluster")
			assert.Equal(t, "Bearer fake_token", a.authz[0])
		})
	}
}

func TestThrottlingIsRetried(t *testing.T) {
	a := newARMServer(t)
	a.throttle = 1
	env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"aks-payments-prod-weu"}, names(cs))
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.apiRequests.WithLabelValues("managedClusters.list", "429")))
	assert.Equal(t, 2.0, testutil.ToFloat64(env.src.metrics.apiRequests.WithLabelValues("managedClusters.list", "200")))
}

func TestThrottlingBeyondRetriesFailsTheListing(t *testing.T) {
	a := newARMServer(t)
	a.throttle = 100
	env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
	cs, err := env.src.Clusters(context.Background())
	require.EqualError(t, err, "subscription "+subA+": list clusters: HTTP 429 TooManyRequests: Rate limit exceeded.")
	assert.Nil(t, cs)
	assert.Equal(t, 3.0, testutil.ToFloat64(env.src.metrics.apiRequests.WithLabelValues("managedClusters.list", "429")), "1 try + MaxRetries 2")
}

func TestMalformedResponses(t *testing.T) {
	t.Run("list page", func(t *testing.T) {
		a := newARMServer(t)
		a.listBody = `{"value": [{"id": "/subscriptions/`
		env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
		cs, err := env.src.Clusters(context.Background())
		require.ErrorContains(t, err, "subscription "+subA+": list clusters: unmarshalling type *armcontainerservice.ManagedClusterListResult")
		assert.Nil(t, cs)
	})
	t.Run("wrong shape", func(t *testing.T) {
		a := newARMServer(t)
		a.listBody = `{"value": {"id": 1}}`
		env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
		_, err := env.src.Clusters(context.Background())
		require.ErrorContains(t, err, "subscription "+subA+": list clusters: unmarshalling type")
	})
	t.Run("nextLink that loops", func(t *testing.T) {
		a := newARMServer(t)
		a.listBody = `{"value":[],"nextLink":"{{URL}}/subscriptions/` + subA + `/providers/Microsoft.ContainerService/managedClusters?api-version=2025-10-01&$skiptoken=same"}`
		env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
		_, err := env.src.Clusters(context.Background())
		require.EqualError(t, err, "subscription "+subA+": list clusters: malformed response: nextLink repeats")
		assert.Len(t, a.seen(), 2, "stops at the second page, which points at itself")
	})
	t.Run("credentials", func(t *testing.T) {
		a := newARMServer(t)
		a.credStatus, a.credBody = http.StatusOK, `{"kubeconfigs":[{"name":"clusterUser","value":"not base64!"}]}`
		env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
		cs, err := env.src.Clusters(context.Background())
		require.NoError(t, err)
		require.Len(t, cs, 1)
		assert.False(t, cs[0].Ready)
		assert.Contains(t, cs[0].NotReadyReason, "CA unavailable: listClusterUserCredential: unmarshalling type *armcontainerservice.CredentialResults")
	})
}

func TestForbiddenCredentialsOverHTTP(t *testing.T) {
	a := newARMServer(t)
	a.credStatus = http.StatusForbidden
	a.credBody = `{"error":{"code":"AuthorizationFailed","message":"The client 'x' does not have authorization to perform action 'Microsoft.ContainerService/managedClusters/listClusterUserCredential/action'.\nSecond line."}}`
	env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.False(t, cs[0].Ready)
	assert.Equal(t, "CA unavailable: listClusterUserCredential: HTTP 403 AuthorizationFailed: The client 'x' does not have authorization to perform action 'Microsoft.ContainerService/managedClusters/listClusterUserCredential/action'.", cs[0].NotReadyReason)
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.apiRequests.WithLabelValues("managedClusters.listClusterUserCredential", "403")))
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
	a.lists = map[string]string{subA: listJSON(t, clusters...)}
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
	assert.Zero(t, testutil.CollectAndCount(env.src.metrics.skipped), "nothing is skipped for its state")
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
	a.subsBody = subscriptionsJSON(t, map[string]string{subPastDue: "PastDue", subWarned: "Warned", subDeleted: "Deleted"})
	a.lists = map[string]string{
		subB: listJSON(t,
			armCluster(t, subB, "rg", "disabled-running", "Succeeded", "Running", true),
			armCluster(t, subB, "rg", "disabled-upgrading", "Upgrading", "Running", true),
			armCluster(t, subB, "rg", "disabled-deleting", "Deleting", "Running", true)),
		subPastDue: listJSON(t, armCluster(t, subPastDue, "rg", "pastdue-running", "Succeeded", "Running", true)),
		subWarned: listJSON(t,
			armCluster(t, subWarned, "rg", "warned-running", "Succeeded", "Running", true),
			armCluster(t, subWarned, "rg", "warned-stopped", "Succeeded", "Stopped", true)),
		// never served: listing it would fail the whole listing
		subDeleted: `{"value": [`,
	}
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
	for _, s := range a.seen() {
		assert.NotContains(t, s, subDeleted, "the Deleted subscription is never requested")
	}

	// The Disabled subscription now refuses POSTs, as ARM does: a cluster
	// whose CA is cached keeps it, a new one is listed not ready.
	a.mu.Lock()
	a.readOnly = map[string]bool{subB: true}
	a.lists[subB] = listJSON(t,
		armCluster(t, subB, "rg", "disabled-running", "Succeeded", "Running", true),
		armCluster(t, subB, "rg", "disabled-new", "Succeeded", "Running", true))
	a.mu.Unlock()
	cs, err = env.src.Clusters(ctx)
	require.NoError(t, err)
	delete(want, "disabled-upgrading")
	delete(want, "disabled-deleting")
	want["disabled-new"] = got{sources.PhaseDegraded, "Disabled", false, "HTTP 409 ReadOnlyDisabledSubscription"}
	check(t, cs, want)
	assert.Equal(t, fixtureCAData(t), byName(cs, "disabled-running").CA.Data())
}
