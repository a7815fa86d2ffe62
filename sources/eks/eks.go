// Package eks is a source of the EKS clusters of a set of AWS accounts and
// regions. README.md beside this file is its user documentation: every
// configuration key with its default, the IAM it needs, the metrics.
//
// Each account is reached with the base credentials (the SDK's default
// chain: IRSA, EKS Pod Identity, environment, profile) or through a role
// assumed from them; each (account, region) has one EKS client and one
// Resource Groups Tagging API client, built once with the same credentials,
// region, retryer and metrics (client.go).
//
// A listing of one (account, region) pages through ListClusters and, at the
// same time, through the tagging API's GetResources for the resource type
// eks:cluster, then describes the names it has not described within
// DescribeTTL (and every cluster that was not ACTIVE) with bounded
// concurrency. The describe cache keeps what only DescribeCluster says
// (endpoint, certificate authority, ARN, status, Kubernetes version, public
// access), never tags: tags, and so labels, tenant, project and namespaces,
// come from GetResources on every listing, and a tag change shows on the
// next one. A cluster missing from the GetResources answer (GetResources
// leaves out resources never tagged) has the tags of its DescribeCluster
// answer when this listing described it (a cluster the tagging API has not
// caught up with), else none; one whose tags the last listing had is
// described again for them (see lostTags). The steady-state cost of a
// refresh is the list pages, the tagging pages and the new names, and a
// describe per listing of each cluster whose tags the tagging answer lost
// while it lags. The SDK's
// standard retryer handles throttling. One call failing (a page of either
// API, a describe, an assumed role) fails the listing with an
// *upstream.Error naming the account, region and operation (errors.go):
// there is never a partial result, with one exception. An account whose
// role STS refuses (AccessDenied: the role deleted, its trust policy
// changed, the account closed) while another account is in sight has
// gone out of sight: the listing goes on without it, and
// ClustersAndAccounts leaves it out of the accounts the listing covered
// (sources.AccountLister), so the inventory holds its clusters' departure
// until an operator confirms it. When no account is left in sight, or a
// role fails for any other reason (the base credentials expired or
// invalid, throttling, an STS outage), the listing fails.
//
// Every cluster is listed, whatever its status (only privateEndpoints
// policy exclude leaves clusters out). Its EKS status is State, verbatim,
// and maps to Phase (mapping.go):
//
//	EKS status  phase
//	CREATING    pending
//	PENDING     pending    (an EKS Connector registration not connected yet)
//	ACTIVE      ready
//	UPDATING    degraded   (the API keeps serving during an update)
//	FAILED      degraded when EKS reports an endpoint, else pending (creation failed)
//	DELETING    leaving
//	other       degraded   (a status newer than this code; never absence)
//
// Sources: the ClusterStatus values of aws-sdk-go-v2 service/eks
// types/enums.go (v1.105.4; "can be expanded in the future"), and their
// meanings in the project's cluster-states notes (section 2). A failed
// update leaves a cluster ACTIVE, not FAILED. Phase says nothing about
// Ready: a cluster without an endpoint or certificate authority yet (before
// ACTIVE) is listed not ready, with the reason.
package eks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"golang.org/x/sync/errgroup"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// Provider is the eks provider's registration.
type Provider struct{}

// Name is eks.
func (Provider) Name() sources.Provider { return sources.ProviderEKS }

// Kind is cloud: EKS is where its clusters run.
func (Provider) Kind() sources.Kind { return sources.KindCloud }

// NewConfig returns an empty eks section.
func (Provider) NewConfig() sources.ProviderConfig { return &Config{} }

var (
	_ sources.Registration   = Provider{}
	_ sources.ProviderConfig = (*Config)(nil)
	_ sources.AccountLister  = (*Source)(nil)
)

// Source lists the EKS clusters of its accounts and regions.
type Source struct {
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time
	mapper  *mapper
	ttl     time.Duration
	limit   int
	// sem bounds the API calls in flight across all targets.
	sem     chan struct{}
	targets []*target

	// mu makes listings one at a time.
	mu sync.Mutex
}

// hooks replace what a source takes from its environment, for tests.
type hooks struct {
	// awsConfig is the base configuration (credentials, HTTP client, ...);
	// nil loads the SDK's default chain. Its region is not used: every
	// client gets its own.
	awsConfig *aws.Config
	// httpClient, when set, sends every EKS, tagging and STS request.
	httpClient aws.HTTPClient
	// now is the clock of the describe cache; nil means time.Now.
	now func() time.Time
}

