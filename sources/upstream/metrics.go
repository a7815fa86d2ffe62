package upstream

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Outcome is the outcome label of a request that succeeded.
const Outcome = "success"

// Metrics are the metrics every upstream provider exports, named
// argocd_cluster_discovery_<provider>_<name>; the Registerer given to the
// provider adds the source label.
//
//	listing_duration_seconds                  histogram: one listing, successful or not
//	api_requests_total{operation,outcome}     requests sent (each retry counts); outcome is success or a Kind
//	errors_total{kind,operation}              failed listings, by Kind and the operation that failed
//	clusters{phase}                           clusters of the last complete listing, after the source's filters, by phase
//	upstream_clusters{state}                  clusters the upstream returned in the last complete listing, before the filters, by upstream state
//	clusters_skipped{reason}                  clusters the filters left out of the last complete listing, by filter
//	clusters_not_ready{reason}                listed clusters that cannot be rendered, by a reason of the provider's fixed set
type Metrics struct {
	Duration    prometheus.Histogram
	APIRequests *prometheus.CounterVec
	Errors      *prometheus.CounterVec
	Clusters    *prometheus.GaugeVec
	Upstream    *prometheus.GaugeVec
	Skipped     *prometheus.GaugeVec
	NotReady    *prometheus.GaugeVec
}

// Namespace returns the metric prefix of a provider.
func Namespace(p sources.Provider) string { return "argocd_cluster_discovery_" + string(p) }

// NewMetrics makes the metrics of provider p and registers them with reg
// (nil: not registered). Extra collectors of the provider's own are
// registered with them.
func NewMetrics(p sources.Provider, reg prometheus.Registerer, extra ...prometheus.Collector) (*Metrics, error) {
	ns := Namespace(p)
	m := &Metrics{
		Duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "listing_duration_seconds",
			Help:    "Duration of one listing of the source, successful or not.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "api_requests_total",
			Help: "Requests sent to the upstream API, each retry counted, by operation and outcome (success or the kind of failure).",
		}, []string{"operation", "outcome"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "errors_total",
			Help: "Listings that failed, and accounts a complete listing left out (an EKS account whose role is refused), by kind of failure (auth, throttled, not_found, server, timeout, canceled, network, tls, invalid_response, config, other) and the operation that failed.",
		}, []string{"kind", "operation"}),
		Clusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "clusters",
			Help: "Clusters of the last complete listing, after the source's filters, by phase (pending, ready, degraded, leaving).",
		}, []string{"phase"}),
		Upstream: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "upstream_clusters",
			Help: "Clusters the upstream returned in the last complete listing, before the source's filters, by upstream state.",
		}, []string{"state"}),
		Skipped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "clusters_skipped",
			Help: "Clusters the source's filters left out of the last complete listing, by filter.",
		}, []string{"reason"}),
		NotReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "clusters_not_ready",
			Help: "Clusters of the last complete listing that cannot be rendered (no server, no CA, invalid scoping), by reason.",
		}, []string{"reason"}),
	}
	for _, ph := range []sources.Phase{sources.PhasePending, sources.PhaseReady, sources.PhaseDegraded, sources.PhaseLeaving} {
		m.Clusters.WithLabelValues(string(ph))
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range append([]prometheus.Collector{m.Duration, m.APIRequests, m.Errors, m.Clusters, m.Upstream, m.Skipped, m.NotReady}, extra...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Request counts one request of operation; err nil is a success.
func (m *Metrics) Request(operation string, err error) {
	outcome := Outcome
	if err != nil {
		outcome = string(Classify(err))
	}
	m.APIRequests.WithLabelValues(operation, outcome).Inc()
}

// Failed counts a failed listing.
func (m *Metrics) Failed(err error) {
	m.Errors.WithLabelValues(string(KindOf(err)), OperationOf(err)).Inc()
}

// Listed records the gauges of a complete listing: the clusters listed
// (after filters), the upstream states seen before the filters and the
// counts the filters skipped. Every gauge is reset first, so a state or
// reason that no longer occurs reads zero rather than its old count.
// clusters_not_ready is the provider's to set (SetNotReady): a
// cluster's NotReadyReason is free text (an upstream message), not a
// label value.
func (m *Metrics) Listed(listed []sources.Cluster, upstreamStates, skipped map[string]int) {
	m.Clusters.Reset()
	m.Upstream.Reset()
	m.Skipped.Reset()
	m.NotReady.Reset()
	for _, ph := range []sources.Phase{sources.PhasePending, sources.PhaseReady, sources.PhaseDegraded, sources.PhaseLeaving} {
		m.Clusters.WithLabelValues(string(ph))
	}
	for i := range listed {
		m.Clusters.WithLabelValues(string(listed[i].Phase.OrReady())).Inc()
	}
	for s, n := range upstreamStates {
		m.Upstream.WithLabelValues(s).Set(float64(n))
	}
	for r, n := range skipped {
		m.Skipped.WithLabelValues(r).Set(float64(n))
	}
}

// Observe records the duration of a listing that started at start.
func (m *Metrics) Observe(start time.Time) { m.Duration.Observe(time.Since(start).Seconds()) }

// SetNotReady sets clusters_not_ready from counts by reason, each reason
// one of a fixed set the provider defines (never free text).
func (m *Metrics) SetNotReady(byReason map[string]int) {
	m.NotReady.Reset()
	for r, n := range byReason {
		m.NotReady.WithLabelValues(r).Set(float64(n))
	}
}

// ReasonPrefix names the reason of clusters_not_ready for the clusters
// whose NotReadyReason starts with Prefix.
type ReasonPrefix struct{ Prefix, Reason string }

// CountNotReady counts the listed clusters that cannot be rendered, by the
// Reason of the first prefix their NotReadyReason starts with, else by
// fallback: a fixed set of label values for SetNotReady, where the
// reasons themselves are free text.
func CountNotReady(cs []sources.Cluster, prefixes []ReasonPrefix, fallback string) map[string]int {
	out := map[string]int{}
	for i := range cs {
		if cs[i].Ready {
			continue
		}
		reason := fallback
		for _, p := range prefixes {
			if strings.HasPrefix(cs[i].NotReadyReason, p.Prefix) {
				reason = p.Reason
				break
			}
		}
		out[reason]++
	}
	return out
}
