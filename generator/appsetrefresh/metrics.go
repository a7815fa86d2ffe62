package appsetrefresh

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	patches *prometheus.CounterVec
	passes  *prometheus.CounterVec
	leader  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "argocd_cluster_discovery", "appset_refresh"
	m := &metrics{
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "patches_total",
			Help: "ApplicationSet refresh requests by outcome: patched, repatched (the annotation was still set), gone, failed, dry_run."},
			[]string{"outcome"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "passes_total",
			Help: "Refresh passes (list ApplicationSets, patch those using the plugin) by result."}, []string{"result"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "leader",
			Help: "1 while this replica holds the refresh trigger's lease."}),
	}
	for _, o := range []string{OutcomePatched, OutcomeRepatched, OutcomeGone, OutcomeFailed, OutcomeDryRun} {
		m.patches.WithLabelValues(o)
	}
	for _, r := range []string{"success", "error"} {
		m.passes.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.patches, m.passes, m.leader} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
