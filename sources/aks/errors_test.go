package aks

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

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
	requireFailure(t, env, err, upstream.KindAuth, "managedClusters.list")
}

// TestCutShortRequestsCountAsCanceled: when one subscription's list
// fails, the listing ends and the request still in flight for another
// subscription is cut short. Its transport error carries the failure as
// its context's cause (as net/http's does), yet it counts in
// api_requests_total as canceled, not with the failure's kind.
func TestCutShortRequestsCountAsCanceled(t *testing.T) {
	inFlight := make(chan struct{})
	tr := transportFunc(func(req *http.Request) (*http.Response, error) {
		if strings.Contains(req.URL.Path, subA) {
			close(inFlight)
			<-req.Context().Done()
			return nil, context.Cause(req.Context())
		}
		<-inFlight // subA's request is sent before subB's fails
		return &http.Response{
			StatusCode: http.StatusForbidden, Request: req,
			Header: http.Header{"Content-Type": {"application/json"}, "X-Ms-Error-Code": {"AuthorizationFailed"}},
			Body:   io.NopCloser(strings.NewReader(`{"error":{"code":"AuthorizationFailed","message":"no read on managedClusters"}}`)),
		}, nil
	})
	env := newTestEnv(t, explicit(subA, subB), tr, nil)
	cs, err := env.src.Clusters(context.Background())
	require.EqualError(t, err, "subscription "+subB+": list clusters: HTTP 403 AuthorizationFailed: no read on managedClusters")
	assert.Nil(t, cs)
	requireFailure(t, env, err, upstream.KindAuth, opClusters)
	requests := env.src.metrics.APIRequests
	assert.Equal(t, 1.0, testutil.ToFloat64(requests.WithLabelValues(opClusters, string(upstream.KindAuth))), "subB's request, which failed")
	assert.Equal(t, 1.0, testutil.ToFloat64(requests.WithLabelValues(opClusters, string(upstream.KindCanceled))), "subA's request, cut short")
	assert.Equal(t, 2, testutil.CollectAndCount(requests), "nothing else was sent")
}

type transportFunc func(*http.Request) (*http.Response, error)

func (f transportFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func TestUnknownSubscriptionFailsTheListing(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha")}}}))
	env := newTestEnv(t, explicit(subA, subC), f, nil)
	_, err := env.src.Clusters(context.Background())
	require.ErrorContains(t, err, "subscription "+subC+": list clusters: HTTP 404 SubscriptionNotFound")
	requireFailure(t, env, err, upstream.KindNotFound, "managedClusters.list")
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
	requireFailure(t, env, err, upstream.KindAuth, "subscriptions.list")
}

func TestAuthenticationFailure(t *testing.T) {
	for _, tt := range []struct {
		name, op string
		cfg      Config
		want     string
	}{
		{"configured subscription", "managedClusters.list", explicit(subA), "subscription " + subA + ": list clusters: AADSTS700016: application not found in the directory"},
		{"all subscriptions", "subscriptions.list", Config{}, "list subscriptions: AADSTS700016: application not found in the directory"},
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
			requireFailure(t, env, err, upstream.KindAuth, tt.op)
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
	requireFailure(t, env, err, upstream.KindInvalidResponse, "managedClusters.list")
	assert.Zero(t, f.Calls("credentials"))
}

func TestCancelledListingReturnsNothing(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha")}}}))
	env := newTestEnv(t, explicit(subA), f, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cs, err := env.src.Clusters(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, cs)
	// Counted as cancelled, not as a failure of the API.
	requireFailure(t, env, err, upstream.KindCanceled, "managedClusters.list")
}

func TestThrottlingIsRetried(t *testing.T) {
	a := newARMServer(t)
	a.Throttle(1)
	env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"aks-payments-prod-weu"}, names(cs))
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.APIRequests.WithLabelValues("managedClusters.list", "throttled")))
	assert.Equal(t, 2.0, testutil.ToFloat64(env.src.metrics.APIRequests.WithLabelValues("managedClusters.list", "success")))
	assert.Zero(t, testutil.CollectAndCount(env.src.metrics.Errors), "a throttled request retried is no failed listing")
}

