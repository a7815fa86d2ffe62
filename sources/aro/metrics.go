package aro

import (
	"context"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// metrics are the metrics every upstream provider exports
// (upstream.Metrics, argocd_cluster_discovery_aro_*). The caller's
// Registerer adds the source label.
type metrics struct {
	*upstream.Metrics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m, err := upstream.NewMetrics(sources.ProviderARO, reg)
	if err != nil {
		return nil, err
	}
	return &metrics{Metrics: m}, nil
}

// listed sets the gauges of a complete listing. Unlike upstream's Listed,
// clusters_not_ready is counted by reason kind (notReadyKinds) rather than
// by the cluster's NotReadyReason, which quotes resource ids and would
// make a label value of them.
func (m *metrics) listed(out []sources.Cluster, notReady, upstreamStates, skipped map[string]int) {
	m.Listed(nil, upstreamStates, skipped)
	for i := range out {
		m.Clusters.WithLabelValues(string(out[i].Phase.OrReady())).Inc()
	}
	for r, n := range notReady {
		m.NotReady.WithLabelValues(r).Set(float64(n))
	}
}

// operations names the SDK operations this source calls, for the
// operation label.
var operations = map[string]string{
	"Client.NewListPager":                  opSubscriptions,
	"OpenShiftClustersClient.NewListPager": opClusters,
}

func operationName(ctx context.Context) string {
	if s, ok := ctx.Value(runtime.CtxAPINameKey{}).(string); ok {
		if op, known := operations[s]; known {
			return op
		}
	}
	return "other"
}

// countingPolicy counts every HTTP attempt in api_requests_total. It runs
// per retry, after the bearer token policy, so it sees exactly the
// requests sent.
type countingPolicy struct{ m *upstream.Metrics }

func (p countingPolicy) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	counted := err
	if ctxErr := req.Raw().Context().Err(); err != nil && ctxErr != nil {
		// a request cut short because the listing ended: the transport's
		// error carries the context's cause, which may be another
		// subscription's failure, not this request's
		counted = ctxErr
	}
	p.m.Request(operationName(req.Raw().Context()), requestError(resp, counted))
	return resp, err
}

// requestError is nil for a request that succeeded, else an error of its
// kind: by the transport's error, or by the status.
func requestError(resp *http.Response, err error) error {
	switch {
	case err != nil:
		return &upstream.Error{Kind: classify(err), Err: err}
	case resp == nil:
		return &upstream.Error{Kind: upstream.KindOther}
	case resp.StatusCode >= http.StatusBadRequest:
		return &upstream.Error{Kind: upstream.ForStatus(resp.StatusCode)}
	}
	return nil
}
