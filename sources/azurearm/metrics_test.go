package azurearm

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// toyOps are the operations of a provider listing things.
func toyOps() map[string]string { return map[string]string{"ThingsClient.NewListPager": "things.list"} }

func TestRequestOutcome(t *testing.T) {
	status := func(code int) *http.Response { return &http.Response{StatusCode: code} }
	tests := []struct {
		name string
		resp *http.Response
		err  error
		want upstream.Kind
	}{
		{"200", status(http.StatusOK), nil, ""},
		{"204", status(http.StatusNoContent), nil, ""},
		{"429", status(http.StatusTooManyRequests), nil, upstream.KindThrottled},
		{"403", status(http.StatusForbidden), nil, upstream.KindAuth},
		{"404", status(http.StatusNotFound), nil, upstream.KindNotFound},
		{"502", status(http.StatusBadGateway), nil, upstream.KindServer},
		{"an ARM error", nil, &azcore.ResponseError{StatusCode: http.StatusForbidden}, upstream.KindAuth},
		{"deadline", nil, context.DeadlineExceeded, upstream.KindTimeout},
		{"no response, no error", nil, nil, upstream.KindOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, upstream.KindOf(requestError(tt.resp, tt.err)))
		})
	}
}

// send sends one GET of the SDK operation api through a pipeline with the
// counting policy of m and transport tr, with ctx's values.
func send(ctx context.Context, t *testing.T, m *upstream.Metrics, api string, tr transportFunc) error {
	t.Helper()
	pl := runtime.NewPipeline("azurearm", "test", runtime.PipelineOptions{}, &policy.ClientOptions{
		Transport:        tr,
		Retry:            policy.RetryOptions{MaxRetries: -1},
		PerRetryPolicies: []policy.Policy{NewCountingPolicy(m, toyOps())},
	})
	if api != "" {
		ctx = context.WithValue(ctx, runtime.CtxAPINameKey{}, api)
	}
	req, err := runtime.NewRequest(ctx, http.MethodGet, "https://management.azure.com/subscriptions")
	require.NoError(t, err)
	resp, err := pl.Do(req)
	if err == nil {
		require.NoError(t, resp.Body.Close())
	}
	return err
}

func ok(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
}

func TestCountingPolicyNamesOperations(t *testing.T) {
	tests := []struct {
		api, want string
	}{
		{"Client.NewListPager", OpSubscriptions},
		{"ThingsClient.NewListPager", "things.list"},
		{"ThingsClient.Delete", "other"},
		{"", "other"},
	}
	for _, tt := range tests {
		t.Run(tt.want+"/"+tt.api, func(t *testing.T) {
			m, err := upstream.NewMetrics("toy", nil)
			require.NoError(t, err)
			require.NoError(t, send(context.Background(), t, m, tt.api, ok))
			assert.Equal(t, 1.0, testutil.ToFloat64(m.APIRequests.WithLabelValues(tt.want, upstream.Outcome)))
			assert.Equal(t, 1, testutil.CollectAndCount(m.APIRequests))
		})
	}
}

// TestCutShortRequestsCountAsCanceled: a request cut short because the
// listing ended (another subscription failed) counts as canceled, though
// the transport's error carries the other failure as the context's cause.
func TestCutShortRequestsCountAsCanceled(t *testing.T) {
	m, err := upstream.NewMetrics("toy", nil)
	require.NoError(t, err)
	other := &upstream.Error{Kind: upstream.KindAuth, Operation: "things.list", Msg: "HTTP 403 AuthorizationFailed"}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(other)
	err = send(ctx, t, m, "ThingsClient.NewListPager", func(r *http.Request) (*http.Response, error) { return nil, context.Cause(r.Context()) })
	require.Error(t, err)
	assert.True(t, errors.Is(err, other) || errors.Is(err, context.Canceled))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.APIRequests.WithLabelValues("things.list", string(upstream.KindCanceled))))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.APIRequests.WithLabelValues("things.list", string(upstream.KindAuth))))
}

// TestFailedRequestsCountByTheirOwnKind: while the listing goes on, a
// request's transport error is its own kind.
func TestFailedRequestsCountByTheirOwnKind(t *testing.T) {
	m, err := upstream.NewMetrics("toy", nil)
	require.NoError(t, err)
	refused := func(*http.Request) (*http.Response, error) { return nil, errors.New("dial tcp: connection refused") }
	require.Error(t, send(context.Background(), t, m, "ThingsClient.NewListPager", refused))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.APIRequests.WithLabelValues("things.list", string(upstream.KindOther))))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.APIRequests.WithLabelValues("things.list", string(upstream.KindCanceled))))
}

func TestSetListed(t *testing.T) {
	m, err := upstream.NewMetrics("toy", nil)
	require.NoError(t, err)
	out := []sources.Cluster{{Phase: sources.PhaseReady}, {}, {Phase: sources.PhaseDegraded, NotReadyReason: "HTTP 403: the client 'x' …"}}
	SetListed(m, out, map[string]int{"ca_unavailable": 1, "invalid_scope": 0},
		Counts{States: map[string]int{"Succeeded": 3, "Creating": 1}, Skipped: map[string]int{"tags": 1}})
	assert.Equal(t, 2.0, testutil.ToFloat64(m.Clusters.WithLabelValues("ready")), "an empty phase is ready")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Clusters.WithLabelValues("degraded")))
	assert.Equal(t, 3.0, testutil.ToFloat64(m.Upstream.WithLabelValues("Succeeded")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Skipped.WithLabelValues("tags")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.NotReady.WithLabelValues("ca_unavailable")))
	assert.Equal(t, 2, testutil.CollectAndCount(m.NotReady), "by reason kind, each kind a series even at zero, never the reason's text")
}

type transportFunc func(*http.Request) (*http.Response, error)

func (f transportFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }
