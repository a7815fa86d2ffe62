package upstream

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestForStatus(t *testing.T) {
	for code, want := range map[int]Kind{401: KindAuth, 403: KindAuth, 429: KindThrottled, 404: KindNotFound,
		408: KindTimeout, 504: KindTimeout, 500: KindServer, 502: KindServer, 400: KindServer, 409: KindServer} {
		t.Run(fmt.Sprint(code), func(t *testing.T) { assert.Equal(t, want, ForStatus(code)) })
	}
}

func TestClassify(t *testing.T) {
	var syn json.SyntaxError
	tests := []struct {
		name string
		err  error
		want Kind
	}{
		{"nil", nil, ""},
		{"an Error's own kind wins", fmt.Errorf("list: %w", &Error{Kind: KindThrottled, Err: context.DeadlineExceeded}), KindThrottled},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), KindCanceled},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), KindTimeout},
		{"unknown authority", fmt.Errorf("x: %w", x509.UnknownAuthorityError{}), KindTLS},
		{"dns", &net.DNSError{Err: "no such host", Name: "x"}, KindNetwork},
		{"refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, KindNetwork},
		{"malformed json", fmt.Errorf("decode: %w", &syn), KindInvalidResponse},
		{"anything else", errors.New("boom"), KindOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, Classify(tt.err)) })
	}
}

func TestErrorMessageAndUnwrap(t *testing.T) {
	inner := errors.New("inner")
	e := &Error{Kind: KindAuth, Operation: "clusters.list", Msg: "short", Err: inner}
	assert.Equal(t, "short", e.Error())
	assert.ErrorIs(t, e, inner)
	assert.Equal(t, "inner", (&Error{Err: inner}).Error())
	assert.Equal(t, "auth", (&Error{Kind: KindAuth}).Error())
	assert.Equal(t, "clusters.list", OperationOf(fmt.Errorf("wrapped: %w", e)))
	assert.Empty(t, OperationOf(inner))
}

func TestMetricsVocabulary(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics("toy", reg)
	require.NoError(t, err)
	m.Request("things.list", nil)
	m.Request("things.list", &Error{Kind: KindThrottled})
	m.Failed(&Error{Kind: KindAuth, Operation: "things.list"})
	m.Listed([]sources.Cluster{{Phase: sources.PhaseReady}, {}, {Phase: sources.PhaseLeaving}},
		map[string]int{"RUNNING": 3, "DELETED": 1}, map[string]int{"tag": 1})
	m.SetNotReady(map[string]int{"ca_unavailable": 2})

	want := `
# HELP argocd_cluster_discovery_toy_api_requests_total Requests sent to the upstream API, each retry counted, by operation and outcome (success or the kind of failure).
# TYPE argocd_cluster_discovery_toy_api_requests_total counter
argocd_cluster_discovery_toy_api_requests_total{operation="things.list",outcome="success"} 1
argocd_cluster_discovery_toy_api_requests_total{operation="things.list",outcome="throttled"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "argocd_cluster_discovery_toy_api_requests_total"))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Errors.WithLabelValues("auth", "things.list")))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.Clusters.WithLabelValues("ready")), "an empty phase is ready")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Clusters.WithLabelValues("leaving")))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.Clusters.WithLabelValues("pending")))
	assert.Equal(t, 3.0, testutil.ToFloat64(m.Upstream.WithLabelValues("RUNNING")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Skipped.WithLabelValues("tag")))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.NotReady.WithLabelValues("ca_unavailable")))

	m.Listed(nil, map[string]int{"RUNNING": 1}, nil)
	assert.Equal(t, 0, testutil.CollectAndCount(m.Skipped), "a reason that no longer occurs is gone")
	_, err = NewMetrics("toy", reg)
	assert.Error(t, err, "registering the same provider twice on one registry fails")
}

func TestCountNotReady(t *testing.T) {
	cs := []sources.Cluster{
		{Ready: true},
		{NotReadyReason: "no endpoint yet"},
		{NotReadyReason: "no endpoint for now"},
		{NotReadyReason: `tag ns: "Bad Value" is not a namespace name`},
	}
	got := CountNotReady(cs, []ReasonPrefix{{Prefix: "no endpoint", Reason: "no_endpoint"}}, "invalid_scope")
	assert.Equal(t, map[string]int{"no_endpoint": 2, "invalid_scope": 1}, got, "free text never becomes a label value")
}
