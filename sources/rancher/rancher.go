// Package rancher is a source of the clusters of one Rancher server, listed
// through its /v3 API with norman's clientbase. Provider registers it; a
// source is configured by a Config (the rancher section of a source) and
// built by its NewSource. README.md is the users' guide.
//
// Each listing reads the token (and caFile), reads Rancher's CA from
// /v3/settings/cacerts unless caFile is set, and fetches /v3/clusters page
// by page, following pagination.next itself: any failed page fails the
// whole listing (norman's generated ListAll returns the pages it got and
// drops the error, which would turn an outage into clusters that left).
// When a kept cluster is a hosted AKS cluster naming a cloud credential, it
// then reads /v3/cloudcredentials for the clusters' subscriptions, on a
// best-effort basis (cloudcredentials.go). The norman client (the schemas read from /v3) is kept between listings
// and rebuilt when the token or the CA changes, or after a failed listing.
//
// The client is built here rather than with clientbase.NewAPIClient, which
// sends its two requests without a context, replaces the HTTP transport,
// follows X-Api-Schemas to any host with the token, and returns a nil error
// for a CA it cannot parse. Every request this source makes goes through a
// per-listing transport that carries the listing's context, bounds the
// request by requestTimeout, and refuses any URL outside the configured
// server's scheme and host. Links Rancher returns (X-Api-Schemas, schema
// collection links, pagination.next) are rewritten to the configured scheme
// and host, so a Rancher behind a proxy that reports another host or plain
// http never receives the token elsewhere.
//
// A failed listing returns an error holding an *upstream.Error: its kind
// (auth, throttled, not_found, server, timeout, canceled, network, tls,
// invalid_response, config) and the operation that failed (token.read,
// caFile.read, apiRoot.get, schemas.get, cacerts.get, clusters.list,
// cloudcredentials.list when the listing's context ended during it, or
// listing when it was cancelled before it began), the labels of the shared
// upstream metrics. Its message names the token by its reference, never
// its value, and never quotes Rancher's answer.
//
// Names: a cluster is named NamePrefix + its Rancher display name, the
// name people know it by (ids such as c-m-2x7kqz4b are only unique within
// one server, and even "local" repeats). With several Rancher servers, give
// each source its own NamePrefix; the inventory serves neither of two
// clusters listed under one name and reports the conflict.
//
// # Cluster lifecycle
//
// Every cluster Rancher returns is listed, whatever its state (only
// includeLocal, the label selectors and the name regexes leave clusters
// out): a cluster never drops out of a listing because it is upgrading,
// disconnected or failed an operation. Its id is the cluster's ID, stable
// across renames. Its state is kept verbatim in State and, with its
// conditions (status.conditions, flattened to the top-level conditions of
// the /v3 object) and metadata.removed, mapped to a phase by phase:
//
//	Rancher state                 Phase
//	-------------------------------------------------------------------
//	active                        ready, or degraded when the condition
//	                              Connected is False or Ready is False or
//	                              Unknown
//	removing                      leaving (so is any state once
//	                              metadata.removed is set)
//	initializing, pending,        pending when the cluster was never
//	provisioning, waiting,        established, degraded when it was
//	activating, configuring,
//	unavailable
//	updating, upgrading, error,   degraded
//	reconciling, in-progress,
//	failed
//	any other state, and empty    degraded
//
// Established means the condition Waiting is True: rancher/rancher's
// healthsyncer (controllers/managementuser/healthsyncer) sets it after the
// cluster's first successful health check, so it tells a cluster being
// created or imported (pending, not served yet) from an existing one that
// is provisioning, unavailable, ... again (degraded, still served). Should
// Waiting ever stop being True on a served cluster, the inventory raises
// its pending to degraded all the same. Rancher never returns
// an empty state (the summary defaults it to active); an empty or unknown
// one is degraded rather than ready, and never a reason to drop the
// cluster.
//
// The states come from rancher/rancher pkg/schemas/status, which runs
// rancher/wrangler's pkg/summary (summarizers.go, v3.7.1, the version
// Rancher pins) over the cluster's conditions. A condition with reason
// Error gives error, unless one of the following is False. Conditions
// Pending, Provisioned and AgentDeployed, Waiting, Updated, Upgraded,
// Removed, InitialRolesPopulated, and BackingNamespaceCreated,
// DefaultProjectCreated and CreatorMadeOwner give pending, provisioning,
// waiting, updating, upgrading, removing, activating and configuring: the
// last one that is False, else the first one that is Unknown. Failing
// those, Ready False or Unknown gives unavailable. A deletion timestamp
// (metadata.removed in /v3) gives removing, overriding every other state;
// nothing at all gives active. Connected (rancher/rancher
// controllers/management/clusterconnected, every 15 s) is not
// summarized, hence its check on active clusters. The cluster model's
// Ready says only whether the cluster can be rendered (server, CA,
// authorized cluster endpoint, scoping), never its upstream health.
package rancher

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// Provider is the registration of the rancher provider: a cluster manager
// whose sources are configured by a Config.
type Provider struct{}

var _ sources.Registration = Provider{}

// Name is rancher.
func (Provider) Name() sources.Provider { return sources.ProviderRancher }

// Kind is manager: Rancher lists clusters that run elsewhere.
func (Provider) Kind() sources.Kind { return sources.KindManager }

// NewConfig returns an empty section.
func (Provider) NewConfig() sources.ProviderConfig { return &Config{} }

// Source lists the clusters of one Rancher server.
type Source struct {
	cfg     Config
	origin  *url.URL // configured scheme and host
	apiURL  string   // origin + /v3
	timeout time.Duration
	filter  *filter
	mapper  *mapper
	log     *slog.Logger
	metrics *metrics
	base    http.RoundTripper // a test's transport, or nil

	// sem serialises listings; it guards conn, warnedOrigin and subs.
	sem          chan struct{}
	conn         *conn
	warnedOrigin bool
	// subs are the subscriptions of the cloud credentials last read
	// (cloudcredentials.go).
	subs subscriptions

	// issuer mints per-cluster tokens (issuer.go).
	issuer *issuer
	// events is the subscriber to Rancher's cluster events (events.go).
	events *events
}

var (
	_ sources.Source = (*Source)(nil)
	_ sources.Hinter = (*Source)(nil)
)

// NewSource builds the source of a defaulted, valid section: it reads
// caFile once (a bad PEM is a start-up error) and registers the metrics.
// It makes no request.
func (c *Config) NewSource(opts sources.SourceOptions) (sources.Source, error) {
	return newSource(*c, opts, nil)
}

// newSource is NewSource with client, when set, providing the transport to
// Rancher (tests: an httptest server's client). Its TLS settings replace
// caFile's for trusting Rancher; caFile is still the clusters' caData.
func newSource(cfg Config, opts sources.SourceOptions, client *http.Client) (*Source, error) {
	if errs := cfg.Validate(nil); len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	origin, _ := parseURL(cfg.URL) // checked by Validate
	var caPEM []byte
	if cfg.CAFile != "" {
		var err error
		if caPEM, err = readCAFile(cfg.CAFile); err != nil {
			return nil, fmt.Errorf("caFile: %w", err)
		}
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("rancher", origin.String())
	s := &Source{
		cfg: cfg, origin: origin, apiURL: origin.String() + "/v3", timeout: cfg.RequestTimeout.Std(),
		filter: newFilter(&cfg), mapper: newMapper(opts.Name, origin.String(), cfg), log: logger, metrics: m,
		sem: make(chan struct{}, 1),
	}
	em, err := newEventMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	s.events = &events{s: s, timing: defaultEventTiming, m: em}
	if client != nil {
		s.base = client.Transport
		if s.base == nil {
			s.base = http.DefaultTransport
		}
	}
	if origin.Scheme == "http" {
		logger.Warn("rancher url is plain http: the token is sent unencrypted")
	}
	if u, err := parseURL(cfg.SecretURL); cfg.SecretURL != "" && err == nil && u.Scheme == "http" {
		logger.Warn("rancher secretURL is plain http: Argo CD sends every cluster's token to it unencrypted")
	}
	if s.issuer, err = s.newIssuer(opts.OwnerID, client, caPEM, opts.Registerer); err != nil {
		return nil, err
	}
	return s, nil
}

// Clusters lists the server's clusters. Any failure (token, TLS, a page,
// the cacerts setting, malformed JSON) fails the whole listing, with an
// *upstream.Error in the error's chain.
func (s *Source) Clusters(ctx context.Context) ([]sources.Cluster, error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		// Waiting for the listing in progress: this one failed too.
		err := canceled(ctx)
		s.metrics.Failed(err)
		return nil, err
	}
	defer func() { <-s.sem }()
	start := time.Now()
	out, err := s.list(ctx)
	s.metrics.Observe(start)
	if err != nil {
		s.metrics.Failed(err)
		if s.conn != nil {
			// Start afresh next time: the schemas may have changed.
			s.conn.close()
			s.conn = nil
		}
		return nil, err
	}
	return out, nil
}

// Close releases idle connections. The source stays usable.
func (s *Source) Close() {
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	if s.conn != nil {
		s.conn.close()
		s.conn = nil
	}
}

func (s *Source) list(ctx context.Context) ([]sources.Cluster, error) {
	if ctx.Err() != nil {
		return nil, canceled(ctx)
	}
	token, err := readToken(s.cfg.Token)
	if err != nil {
		return nil, failed(upstream.KindConfig, opToken, err)
	}
	var caPEM []byte
	if s.cfg.CAFile != "" {
		if caPEM, err = readCAFile(s.cfg.CAFile); err != nil {
			return nil, failed(upstream.KindConfig, opCAFile, fmt.Errorf("caFile: %w", err))
		}
	}
	l := s.newListing(ctx)
	if err := s.connect(l, token, caPEM); err != nil {
		return nil, err
	}
	ca := newRancherCA(string(caPEM))
	if caPEM == nil {
		if ca, err = l.cacerts(); err != nil {
			return nil, err
		}
	}
	raw, err := l.clusters(s.filter.serverFilters(s.cfg.PageLimit))
	if err != nil {
		return nil, err
	}
	byState := map[string]int{}
	byPhase := map[sources.Phase]int{}
	skipped := map[string]int{}
	kept := make([]*Cluster, 0, len(raw))
	for i := range raw {
		byState[raw[i].State]++
		if why := s.filter.skip(&raw[i]); why != "" {
			skipped[why]++
			continue
		}
		kept = append(kept, &raw[i])
	}
	subs, err := s.aksSubscriptions(l, kept)
	if err != nil {
		return nil, err
	}
	out := make([]sources.Cluster, 0, len(kept))
	disconnected := map[string]bool{}
	for _, rc := range kept {
		c := s.mapper.toCluster(rc, ca, subs)
		byPhase[c.Phase]++
		out = append(out, c)
		if st := conditionStatus(rc.Conditions, condConnected); c.Labels[LabelEndpoint] == EndpointACE && (st == "False" || st == "Unknown") {
			disconnected[rc.ID] = true
		}
	}
	if s.issuer != nil {
		s.issuer.tokens.holdRotation(disconnected)
	}
	s.metrics.Listed(out, byState, skipped)
	s.metrics.SetNotReady(notReadyCounts(out))
	s.log.Debug("listing complete", "pages", l.pages, "requests", l.requests, "returned", len(raw), "listed", len(out),
		"ready", byPhase[sources.PhaseReady], "degraded", byPhase[sources.PhaseDegraded],
		"pending", byPhase[sources.PhasePending], "leaving", byPhase[sources.PhaseLeaving],
		"skippedLocal", skipped[skipLocal], "skippedName", skipped[skipName], "skippedLabels", skipped[skipLabels])
	return out, nil
}

// Reasons a listed cluster is left out: the reason label of
// clusters_skipped and the debug log.
const (
	skipLocal  = "local"
	skipName   = "name"
	skipLabels = "labels"
)

// filter chooses the clusters to list. It holds only validated
// configuration.
type filter struct {
	includeLocal          bool
	include, exclude      labels.Selector
	nameRe, excludeNameRe *regexp.Regexp
}

func newFilter(c *Config) *filter {
	// Validate checked the selectors and regexes.
	f := &filter{includeLocal: c.IncludeLocal}
	f.include, _ = parseSelector(c.LabelSelector)
	f.exclude, _ = parseSelector(c.ExcludeLabelSelector)
	f.nameRe, _ = parseRegex(c.NameRegex)
	f.excludeNameRe, _ = parseRegex(c.ExcludeNameRegex)
	return f
}

// skip returns why c is left out, or "" when it is listed. The state is
// never a reason: every cluster is listed, with its phase.
func (f *filter) skip(c *Cluster) string {
	switch {
	case !f.includeLocal && (c.Internal || c.ID == "local"):
		return skipLocal
	case f.nameRe != nil && !f.nameRe.MatchString(c.displayName()),
		f.excludeNameRe != nil && f.excludeNameRe.MatchString(c.displayName()):
		return skipName
	case f.include != nil && !f.include.Matches(labels.Set(c.Labels)),
		f.exclude != nil && f.exclude.Matches(labels.Set(c.Labels)):
		return skipLabels
	}
	return ""
}

// serverFilters are the filters Rancher applies itself (norman filters on
// the server before paging); labels cannot be filtered in v3. The client
// filter is applied as well, so an older server that ignores one is safe.
func (f *filter) serverFilters(limit int) map[string]any {
	out := map[string]any{"limit": limit}
	if !f.includeLocal {
		out["internal"] = "false"
	}
	return out
}