// NewSource builds the source of a valid section (Default and Validate
// have run): one EKS client and one tagging client per account and
// region, with the base credentials of the SDK's default chain. It makes
// no API call: credentials are resolved, and roles assumed, by the first
// listing.
func (c *Config) NewSource(opts sources.SourceOptions) (sources.Source, error) {
	return newSource(c, opts, hooks{})
}

// newSource is NewSource with hooks.
func newSource(cfg *Config, opts sources.SourceOptions, h hooks) (*Source, error) {
	if errs := cfg.Validate(nil); len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	mp, err := newMapper(*cfg)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, err := baseConfig(h, log)
	if err != nil {
		return nil, err
	}
	if h.now == nil {
		h.now = time.Now
	}
	return &Source{
		log: log.With("provider", string(sources.ProviderEKS)), metrics: m, now: h.now, mapper: mp,
		ttl: cfg.DescribeTTL.Std(), limit: cfg.Concurrency, sem: make(chan struct{}, cfg.Concurrency),
		targets: newTargets(cfg, base, m),
	}, nil
}

// targetResult is the listing of one target.
type targetResult struct {
	clusters []sources.Cluster
	// states counts the clusters by EKS status, before the filters;
	// skipped counts those the filters left out, by reason.
	states, skipped map[string]int
}

// Clusters lists every (account, region) concurrently. The first failure
// cancels the others and fails the listing: an error means no result.
// The error holds an *upstream.Error (kind and operation) and names the
// account and region of each failure. An account whose role is refused is
// left out (see the package comment and ClustersAndAccounts).
func (s *Source) Clusters(ctx context.Context) ([]sources.Cluster, error) {
	out, _, err := s.ClustersAndAccounts(ctx)
	return out, err
}

