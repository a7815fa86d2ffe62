package aro

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

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

// TestARMErrorsFailTheListing: what ARM answers through the fake becomes
// the listing's error, one line, with its kind; no partial result.
func TestARMErrorsFailTheListing(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		code    string
		msg     string
		times   int
		kind    upstream.Kind
		want    string
		retries int // requests of the failing subscription
	}{
		{"403 AuthorizationFailed", http.StatusForbidden, "AuthorizationFailed",
			"The client 'x' with object id 'y' does not have authorization to perform action 'Microsoft.RedHatOpenShift/openShiftClusters/read'.\nSecond line.", 1,
			upstream.KindAuth, "HTTP 403 AuthorizationFailed: The client 'x' with object id 'y' does not have authorization to perform action 'Microsoft.RedHatOpenShift/openShiftClusters/read'.", 1},
		{"429 beyond the retries", http.StatusTooManyRequests, "TooManyRequests", "Rate limit exceeded.", -1,
			upstream.KindThrottled, "HTTP 429 TooManyRequests: Rate limit exceeded.", 3},
		{"500", http.StatusInternalServerError, "InternalServerError", "An internal error occurred.", -1,
			upstream.KindServer, "HTTP 500 InternalServerError: An internal error occurred.", 3},
		{"503", http.StatusServiceUnavailable, "ServiceUnavailable", "The service is unavailable.", -1,
			upstream.KindServer, "HTTP 503 ServiceUnavailable: The service is unavailable.", 3},
		{"504", http.StatusGatewayTimeout, "GatewayTimeout", "The gateway did not receive a response in time.", -1,
			upstream.KindTimeout, "HTTP 504 GatewayTimeout: The gateway did not receive a response in time.", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newARMServer(t)
			a.SetOpenShiftClusters(cluster(subC, "rg", "ok"), cluster(subB, "rg", "fails"))
			a.FailARO(subB, tt.status, tt.code, tt.msg, tt.times)
			env := newTestEnv(t, explicit(subC, subB), a.clientOptions(), tokenSecrets{}, nil)
			cs, err := env.src.Clusters(context.Background())
			require.EqualError(t, err, "subscription "+subB+": list clusters: "+tt.want)
			assert.Nil(t, cs, "no partial result")
			assert.NotContains(t, err.Error(), "\n", "one line for /status")
			requireFailure(t, env, err, tt.kind, opClusters)
			assert.Equal(t, float64(tt.retries), testutil.ToFloat64(env.src.metrics.APIRequests.WithLabelValues(opClusters, string(tt.kind))),
				"a sibling request cut short counts as canceled, not as this failure")
		})
	}
}

func TestThrottlingIsRetried(t *testing.T) {
	a := newARMServer(t)
	a.FailARO("", http.StatusTooManyRequests, "TooManyRequests", "Rate limit exceeded.", 1)
	env := newTestEnv(t, explicit(subA), a.clientOptions(), tokenSecrets{}, nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Len(t, cs, 4)
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.APIRequests.WithLabelValues(opClusters, "throttled")))
	assert.Equal(t, 2.0, testutil.ToFloat64(env.src.metrics.APIRequests.WithLabelValues(opClusters, "success")), "the retry and page 2")
	assert.Zero(t, testutil.CollectAndCount(env.src.metrics.Errors), "a throttled request retried is no failed listing")
}

func TestUnknownSubscriptionFailsTheListing(t *testing.T) {
	a := newARMServer(t)
	const unknown = "0b1f6471-1bf0-4dda-aec3-0000000000ff"
	env := newTestEnv(t, explicit(subA, unknown), a.clientOptions(), tokenSecrets{}, nil)
	_, err := env.src.Clusters(context.Background())
	require.EqualError(t, err, "subscription "+unknown+": list clusters: HTTP 404 SubscriptionNotFound: The subscription '"+unknown+"' could not be found.")
	requireFailure(t, env, err, upstream.KindNotFound, opClusters)
}

func TestSubscriptionListErrors(t *testing.T) {
	t.Run("none visible", func(t *testing.T) {
		a := newARMServer(t)
		a.SetSubscriptions([]string{subB}, map[string]string{subB: "Deleted"})
		env := newTestEnv(t, Config{}, a.clientOptions(), tokenSecrets{}, nil)
		cs, err := env.src.Clusters(context.Background())
		require.EqualError(t, err, "list subscriptions: no subscription is visible to the identity (Deleted ones are not listed)")
		assert.Nil(t, cs)
		assert.Zero(t, a.AROLists())
		requireFailure(t, env, err, upstream.KindAuth, opSubscriptions)
	})
	t.Run("malformed", func(t *testing.T) {
		a := newARMServer(t)
		a.SetSubscriptionsBody(`{"value":[{"id":"/subscriptions/x","subscriptionId":"x","state":"Enabled"}]}`)
		env := newTestEnv(t, Config{}, a.clientOptions(), tokenSecrets{}, nil)
		_, err := env.src.Clusters(context.Background())
		require.EqualError(t, err, "list subscriptions: malformed response: a subscription without a valid subscriptionId")
		requireFailure(t, env, err, upstream.KindInvalidResponse, opSubscriptions)
	})
}

func TestAuthenticationFailure(t *testing.T) {
	for _, tt := range []struct {
		name, op string
		cfg      Config
		want     string
	}{
		{"configured subscription", opClusters, explicit(subA), "subscription " + subA + ": list clusters: AADSTS700016: application not found in the directory"},
		{"all subscriptions", opSubscriptions, Config{}, "list subscriptions: AADSTS700016: application not found in the directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := newARMServer(t)
			cred := &azfake.TokenCredential{}
			cred.SetError(errors.New("AADSTS700016: application not found in the directory\ntrace id: 1234"))
			env := newTestEnv(t, tt.cfg, a.clientOptions(), tokenSecrets{}, cred)
			cs, err := env.src.Clusters(context.Background())
			require.EqualError(t, err, tt.want)
			assert.Nil(t, cs)
			assert.Empty(t, a.Seen(), "nothing is sent without a token")
			requireFailure(t, env, err, upstream.KindAuth, tt.op)
		})
	}
}

func TestMalformedResponses(t *testing.T) {
	for _, tt := range []struct {
		name, body, want string
		seen             int
	}{
		{"truncated page", `{"value": [{"id": "/subscriptions/`,
			"subscription " + subC + ": list clusters: unmarshalling type *armredhatopenshift.OpenShiftClusterList", 1},
		{"wrong shape", `{"value": {"id": 1}}`, "subscription " + subC + ": list clusters: unmarshalling type", 1},
		{"not an OpenShift cluster", `{"value": [{"id": "/subscriptions/` + subC + `/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm", "properties": {}}]}`,
			"subscription " + subC + ": list clusters: malformed response: cluster id \"/subscriptions/" + subC + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm\" is not an OpenShift cluster", 1},
		{"a nextLink that loops", `{"value":[],"nextLink":"{{URL}}/subscriptions/` + subC + `/providers/Microsoft.RedHatOpenShift/openShiftClusters?api-version=2023-11-22&%24skipToken=same"}`,
			"subscription " + subC + ": list clusters: malformed response: nextLink repeats", 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := newARMServer(t)
			a.SetAROList(subC, tt.body)
			env := newTestEnv(t, explicit(subC), a.clientOptions(), tokenSecrets{}, nil)
			cs, err := env.src.Clusters(context.Background())
			require.ErrorContains(t, err, tt.want)
			assert.Nil(t, cs)
			assert.Len(t, a.Seen(), tt.seen)
			requireFailure(t, env, err, upstream.KindInvalidResponse, opClusters)
		})
	}
}

func TestCancelledListingReturnsNothing(t *testing.T) {
	a := newARMServer(t)
	env := newTestEnv(t, explicit(subA), a.clientOptions(), tokenSecrets{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cs, err := env.src.Clusters(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, cs)
	requireFailure(t, env, err, upstream.KindCanceled, opClusters)
}

// TestTokenBindingErrors: the token bindings are needed by every cluster;
// a failure to list them fails the listing, classified by the Kubernetes
// API's answer.
func TestTokenBindingErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "secrets"}
	tests := []struct {
		name string
		err  error
		kind upstream.Kind
		want string
	}{
		{"forbidden", fmt.Errorf("token bindings: list secrets in argocd: %w", apierrors.NewForbidden(gr, "", errors.New("RBAC: access denied"))),
			upstream.KindAuth, `token bindings: token bindings: list secrets in argocd: secrets is forbidden: RBAC: access denied`},
		{"unreachable", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")},
			upstream.KindNetwork, "token bindings: dial tcp: connection refused"},
		{"server error", apierrors.NewInternalError(errors.New("etcdserver: leader changed")),
			upstream.KindServer, "token bindings: Internal error occurred: etcdserver: leader changed"},
		{"cancelled", fmt.Errorf("token bindings: %w", context.Canceled), upstream.KindCanceled, "token bindings: token bindings: context canceled"},
		{"no client", errors.New("token bindings: no configuration has been provided"), upstream.KindOther,
			"token bindings: token bindings: no configuration has been provided"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newARMServer(t)
			env := newTestEnv(t, explicit(subA), a.clientOptions(), unreachableAPI{tt.err}, nil)
			cs, err := env.src.Clusters(context.Background())
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), tt.want), err.Error())
			assert.Nil(t, cs)
			assert.Empty(t, a.Seen(), "ARM is not called")
			requireFailure(t, env, err, tt.kind, opTokenBindings)
		})
	}
}
