package aks

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricNames checks that the source exports the metrics every
// upstream provider shares (sources/upstream), with their label names,
// and its own CA cache counter; the caller adds the source label.
func TestMetricNames(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha"), managedCluster(subA, "rg", "beta", private(false))}}}))
	env := newTestEnv(t, explicit(subA), f, nil)
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
	const ns = "argocd_cluster_discovery_aks_"
	assert.Equal(t, map[string][]string{
		ns + "api_requests_total":       {"operation", "outcome"},
		ns + "ca_cache_lookups_total":   {"result"},
		ns + "clusters":                 {"phase"},
		ns + "clusters_not_ready":       {"reason"},
		ns + "clusters_skipped":         {"reason"},
		ns + "listing_duration_seconds": nil,
		ns + "upstream_clusters":        {"state"},
	}, got, "errors_total appears with its first error")
}

// TestListingGauges checks the values of one listing: states before the
// filters, phases after them, skipped and not-ready clusters by reason.
func TestListingGauges(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{
		managedCluster(subA, "rg", "alpha"),
		managedCluster(subA, "rg", "stopped", stopped),
		managedCluster(subA, "rg", "private", private(false)),
		managedCluster(subA, "rg-other", "other"),
		managedCluster(subA, "rg", "no-fqdn", func(mc *armcontainerservice.ManagedCluster) {
			mc.Properties.ProvisioningState, mc.Properties.Fqdn = to.Ptr("Creating"), nil
		}),
		managedCluster(subA, "rg", "no-state", func(mc *armcontainerservice.ManagedCluster) { mc.Properties.ProvisioningState = nil }),
	}}}))
	env := newTestEnv(t, Config{Subscriptions: []string{subA}, ResourceGroups: []string{"rg"}}, f, nil)
	_, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	m := env.src.metrics
	gauge := func(g interface {
		WithLabelValues(...string) prometheus.Gauge
	}, label string) float64 {
		return testutil.ToFloat64(g.WithLabelValues(label))
	}
	assert.Equal(t, 4.0, gauge(m.Upstream, "Succeeded"), "alpha, stopped, private and other, before the filters")
	assert.Equal(t, 1.0, gauge(m.Upstream, "Creating"))
	assert.Equal(t, 1.0, gauge(m.Upstream, "unknown"))
	assert.Equal(t, 1.0, gauge(m.Skipped, "private"))
	assert.Equal(t, 1.0, gauge(m.Skipped, "resource_group"))
	assert.Equal(t, 1.0, gauge(m.Clusters, "ready"))
	assert.Equal(t, 2.0, gauge(m.Clusters, "degraded"), "stopped, and no-state")
	assert.Equal(t, 1.0, gauge(m.Clusters, "pending"))
	assert.Equal(t, 1.0, gauge(m.NotReady, notReadyServer))
	assert.Equal(t, 0.0, gauge(m.NotReady, notReadyCA))
	assert.Equal(t, 0.0, gauge(m.NotReady, notReadyAAD))
	assert.Equal(t, 4, testutil.CollectAndCount(m.NotReady), "one series per reason kind, never the cluster's reason text")
	assert.Equal(t, 3.0, testutil.ToFloat64(m.caCache.WithLabelValues(caMiss)), "alpha, stopped and no-state; no-fqdn has no server")
}
