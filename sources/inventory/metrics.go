package inventory

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

const namespace = "argocd_cluster_discovery"

type metrics struct {
	duration    *prometheus.HistogramVec
	errors      *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
	clusters    *prometheus.GaugeVec
	failures    *prometheus.GaugeVec
	synced      *prometheus.GaugeVec
	stale       *prometheus.GaugeVec
	served      *prometheus.GaugeVec
	departures  *prometheus.CounterVec
	held        *prometheus.GaugeVec
	blocked     *prometheus.GaugeVec
	waiting     *prometheus.GaugeVec
	pinned      *prometheus.GaugeVec
	conflicts   prometheus.Gauge
	duplicates  prometheus.Gauge
	version     prometheus.Gauge
	// ledgerErrors counts saves of the ledger that failed.
	ledgerErrors prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "source_listing_duration_seconds",
			Help:    "Duration of one listing of a source, successful or not.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"source"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "source_listing_errors_total",
			Help: "Listings of a source that failed (the last complete listing was kept).",
		}, []string{"source"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "source_last_success_timestamp_seconds",
			Help: "Unix time at which the last successful listing of a source started.",
		}, []string{"source"}),
		clusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "source_clusters",
			Help: "Clusters in the last complete listing of a source, by readiness.",
		}, []string{"source", "ready"}),
		failures: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "source_consecutive_failures",
			Help: "Listings of a source that failed in a row.",
		}, []string{"source"}),
		synced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "source_synced",
			Help: "1 once a source has completed a listing.",
		}, []string{"source"}),
		stale: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "source_stale",
			Help: "1 while a source's latest listing failed and its previous one is served.",
		}, []string{"source"}),
		served: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "source_served_clusters",
			Help: "Served clusters of a source, by phase (absent and leaving: kept until their departure is confirmed).",
		}, []string{"source", "phase"}),
		departures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "source_departures_total",
			Help: "Clusters of a source whose departure was confirmed (no longer served).",
		}, []string{"source"}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "source_departures_held",
			Help: "Served clusters of a source missing in a mass drop, or held by the departure breaker, whose departure is held.",
		}, []string{"source"}),
		blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "source_departures_blocked",
			Help: "Of source_departures_held, those the departure breaker holds: more departures due at once than departure.maxDeletions allows.",
		}, []string{"source"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "source_departures_waiting",
			Help: "Served clusters of a source whose departure is confirmed but waits for room under departure.maxDeletions in the source's interval.",
		}, []string{"source"}),
		pinned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "source_departures_pinned",
			Help: "Served clusters of a source whose departure was due but an operator's pin on their ClusterProfile keeps them served.",
		}, []string{"source"}),
		conflicts: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "cluster_name_conflicts",
			Help: "Cluster names listed more than once; only the established cluster, if any, is served.",
		}),
		duplicates: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "cluster_duplicates",
			Help: "Clusters listed twice (same server or cloud cluster); only the preferred listing is served.",
		}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "snapshot_version",
			Help: "Version of the current inventory snapshot.",
		}),
		ledgerErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "ledger_save_errors_total",
			Help: "Saves of the inventory's ledger that failed; replicas answer from the last saved records until one succeeds.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.duration, m.errors, m.lastSuccess, m.clusters, m.failures, m.synced, m.stale, m.served, m.departures, m.held, m.blocked, m.waiting, m.pinned, m.conflicts, m.duplicates, m.version, m.ledgerErrors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// initSource makes every per-source series exist from the start, so that
// alerts on them work before the first listing.
func (m *metrics) initSource(name string) {
	m.errors.WithLabelValues(name)
	m.failures.WithLabelValues(name)
	m.synced.WithLabelValues(name)
	m.stale.WithLabelValues(name)
	m.departures.WithLabelValues(name)
	m.held.WithLabelValues(name)
	m.blocked.WithLabelValues(name)
	m.waiting.WithLabelValues(name)
	m.pinned.WithLabelValues(name)
}

// observeListing updates the series of source name after one listing,
// from its status s that already records it. The caller holds inv.mu.
func (m *metrics) observeListing(name string, s *SourceStatus, took time.Duration, err error) {
	m.duration.WithLabelValues(name).Observe(took.Seconds())
	if err != nil {
		m.errors.WithLabelValues(name).Inc()
	} else {
		m.lastSuccess.WithLabelValues(name).Set(float64(s.LastSuccess.Unix()))
		m.clusters.WithLabelValues(name, "true").Set(float64(s.Clusters - s.NotReady))
		m.clusters.WithLabelValues(name, "false").Set(float64(s.NotReady))
		m.synced.WithLabelValues(name).Set(1)
	}
	m.failures.WithLabelValues(name).Set(float64(s.ConsecutiveFailures))
	m.stale.WithLabelValues(name).Set(boolFloat(s.Stale))
}

// observeRestored sets the series of source name that the ledger's
// source record holds, from its status s as restored: a new leader
// whose first listings fail still shows a source synced before it as
// synced (the alert on a source never synced must not fire for it).
func (m *metrics) observeRestored(name string, s *SourceStatus) {
	m.synced.WithLabelValues(name).Set(boolFloat(s.Synced))
	m.stale.WithLabelValues(name).Set(boolFloat(s.Stale))
	m.failures.WithLabelValues(name).Set(float64(s.ConsecutiveFailures))
}

// observeLifecycle updates the lifecycle series of source name after a
// complete listing: its served clusters by phase, the departures it
// confirmed and the departures held, waiting or pinned (life's view).
func (m *metrics) observeLifecycle(name string, byPhase map[sources.Phase]int, departed int, life *lifecycle) {
	for _, p := range sources.Phases() {
		if p != sources.PhasePending {
			m.served.WithLabelValues(name, string(p)).Set(float64(byPhase[p]))
		}
	}
	m.departures.WithLabelValues(name).Add(float64(departed))
	m.held.WithLabelValues(name).Set(float64(life.held))
	m.blocked.WithLabelValues(name).Set(float64(life.blocked))
	m.waiting.WithLabelValues(name).Set(float64(life.waiting))
	m.pinned.WithLabelValues(name).Set(float64(life.pins))
}

// observeSnapshot updates the series of a changed snapshot.
func (m *metrics) observeSnapshot(snap *Snapshot) {
	m.version.Set(float64(snap.Version))
	m.conflicts.Set(float64(len(snap.Conflicts)))
	m.duplicates.Set(float64(len(snap.Duplicates)))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
