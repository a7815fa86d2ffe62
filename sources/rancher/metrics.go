package rancher

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// The caller adds a constant source label through the Registerer, so no
// metric here has one and two sources on two wrapped registerers do not
// collide.
const namespace = "argocd_cluster_discovery_rancher"

// Error kinds, the kind label of errors_total.
const (
	kindToken      = "token"      // the token could not be read
	kindCA         = "ca"         // caFile could not be read or is not PEM
	kindAuth       = "auth"       // Rancher answered 401 or 403
	kindHTTP       = "http"       // any other non-200 answer
	kindTimeout    = "timeout"    // request timeout or listing deadline
	kindCanceled   = "canceled"   // the listing's context was cancelled
	kindTLS        = "tls"        // certificate or handshake failure
	kindNetwork    = "network"    // connection refused, reset, DNS, ...
	kindDecode     = "decode"     // malformed JSON or an unexpected shape
	kindPagination = "pagination" // a page repeats or clusters repeat
	kindSchema     = "schema"     // /v3 or its schemas are not usable
	kindOrigin     = "origin"     // a request to another origin was refused
)

func errorKinds() []string {
	return []string{kindToken, kindCA, kindAuth, kindHTTP, kindTimeout, kindCanceled, kindTLS, kindNetwork,
		kindDecode, kindPagination, kindSchema, kindOrigin}
}

type metrics struct {
	duration prometheus.Histogram
	pages    prometheus.Counter
	clusters *prometheus.GaugeVec // by Rancher state, before the filters
	listed   *prometheus.GaugeVec // by phase, after the filters
	errors   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "listing_duration_seconds",
			Help:    "Duration of one listing of the Rancher server, successful or not.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		pages: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "pages_fetched_total",
			Help: "Pages of /v3/clusters fetched.",
		}),
		clusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "clusters",
			Help: "Clusters Rancher returned in the last complete listing, by Rancher state, before this source's filters.",
		}, []string{"state"}),
		listed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "listed_clusters",
			Help: "Clusters this source listed in the last complete listing, after its filters, by phase (pending, ready, degraded, leaving).",
		}, []string{"phase"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "errors_total",
			Help: "Listings that failed, by error kind.",
		}, []string{"kind"}),
	}
	for _, k := range errorKinds() {
		m.errors.WithLabelValues(k)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.duration, m.pages, m.clusters, m.listed, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// sourcePhases are the phases a source sets (absent is the inventory's).
var sourcePhases = []sources.Phase{sources.PhasePending, sources.PhaseReady, sources.PhaseDegraded, sources.PhaseLeaving}

// setClusters replaces the clusters-by-state and listed-by-phase gauges
// with the last listing's counts. Every phase a source sets has a series,
// zero when no cluster is in it.
func (m *metrics) setClusters(byState map[string]int, byPhase map[sources.Phase]int) {
	m.clusters.Reset()
	for s, n := range byState {
		m.clusters.WithLabelValues(s).Set(float64(n))
	}
	for _, p := range sourcePhases {
		m.listed.WithLabelValues(string(p)).Set(float64(byPhase[p]))
	}
}
