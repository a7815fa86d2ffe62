package rancher

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

func TestMetricsOfTwoSources(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFake(t, false)
	f.ServeFixturePages(true)
	for _, name := range []string{"a", "b"} {
		newTestSource(t, name, config(t, f), testOptions{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"source": name}, reg)})
	}
	s := newTestSource(t, "c", config(t, f), testOptions{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"source": "c"}, reg)})
	_, err := s.Clusters(t.Context())
	require.NoError(t, err)
	n, err := testutil.GatherAndCount(reg, "argocd_cluster_discovery_rancher_pages_fetched_total")
	require.NoError(t, err)
	assert.Equal(t, 3, n, "one series per source")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP argocd_cluster_discovery_rancher_upstream_clusters Clusters the upstream returned in the last complete listing, before the source's filters, by upstream state.
# TYPE argocd_cluster_discovery_rancher_upstream_clusters gauge
argocd_cluster_discovery_rancher_upstream_clusters{source="c",state="active"} 3
argocd_cluster_discovery_rancher_upstream_clusters{source="c",state="unavailable"} 1
# HELP argocd_cluster_discovery_rancher_clusters Clusters of the last complete listing, after the source's filters, by phase (pending, ready, degraded, leaving).
# TYPE argocd_cluster_discovery_rancher_clusters gauge
argocd_cluster_discovery_rancher_clusters{phase="degraded",source="a"} 0
argocd_cluster_discovery_rancher_clusters{phase="degraded",source="b"} 0
argocd_cluster_discovery_rancher_clusters{phase="degraded",source="c"} 1
argocd_cluster_discovery_rancher_clusters{phase="leaving",source="a"} 0
argocd_cluster_discovery_rancher_clusters{phase="leaving",source="b"} 0
argocd_cluster_discovery_rancher_clusters{phase="leaving",source="c"} 0
argocd_cluster_discovery_rancher_clusters{phase="pending",source="a"} 0
argocd_cluster_discovery_rancher_clusters{phase="pending",source="b"} 0
argocd_cluster_discovery_rancher_clusters{phase="pending",source="c"} 0
argocd_cluster_discovery_rancher_clusters{phase="ready",source="a"} 0
argocd_cluster_discovery_rancher_clusters{phase="ready",source="b"} 0
argocd_cluster_discovery_rancher_clusters{phase="ready",source="c"} 2
`), "argocd_cluster_discovery_rancher_upstream_clusters", "argocd_cluster_discovery_rancher_clusters"))
	count, err := testutil.GatherAndCount(reg, "argocd_cluster_discovery_rancher_errors_total")
	require.NoError(t, err)
	assert.Equal(t, 3*len(upstream.Kinds())*len(operations()), count, "every kind of every operation exists from the start")

	cfg := config(t, f)
	cfg.Default()
	_, err = newSource(cfg, sources.SourceOptions{Name: "c", Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"source": "c"}, reg)}, nil)
	require.ErrorContains(t, err, "register metrics")
}

// TestSharedMetricNames checks that the source exports the metrics every
// upstream provider shares (upstream.Metrics), with their names, labels
// and label values, and only pages_fetched_total of its own.
func TestSharedMetricNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFake(t, false)
	f.ServeFixturePages(true) // four clusters, one of them local
	f.SetCACerts("not a pem")
	s := newTestSource(t, "rancher-a", config(t, f), testOptions{Registerer: reg})
	_, err := s.Clusters(t.Context())
	require.NoError(t, err)
	f.InterceptPages(func(w http.ResponseWriter, _ *http.Request, page int) bool {
		if page != 2 {
			return false
		}
		http.Error(w, `{"type":"error","status":"503"}`, http.StatusServiceUnavailable)
		return true
	})
	_, err = s.Clusters(t.Context())
	require.Error(t, err)

	mfs, err := reg.Gather()
	require.NoError(t, err)
	labels := map[string]string{}
	var listings uint64
	var notReady []float64
	for _, mf := range mfs {
		switch strings.TrimPrefix(mf.GetName(), "argocd_cluster_discovery_rancher_") {
		case "listing_duration_seconds":
			listings = mf.GetMetric()[0].GetHistogram().GetSampleCount()
		case "clusters_not_ready":
			for _, m := range mf.GetMetric() {
				notReady = append(notReady, m.GetGauge().GetValue())
			}
		}
		var names []string
		for _, l := range mf.GetMetric()[0].GetLabel() {
			names = append(names, l.GetName())
		}
		sort.Strings(names)
		labels[strings.TrimPrefix(mf.GetName(), "argocd_cluster_discovery_rancher_")] = strings.Join(names, ",")
	}
	assert.Equal(t, map[string]string{
		"listing_duration_seconds": "",
		"api_requests_total":       "operation,outcome",
		"errors_total":             "kind,operation",
		"clusters":                 "phase",
		"upstream_clusters":        "state",
		"clusters_skipped":         "reason",
		"clusters_not_ready":       "reason",
		// the per-cluster tokens' (tokens.go)
		"tokens_live":                  "",
		"tokens_minted_total":          "reason",
		"tokens_revoked_total":         "reason",
		"token_request_failures_total": "operation",
		"pages_fetched_total":          "",
		// the subscriber's (events.go)
		"events_connected":      "",
		"events_connects_total": "",
		"events_disabled":       "",
		"events_failures_total": "kind",
		"events_received_total": "name",
	}, labels)

	m := s.metrics
	// The second listing reuses the client: no /v3 and schemas.
	for op, want := range map[string]float64{opAPIRoot: 1, opSchemas: 1, opCACerts: 2, opClusters: 3} {
		assert.Equal(t, want, testutil.ToFloat64(m.APIRequests.WithLabelValues(op, upstream.Outcome)), op)
	}
	assert.Equal(t, 1.0, testutil.ToFloat64(m.APIRequests.WithLabelValues(opClusters, string(upstream.KindServer))))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Errors.WithLabelValues(string(upstream.KindServer), opClusters)))
	assert.Equal(t, uint64(2), listings, "one observation per listing, failed or not")
	// The gauges are the last complete listing's.
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Skipped.WithLabelValues(skipLocal)))
	assert.Equal(t, 3.0, testutil.ToFloat64(m.Upstream.WithLabelValues("active")), "local included: before the filters")
	assert.Equal(t, 2.0, testutil.ToFloat64(m.Clusters.WithLabelValues("ready")))
	assert.Equal(t, []float64{3}, notReady, "the three proxied clusters share one reason: the cacerts setting")
}
