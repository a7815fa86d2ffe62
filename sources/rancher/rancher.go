// Package rancher is a source of the clusters of one Rancher server, listed
// through its /v3 API with norman's clientbase.
//
// Each listing reads the token (and caFile), reads Rancher's CA from
// /v3/settings/cacerts unless caFile is set, and fetches /v3/clusters page
// by page, following pagination.next itself: any failed page fails the
// whole listing (norman's generated ListAll returns the pages it got and
// drops the error, which would turn an outage into clusters that left).
// The norman client (the schemas read from /v3) is kept between listings
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
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Options are the collaborators of a Source.
type Options struct {
	Logger *slog.Logger
	// Registerer receives the source's metrics, with fixed names; the
	// caller wraps it with a constant source label. Nil registers nothing.
	Registerer prometheus.Registerer
	// HTTPClient, when set, provides the base transport (tests: an
	// httptest server's client). Its TLS settings replace caFile's for
	// trusting Rancher; caFile is still the clusters' caData.
	HTTPClient *http.Client
}

// Source lists the clusters of one Rancher server.
type Source struct {
	name    string
	cfg     Config
	origin  *url.URL // configured scheme and host
	apiURL  string   // origin + /v3
	timeout time.Duration
	filter  *filter
	mapper  *mapper
	log     *slog.Logger
	metrics *metrics
	base    http.RoundTripper // from Options.HTTPClient, or nil

	// sem serialises listings; it guards conn and warnedOrigin.
	sem          chan struct{}
	conn         *conn
	warnedOrigin bool
}

var _ sources.Source = (*Source)(nil)

// New defaults and validates cfg, reads caFile once (a bad PEM is a
// start-up error) and registers the metrics. It makes no request.
func New(name string, cfg Config, opts Options) (*Source, error) {
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	origin, _ := parseURL(cfg.URL) // checked by Validate
	timeout, _ := time.ParseDuration(cfg.RequestTimeout)
	if cfg.CAFile != "" {
		if _, err := readCAFile(cfg.CAFile); err != nil {
			return nil, fmt.Errorf("caFile: %w", err)
		}
	}
	f, err := newFilter(cfg)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("source", name, "rancher", origin.String())
	s := &Source{
		name: name, cfg: cfg, origin: origin, apiURL: origin.String() + "/v3", timeout: timeout,
		filter: f, mapper: newMapper(name, origin.String(), cfg), log: logger, metrics: m,
		sem: make(chan struct{}, 1),
	}
	if opts.HTTPClient != nil {
		s.base = opts.HTTPClient.Transport
		if s.base == nil {
			s.base = http.DefaultTransport
		}
	}
	if origin.Scheme == "http" {
		logger.Warn("rancher url is plain http: the token is sent unencrypted")
	}
	return s, nil
}

// Clusters lists the server's clusters. Any failure (token, TLS, a page,
// the cacerts setting, malformed JSON) fails the whole listing.
func (s *Source) Clusters(ctx context.Context) ([]sources.Cluster, error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.sem }()
	start := time.Now()
	out, err := s.list(ctx)
	s.metrics.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		kind := kindNetwork
		var le *listError
		if errors.As(err, &le) {
			kind = le.kind
		}
		s.metrics.errors.WithLabelValues(kind).Inc()
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
	if err := ctx.Err(); err != nil {
		kind := kindCanceled
		if errors.Is(err, context.DeadlineExceeded) {
			kind = kindTimeout
		}
		return nil, &listError{kind: kind, err: err}
	}
	token, err := readToken(s.cfg.Token)
	if err != nil {
		return nil, &listError{kind: kindToken, err: err}
	}
	var caPEM []byte
	if s.cfg.CAFile != "" {
		if caPEM, err = readCAFile(s.cfg.CAFile); err != nil {
			return nil, &listError{kind: kindCA, err: fmt.Errorf("caFile: %w", err)}
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
	out := make([]sources.Cluster, 0, len(raw))
	for i := range raw {
		byState[raw[i].State]++
		if why := s.filter.skip(&raw[i]); why != "" {
			skipped[why]++
			continue
		}
		c := s.mapper.toCluster(&raw[i], ca)
		byPhase[c.Phase]++
		out = append(out, c)
	}
	s.metrics.setClusters(byState, byPhase)
	s.log.Debug("listing complete", "pages", l.pages, "requests", l.requests, "returned", len(raw), "listed", len(out),
		"ready", byPhase[sources.PhaseReady], "degraded", byPhase[sources.PhaseDegraded],
		"pending", byPhase[sources.PhasePending], "leaving", byPhase[sources.PhaseLeaving],
		"skippedLocal", skipped[skipLocal], "skippedName", skipped[skipName], "skippedLabels", skipped[skipLabels])
	return out, nil
}

// readToken reads the token the reference points at. Errors name the
// reference, never the value.
func readToken(ref sources.SecretRef) (string, error) {
	var v string
	switch {
	case ref.File != "":
		b, err := os.ReadFile(ref.File)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", fmt.Errorf("token %s: %w", ref.String(), err)
		}
		v = string(b)
	case ref.Env != "":
		var ok bool
		if v, ok = os.LookupEnv(ref.Env); !ok {
			return "", fmt.Errorf("token %s: not set", ref.String())
		}
	default:
		return "", fmt.Errorf("token %s: unsupported reference", ref.String())
	}
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return "", fmt.Errorf("token %s: empty", ref.String())
	case strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "", fmt.Errorf("token %s: contains whitespace or control characters", ref.String())
	}
	return v, nil
}

// readCAFile reads and checks a PEM bundle.
func readCAFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := sources.ValidatePEM(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}