func TestThrottlingBeyondRetriesFailsTheListing(t *testing.T) {
	a := newARMServer(t)
	a.Throttle(100)
	env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
	cs, err := env.src.Clusters(context.Background())
	require.EqualError(t, err, "subscription "+subA+": list clusters: HTTP 429 TooManyRequests: Rate limit exceeded.")
	assert.Nil(t, cs)
	assert.Equal(t, 3.0, testutil.ToFloat64(env.src.metrics.APIRequests.WithLabelValues("managedClusters.list", "throttled")), "1 try + MaxRetries 2")
	requireFailure(t, env, err, upstream.KindThrottled, "managedClusters.list")
}

func TestMalformedResponses(t *testing.T) {
	t.Run("list page", func(t *testing.T) {
		a := newARMServer(t)
		a.SetListBody(`{"value": [{"id": "/subscriptions/`)
		env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
		cs, err := env.src.Clusters(context.Background())
		require.ErrorContains(t, err, "subscription "+subA+": list clusters: unmarshalling type *armcontainerservice.ManagedClusterListResult")
		assert.Nil(t, cs)
		requireFailure(t, env, err, upstream.KindInvalidResponse, "managedClusters.list")
	})
	t.Run("wrong shape", func(t *testing.T) {
		a := newARMServer(t)
		a.SetListBody(`{"value": {"id": 1}}`)
		env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
		_, err := env.src.Clusters(context.Background())
		require.ErrorContains(t, err, "subscription "+subA+": list clusters: unmarshalling type")
		requireFailure(t, env, err, upstream.KindInvalidResponse, "managedClusters.list")
	})
	t.Run("nextLink that loops", func(t *testing.T) {
		a := newARMServer(t)
		a.SetListBody(`{"value":[],"nextLink":"{{URL}}/subscriptions/` + subA + `/providers/Microsoft.ContainerService/managedClusters?api-version=2025-10-01&$skiptoken=same"}`)
		env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
		_, err := env.src.Clusters(context.Background())
		require.EqualError(t, err, "subscription "+subA+": list clusters: malformed response: nextLink repeats")
		assert.Len(t, a.Seen(), 2, "stops at the second page, which points at itself")
		requireFailure(t, env, err, upstream.KindInvalidResponse, "managedClusters.list")
	})
	t.Run("credentials", func(t *testing.T) {
		a := newARMServer(t)
		a.SetCredentials(http.StatusOK, `{"kubeconfigs":[{"name":"clusterUser","value":"not base64!"}]}`)
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
	a.SetCredentials(http.StatusForbidden, `{"error":{"code":"AuthorizationFailed","message":"The client 'x' does not have authorization to perform action 'Microsoft.ContainerService/managedClusters/listClusterUserCredential/action'.\nSecond line."}}`)
	env := newTestEnvWithOptions(t, explicit(subA), a.clientOptions(), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.False(t, cs[0].Ready)
	assert.Equal(t, "CA unavailable: listClusterUserCredential: HTTP 403 AuthorizationFailed: The client 'x' does not have authorization to perform action 'Microsoft.ContainerService/managedClusters/listClusterUserCredential/action'.", cs[0].NotReadyReason)
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.APIRequests.WithLabelValues("managedClusters.listClusterUserCredential", "auth")))
	assert.Zero(t, testutil.CollectAndCount(env.src.metrics.Errors), "a CA that cannot be read fails no listing")
}

// requireFailure checks that err, a failed listing, holds an
// *upstream.Error of this kind and operation, and that errors_total
// counted it once with them and nothing else.
func requireFailure(t *testing.T, env *testEnv, err error, kind upstream.Kind, op string) {
	t.Helper()
	var ue *upstream.Error
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, kind, ue.Kind)
	assert.Equal(t, op, ue.Operation)
	assert.Equal(t, 1, testutil.CollectAndCount(env.src.metrics.Errors), "one series of errors_total")
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.Errors.WithLabelValues(string(kind), op)))
}

func TestCancelledWhileReadingCAs(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha")}}}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.creds = func(_, _, name string) (resp azfake.Responder[armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse], errResp azfake.ErrorResponder) {
		cancel()
		resp.SetResponse(http.StatusOK, credentialsResponse(kubeconfig(name, testCAPEM(t))), nil)
		return resp, errResp
	}
	env := newTestEnv(t, explicit(subA), f, nil)
	cs, err := env.src.Clusters(ctx)
	require.EqualError(t, err, "read cluster CAs: context canceled")
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, cs)
	requireFailure(t, env, err, upstream.KindCanceled, "managedClusters.listClusterUserCredential")
}
