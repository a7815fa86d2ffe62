package clustersecret

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	writes       *prometheus.CounterVec
	passes       *prometheus.CounterVec
	passDuration prometheus.Histogram
	lastSuccess  prometheus.Gauge
	clashes      prometheus.Gauge
	blocked      prometheus.Gauge
	pending      prometheus.Gauge
	leader       prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "argocd_cluster_discovery", "secrets"
	m := &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "writes_total",
			Help: "Cluster Secret writes by outcome: created, updated, deleted, skipped_foreign."}, []string{"outcome"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "passes_total",
			Help: "Reconcile passes by result."}, []string{"result"}),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "pass_duration_seconds",
			Help: "Duration of a reconcile pass.", Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 10)}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "last_success_timestamp_seconds",
			Help: "Unix time of the last successful reconcile pass."}),
		clashes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "foreign_clashes",
			Help: "Clusters whose Secret name, server or Argo CD cluster name is taken by a Secret we do not own, or by one of ours for another cluster (skipped)."}),
		blocked: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "blocked_deletions",
			Help: "Deletions the breaker stopped in the last pass."}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "pending_deletions",
			Help: "Secrets counting down to deletion."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "leader",
			Help: "1 while this replica holds the lease and writes Secrets."}),
	}
	for _, o := range []string{"created", "updated", "deleted", "skipped_foreign"} {
		m.writes.WithLabelValues(o)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.writes, m.passes, m.passDuration, m.lastSuccess, m.clashes, m.blocked, m.pending, m.leader} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
