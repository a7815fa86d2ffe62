package aro

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
)

// TestMetricNames checks that the source exports the metrics every
// upstream provider shares (sources/upstream), with their label names;
// the caller adds the source label.
func TestMetricNames(t *testing.T) {
	a := newARMServer(t)
	env := newTestEnv(t, explicit(subA), a.clientOptions(), tokenSecrets{}, nil)
	_, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	mfs, err := env.reg.Gather()
	require.NoError(t, err)
	got := map[string][]string{}
	for _, mf := range mfs {
		labels := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		got[mf.GetName()] = sortedKeys(labels)
	}
	const ns = "argocd_cluster_discovery_aro_"
	assert.Equal(t, map[string][]string{
		ns + "api_requests_total":       {"operation", "outcome"},
		ns + "clusters":                 {"phase"},
		ns + "clusters_not_ready":       {"reason"},
		ns + "listing_duration_seconds": nil,
		ns + "upstream_clusters":        {"state"},
	}, got, "errors_total appears with its first error, clusters_skipped with its first skip")
}

// TestListingGauges checks the values of one listing: states before the
// filters, phases after them, skipped and not-ready clusters by reason
// kind, never by the reason's text.
func TestListingGauges(t *testing.T) {
	a := newARMServer(t)
	creating := cluster(subC, "rg", "creating")
	creating.Provisioning, creating.NoURL = "Creating", true
	updating := cluster(subC, "rg", "updating")
	updating.Provisioning = "Updating"
	custom := cluster(subC, "rg", "custom")
	custom.Domain = "ocp.example.com"
	private := cluster(subC, "rg", "private")
	private.Private = true
	unbound := cluster(subC, "rg", "unbound")
	all := []fakeazure.OpenShiftCluster{cluster(subC, "rg", "ready"), creating, updating, custom, private, unbound, cluster(subC, "rg-other", "other")}
	a.SetOpenShiftClusters(all...)
	bindings := boundAll(all[:5]...)
	cfg := Config{Subscriptions: []string{subC}, ResourceGroups: []string{"rg"}, PrivateEndpoints: PrivateEndpoints{Policy: PrivateExclude}}
	env := newTestEnv(t, cfg, a.clientOptions(), bindings, nil)
	_, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	m := env.src.metrics
	gauge := func(g interface {
		WithLabelValues(...string) prometheus.Gauge
	}, label string) float64 {
		return testutil.ToFloat64(g.WithLabelValues(label))
	}
	assert.Equal(t, 5.0, gauge(m.Upstream, "Succeeded"), "ready, custom, private, unbound and other, before the filters")
	assert.Equal(t, 1.0, gauge(m.Upstream, "Creating"))
	assert.Equal(t, 1.0, gauge(m.Upstream, "Updating"))
	assert.Equal(t, 1.0, gauge(m.Skipped, string(skipPrivate)))
	assert.Equal(t, 1.0, gauge(m.Skipped, string(skipResourceGroup)))
	assert.Equal(t, 3.0, gauge(m.Clusters, "ready"), "ready, custom and unbound")
	assert.Equal(t, 1.0, gauge(m.Clusters, "pending"))
	assert.Equal(t, 1.0, gauge(m.Clusters, "degraded"))
	assert.Equal(t, 1.0, gauge(m.NotReady, notReadyServer))
	assert.Equal(t, 1.0, gauge(m.NotReady, notReadyCA))
	assert.Equal(t, 1.0, gauge(m.NotReady, notReadyToken))
	assert.Equal(t, 0.0, gauge(m.NotReady, notReadyConflict))
	assert.Equal(t, len(notReadyKinds), testutil.CollectAndCount(m.NotReady), "one series per reason kind, never the cluster's reason text")
}
