package aks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
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
	// credStatus/credBody, when set, answer listClusterUserCredential.
	credStatus int
	credBody   string
	requests   []string
	authz      []string
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
	listBody, credStatus, credBody := a.listBody, a.credStatus, a.credBody
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
		write(http.StatusOK, string(fixture(a.t, "azure-subscriptions-list.json")))
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/providers/Microsoft.ContainerService/managedClusters"):
		switch {
		case listBody != "":
			write(http.StatusOK, strings.ReplaceAll(listBody, "{{URL}}", a.srv.URL))
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
		CAData:   fixtureCAData(t),
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
		KubernetesVersion: "v1.31.11", State: "Succeeded", Ready: true,
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
			cfg := Config{
				PrivateClusters: tt.policy, TenantTag: "team",
				Auth: AuthConfig{ClientID: "80faf920-1908-4b52-b5ef-a8e7bedfc67a"},
			}
			env := newTestEnvWithOptions(t, cfg, a.clientOptions(), nil)
			cs, err := env.src.Clusters(context.Background())
			require.NoError(t, err)

			want := []string{"aks-payments-prod-weu"}
			if tt.shared != "" {
				want = append(want, "aks-shared-neu")
				assert.Equal(t, tt.shared, byName(cs, "aks-shared-neu").Server)
			}
			require.Equal(t, want, names(cs), "the stopped sandbox is left out, and the disabled subscription is not listed")
			assert.Equal(t, payments, cs[0])

			seen := a.seen()
			assert.Equal(t, "GET /subscriptions?api-version=2022-12-01", seen[0])
			assert.Equal(t, "GET /subscriptions/"+sub+"/providers/Microsoft.ContainerService/managedClusters?api-version=2025-10-01", seen[1])
			assert.Contains(t, seen[2], "%24skiptoken=", "page 2 through the rewritten nextLink, followed verbatim")
			assert.Len(t, seen, 3+len(want), "one credential read per served cluster")
			for _, s := range seen {
				assert.NotContains(t, s, "3e1f7a2c", "the disabled subscription is never listed")
			}
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