// ClustersAndAccounts is Clusters with the accounts the listing covered:
// every configured account but those whose role was refused, so that the
// inventory can tell a cluster deleted from one whose account went out of
// sight (sources.AccountLister).
func (s *Source) ClustersAndAccounts(ctx context.Context) ([]sources.Cluster, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.metrics.Observe(time.Now())
	results := make([]targetResult, len(s.targets))
	errs := make([]error, len(s.targets))
	refused, ok := s.assumeRoles(ctx, errs)
	if !ok {
		return nil, nil, s.failure(ctx, errs)
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, t := range s.targets {
		if refused[t.account.ID] {
			continue
		}
		g.Go(func() error {
			results[i], errs[i] = s.listTarget(gctx, t)
			return errs[i]
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, s.failure(ctx, errs)
	}
	out := []sources.Cluster{}
	states, skipped := map[string]int{}, map[string]int{}
	for _, r := range results {
		out = append(out, r.clusters...)
		for st, n := range r.states {
			states[st] += n
		}
		for reason, n := range r.skipped {
			skipped[reason] += n
		}
	}
	s.metrics.Listed(out, states, skipped)
	s.metrics.SetNotReady(notReadyCounts(out))
	covered := slices.DeleteFunc(s.accountIDs(), func(id string) bool { return refused[id] })
	return out, covered, nil
}

// failure counts the failed listing and returns the errors of its failed
// targets. Targets cancelled because another one failed are not failures
// of their own.
func (s *Source) failure(ctx context.Context, errs []error) error {
	var real []error
	for _, err := range errs {
		if err == nil || ctx.Err() == nil && errors.Is(err, context.Canceled) {
			continue
		}
		real = append(real, err)
		if ctx.Err() != nil {
			break // the caller gave up: one error says it
		}
	}
	var err error
	switch len(real) {
	case 0: // cannot happen: the first error is a real one
		err = &upstream.Error{Kind: upstream.KindOther, Msg: "listing failed"}
	case 1:
		err = real[0]
	default:
		err = errors.Join(real...)
	}
	s.metrics.Failed(err)
	return err
}

// listTarget lists one account and region: every page of names and every
// page of cluster tags (the two concurrently), then a describe of each name
// the cache cannot answer or whose tags the tagging answer lost (lostTags),
// then the mapping of each cluster with its tags of this listing: those of
// the tagging answer, else those of a describe of this listing.
func (s *Source) listTarget(ctx context.Context, t *target) (targetResult, error) {
	var (
		names []string
		tags  map[string]map[string]string
	)
	lg, lctx := errgroup.WithContext(ctx)
	lg.Go(func() (err error) {
		if names, err = s.listNames(lctx, t); err != nil {
			return t.fail(opListClusters, "list clusters", err)
		}
		return nil
	})
	lg.Go(func() (err error) {
		if tags, err = s.listTags(lctx, t); err != nil {
			return t.fail(opGetResources, "get cluster tags", err)
		}
		return nil
	})
	if err := lg.Wait(); err != nil {
		return targetResult{}, err
	}
	now := s.now()
	next, todo := t.cached(names, now)
	lost := t.lostTags(names, tags)
	for _, n := range lost {
		if _, ok := next[n]; ok {
			delete(next, n)
			todo = append(todo, n)
		}
	}
	s.metrics.cache.WithLabelValues("hit").Add(float64(len(names) - len(todo)))
	s.metrics.cache.WithLabelValues("miss").Add(float64(len(todo)))
	fromDescribe, err := s.describeAll(ctx, t, todo, tags, next, now)
	if err != nil {
		return targetResult{}, err
	}
	for arn, ct := range fromDescribe {
		s.log.Debug("cluster missing from the tagging answer; its tags read from DescribeCluster",
			"account", t.account.ID, "region", t.region, "arn", arn)
		tags[arn] = ct
	}
	r, err := s.mapAll(t, names, tags, next)
	if err != nil {
		return targetResult{}, err
	}
	t.cache = next
	s.log.Debug("listed account and region", "account", t.account.ID, "region", t.region,
		"names", len(names), "tagged", len(tags), "described", len(todo), "tagsLost", len(lost),
		"tagsFromDescribe", len(fromDescribe), "clusters", len(r.clusters))
	return r, nil
}

// describeAll describes the names todo, concurrently within the bound, and
// adds them to next; a name deleted since it was listed is simply gone. It
// returns, by ARN, the tags of the clusters described whose ARN the
// tagging answer (tags, only read) leaves out and whose DescribeCluster
// answer has tags: the tagging API has not caught up with them.
func (s *Source) describeAll(ctx context.Context, t *target, todo []string, tags map[string]map[string]string, next map[string]cacheEntry, now time.Time) (map[string]map[string]string, error) {
	described := make([]cacheEntry, len(todo))
	ownTags := make([]map[string]string, len(todo))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.limit)
	for i, n := range todo {
		g.Go(func() error {
			c, err := s.describe(gctx, t, n)
			if err != nil {
				return t.fail(opDescribeCluster, "describe cluster "+n, err)
			}
			if c != nil {
				described[i] = cacheEntry{expires: expiry(now, s.ttl), described: keepDescribed(c)}
				if _, in := tags[aws.ToString(c.Arn)]; !in && len(c.Tags) > 0 {
					ownTags[i] = maps.Clone(c.Tags)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var fromDescribe map[string]map[string]string
	for i, e := range described {
		if e.described == nil {
			continue
		}
		next[todo[i]] = e
		if ownTags[i] != nil {
			if fromDescribe == nil {
				fromDescribe = map[string]map[string]string{}
			}
			fromDescribe[aws.ToString(e.described.Arn)] = ownTags[i]
		}
	}
	return fromDescribe, nil
}

// mapAll maps the clusters of names found in next, each with its tags of
// this listing, in the order of names. The last mapping stands while
// neither the describe answer nor the tags changed.
func (s *Source) mapAll(t *target, names []string, tags map[string]map[string]string, next map[string]cacheEntry) (targetResult, error) {
	r := targetResult{states: map[string]int{}, skipped: map[string]int{}}
	for _, n := range names {
		e, ok := next[n]
		if !ok {
			continue
		}
		// Tags come from this listing's GetResources answer, completed
		// with those of this listing's describe answers for the clusters it
		// leaves out (listTarget): none when the cluster is in neither.
		ct, tagged := tags[aws.ToString(e.described.Arn)]
		e.tagged = tagged
		if e.result == nil || !maps.Equal(e.tags, ct) {
			res, err := s.mapper.toCluster(e.described, ct, t.account, t.region)
			if err != nil {
				return targetResult{}, newError(upstream.KindConfig, opDescribeCluster, t.where(), err)
			}
			for _, d := range res.Dropped {
				s.log.Debug("tag not copied to labels", "account", t.account.ID, "region", t.region, "cluster", n, "reason", d)
			}
			if res.Skip != "" {
				s.log.Debug("cluster left out", "account", t.account.ID, "region", t.region, "cluster", n, "reason", res.Skip)
			}
			e.tags, e.result = ct, &res
		}
		next[n] = e
		r.states[string(e.described.Status)]++
		if e.result.Skip != "" {
			r.skipped[e.result.Skip]++
			continue
		}
		r.clusters = append(r.clusters, cloneCluster(e.result.Cluster))
	}
	return r, nil
}
