package aro

import (
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
