package eks

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func TestEmptyFleet(t *testing.T) {
	f := newFake(t)
	s, reg := f.newSource(t, f.testConfig(), nil)
	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	assert.NotNil(t, got)
	assert.Empty(t, got)
	assert.Equal(t, 1.0, counter(t, reg, "argocd_cluster_discovery_eks_listing_duration_seconds", nil))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP argocd_cluster_discovery_eks_describe_cache_total Listed cluster names answered from the describe cache (hit) or described (miss).
# TYPE argocd_cluster_discovery_eks_describe_cache_total counter
argocd_cluster_discovery_eks_describe_cache_total{result="hit"} 0
argocd_cluster_discovery_eks_describe_cache_total{result="miss"} 0
`), "argocd_cluster_discovery_eks_describe_cache_total"))
}

func TestNewRegistersMetricsOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := Config{Accounts: []Account{{ID: acctA}}, Regions: []string{regionEU}}
	cfg.Default()
	build := func(name string) error {
		_, err := newSource(&cfg, sources.SourceOptions{Name: name, Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"source": name}, reg)},
			hooks{awsConfig: &aws.Config{}})
		return err
	}
	for _, name := range []string{"a", "b"} {
		require.NoError(t, build(name), "two sources, told apart by the caller's source label")
	}
	require.Error(t, build("a"), "the same source twice")
}

// TestSharedMetrics: the source exports the metrics every upstream
// provider does (upstream.Metrics), with their label names and meanings,
// plus its describe cache counter, and none of its former names.
func TestSharedMetrics(t *testing.T) {
	f := newFake(t)
	f.add(acctA, regionEU, fakeCluster{Name: "active"}, fakeCluster{Name: "creating", Status: "CREATING", Creating: true},
		fakeCluster{Name: "private", Private: true})
	f.Hook = func(r fakeReq) *fakeResp {
		if r.Op == "ListClusters" && r.N <= 3 { // every attempt of the first listing
			return &fakeResp{Status: http.StatusInternalServerError, ErrType: "ServerException"}
		}
		return nil
	}
	cfg := f.testConfig()
	cfg.PrivateEndpoints.Policy = PrivateExclude
	s, reg := f.newSource(t, cfg, nil)
	_, err := s.Clusters(context.Background())
	require.Error(t, err)
	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"active", "creating"}, clusterNames(got))

	mfs, err := reg.Gather()
	require.NoError(t, err)
	labels := map[string][]string{}
	for _, mf := range mfs {
		name := strings.TrimPrefix(mf.GetName(), "argocd_cluster_discovery_eks_")
		labels[name] = []string{}
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			labels[name] = append(labels[name], lp.GetName())
		}
		slices.Sort(labels[name])
	}
	assert.Equal(t, map[string][]string{
		"listing_duration_seconds": {},
		"api_requests_total":       {"operation", "outcome"},
		"errors_total":             {"kind", "operation"},
		"clusters":                 {"phase"},
		"upstream_clusters":        {"state"},
		"clusters_skipped":         {"reason"},
		"clusters_not_ready":       {"reason"},
		"describe_cache_total":     {"result"},
	}, labels)

	value := func(name string, labels map[string]string) float64 {
		return counter(t, reg, "argocd_cluster_discovery_eks_"+name, labels)
	}
	assert.Equal(t, 2.0, value("listing_duration_seconds", nil), "both listings, the failed one too")
	assert.Equal(t, 3.0, value("api_requests_total", map[string]string{"operation": "ListClusters", "outcome": "server"}))
	assert.Equal(t, 1.0, value("api_requests_total", map[string]string{"operation": "ListClusters", "outcome": "success"}))
	assert.Equal(t, 3.0, value("api_requests_total", map[string]string{"operation": "DescribeCluster", "outcome": "success"}))
	assert.Equal(t, 1.0, value("api_requests_total", map[string]string{"operation": "AssumeRole", "outcome": "success"}))
	assert.Equal(t, 1.0, value("errors_total", map[string]string{"kind": "server", "operation": "ListClusters"}))
	assert.Equal(t, 2.0, value("upstream_clusters", map[string]string{"state": "ACTIVE"}), "before the filters")
	assert.Equal(t, 1.0, value("upstream_clusters", map[string]string{"state": "CREATING"}))
	assert.Equal(t, 1.0, value("clusters", map[string]string{"phase": "ready"}), "after the filters")
	assert.Equal(t, 1.0, value("clusters", map[string]string{"phase": "pending"}))
	assert.Equal(t, 0.0, value("clusters", map[string]string{"phase": "degraded"}))
	assert.Equal(t, 1.0, value("clusters_skipped", map[string]string{"reason": reasonPrivateEndpoint}))
	assert.Equal(t, 1.0, value("clusters_not_ready", map[string]string{"reason": notReadyEndpoint}), "a fixed reason, not the free text")
}
