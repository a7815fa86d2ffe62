package aks

import (
	"context"
	"net/http"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/prometheus/client_golang/prometheus"
)

// Metric names are fixed; the caller's Registerer adds the source label.
type metrics struct {
	duration    prometheus.Histogram
	apiRequests *prometheus.CounterVec
	errors      *prometheus.CounterVec
	notReady    *prometheus.GaugeVec
	skipped     *prometheus.GaugeVec
	caCache     *prometheus.CounterVec
}

// Values of the kind label of the errors metric.
const (
	errListSubscriptions = "list_subscriptions"
	errListClusters      = "list_clusters"
	errCAFetch           = "ca_fetch"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns = "argocd_cluster_discovery_aks"
	m := &metrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "listing_duration_seconds",
			Help:    "Duration of one AKS listing (subscriptions, clusters and CA reads), successful or not.",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "api_requests_total",
			Help: "HTTP requests to Azure Resource Manager, retries included, by operation and status code (\"error\" when no response).",
		}, []string{"operation", "code"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "errors_total",
			Help: "Failed calls by kind (list_subscriptions, list_clusters, ca_fetch) and subscription.",
		}, []string{"kind", "subscription"}),
		notReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "clusters_not_ready",
			Help: "Clusters in the last listing that are listed but not ready, by reason (ca_unavailable, invalid_scope, invalid_server).",
		}, []string{"reason"}),
		skipped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "clusters_skipped",
			Help: "Clusters left out of the last listing, by reason (the filter that dropped them).",
		}, []string{"reason"}),
		caCache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "ca_cache_lookups_total",
			Help: "CA cache lookups: hit, miss (read with listClusterUserCredential), stale (the read failed and the expired CA was kept).",
		}, []string{"result"}),
	}
	for _, r := range []string{notReadyCA, notReadyScope, notReadyServer} {
		m.notReady.WithLabelValues(r)
	}
	for _, r := range []string{"hit", "miss", "stale"} {
		m.caCache.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.duration, m.apiRequests, m.errors, m.notReady, m.skipped, m.caCache} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// operations names the SDK operations this source calls, for the
// operation label.
var operations = map[string]string{
	"Client.NewListPager":                              "subscriptions.list",
	"ManagedClustersClient.NewListPager":               "managedClusters.list",
	"ManagedClustersClient.ListClusterUserCredentials": "managedClusters.listClusterUserCredential",
}

func operationName(ctx context.Context) string {
	if s, ok := ctx.Value(runtime.CtxAPINameKey{}).(string); ok {
		if op, known := operations[s]; known {
			return op
		}
	}
	return "other"
}

// countingPolicy counts every HTTP attempt. It runs per retry, after the
// bearer token policy, so it sees exactly the requests sent.
type countingPolicy struct{ m *metrics }

func (p countingPolicy) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	code := "error"
	if resp != nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	p.m.apiRequests.WithLabelValues(operationName(req.Raw().Context()), code).Inc()
	return resp, err
}
