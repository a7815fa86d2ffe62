package rancher

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// The operations of a listing: the operation label of api_requests_total
// (the four API calls) and of errors_total (any of them).
const (
	opListing  = "listing"       // the listing as a whole: cancelled before it began
	opToken    = "token.read"    // reading the token file or variable
	opCAFile   = "caFile.read"   // reading caFile
	opAPIRoot  = "apiRoot.get"   // GET /v3, for the X-Api-Schemas link
	opSchemas  = "schemas.get"   // GET /v3/schemas
	opCACerts  = "cacerts.get"   // GET /v3/settings/cacerts
	opClusters = "clusters.list" // GET /v3/clusters, one request a page
	// opCloudCredentials is GET /v3/cloudcredentials, one request a page,
	// for the subscriptions of hosted AKS clusters. Its failures do not fail
	// the listing, unless the listing's context ended meanwhile.
	opCloudCredentials = "cloudcredentials.list"
)

func operations() []string {
	return []string{opListing, opToken, opCAFile, opAPIRoot, opSchemas, opCACerts, opClusters, opCloudCredentials}
}

// metrics are the shared metrics of upstream providers
// (argocd_cluster_discovery_rancher_*, see upstream.Metrics) and Rancher's
// own. The caller adds a constant source label through the Registerer, so
// two sources on two wrapped registerers do not collide.
type metrics struct {
	*upstream.Metrics
	// pages counts the pages of /v3/clusters fetched.
	pages prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	pages := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: upstream.Namespace(sources.ProviderRancher), Name: "pages_fetched_total",
		Help: "Pages of /v3/clusters fetched.",
	})
	m, err := upstream.NewMetrics(sources.ProviderRancher, reg, pages)
	if err != nil {
		return nil, err
	}
	// Every failure has a series from the start, so that the first one
	// shows in increase().
	for _, k := range upstream.Kinds() {
		for _, op := range operations() {
			m.Errors.WithLabelValues(string(k), op)
		}
	}
	return &metrics{Metrics: m, pages: pages}, nil
}

// notReadyCounts counts the listed clusters that cannot be rendered by a
// fixed reason (the label of clusters_not_ready), where a cluster's
// NotReadyReason is free text that may quote a bad value. The fallback is
// the CA of the cluster's route (Rancher's cacerts setting).
func notReadyCounts(cs []sources.Cluster) map[string]int {
	return upstream.CountNotReady(cs, []upstream.ReasonPrefix{
		{Prefix: "label ", Reason: "invalid_ace_label"},
		{Prefix: "annotation ", Reason: "invalid_scope"},
		{Prefix: "authorized cluster endpoint", Reason: "ace_unavailable"},
	}, "ca_unavailable")
}

// tokenMetrics are the per-cluster tokens' (argocd_cluster_discovery_rancher_tokens_*).
type tokenMetrics struct {
	// live is the number of tokens adopted or minted and not revoked.
	live prometheus.Gauge
	// mints counts tokens created, by reason: new (a cluster without a
	// token this term) or renewal (a third of the TTL left).
	mints *prometheus.CounterVec
	// revocations counts tokens deleted, by reason: replaced, orphan,
	// released (the cluster left or its Secret was deleted), unusable (a
	// malformed answer to a create), uninstall.
	revocations *prometheus.CounterVec
	// failures counts failed token requests, by operation.
	failures *prometheus.CounterVec
}

// newTokenMetrics builds the metrics, registered nowhere.
func newTokenMetrics() *tokenMetrics {
	m, _ := registerTokenMetrics(nil) // nothing to register: cannot fail
	return m
}

// registerTokenMetrics builds the metrics and registers them with reg
// (nil: not registered).
func registerTokenMetrics(reg prometheus.Registerer) (*tokenMetrics, error) {
	ns := upstream.Namespace(sources.ProviderRancher)
	m := &tokenMetrics{
		live: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "tokens_live",
			Help: "Per-cluster Rancher tokens adopted from our Secrets or minted, and not revoked."}),
		mints: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "tokens_minted_total",
			Help: "Per-cluster Rancher tokens created, by reason (new, renewal)."}, []string{"reason"}),
		revocations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "tokens_revoked_total",
			Help: "Per-cluster Rancher tokens revoked, by reason (replaced, orphan, released, unusable, uninstall)."}, []string{"reason"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "token_request_failures_total",
			Help: "Failed requests to /v3/tokens, by operation."}, []string{"operation"}),
	}
	for _, r := range []string{"new", "renewal"} {
		m.mints.WithLabelValues(r)
	}
	for _, r := range []string{"replaced", "orphan", "released", "unusable", "uninstall"} {
		m.revocations.WithLabelValues(r)
	}
	for _, op := range []string{opTokensCreate, opTokensList, opTokensDelete} {
		m.failures.WithLabelValues(op)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.live, m.mints, m.revocations, m.failures} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
