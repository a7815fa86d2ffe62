package aks

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// metrics are the metrics every upstream provider exports
// (upstream.Metrics, argocd_cluster_discovery_aks_*) and the CA cache's.
// The caller's Registerer adds the source label.
type metrics struct {
	*upstream.Metrics
	caCache *prometheus.CounterVec
}

// The results of a CA cache lookup, the result label of
// ca_cache_lookups_total.
const (
	caHit      = "hit"
	caMiss     = "miss"
	caNegative = "negative"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	caCache := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: upstream.Namespace(sources.ProviderAKS), Name: "ca_cache_lookups_total",
		Help: "CA cache lookups: hit (read less than caTTL ago), miss (read now with listClusterUserCredential), negative (a read failed less than caErrorTTL ago: no call).",
	}, []string{"result"})
	for _, r := range []string{caHit, caMiss, caNegative} {
		caCache.WithLabelValues(r)
	}
	m, err := upstream.NewMetrics(sources.ProviderAKS, reg, caCache)
	if err != nil {
		return nil, err
	}
	return &metrics{Metrics: m, caCache: caCache}, nil
}
