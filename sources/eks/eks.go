// Package eks is a source of the EKS clusters of a set of AWS accounts and
// regions.
//
// Each account is reached with the base credentials (the SDK's default
// chain: IRSA, EKS Pod Identity, environment, profile) or through a role
// assumed from them; each (account, region) has one EKS client and one
// Resource Groups Tagging API client, built once with the same credentials,
// region, retryer and metrics.
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
// leaves out resources never tagged) has no tags. The steady-state cost of a
// refresh is the list pages, the tagging pages and the new names. The SDK's
// standard retryer handles throttling. One call failing (a page of either
// API, a describe, an assumed role) fails the listing, naming the account,
// region and operation: there is never a partial result.
//
// Every cluster is listed, whatever its status (only privateEndpoints
// policy exclude leaves clusters out). Its EKS status is State, verbatim,
// and maps to Phase:
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
// meanings in /work/shared/apis/cluster-states.md section 2. A failed
// update leaves a cluster ACTIVE, not FAILED. Phase says nothing about
// Ready: a cluster without an endpoint or certificate authority yet (before
// ACTIVE) is listed not ready, with the reason.
//
// A source section, with the defaults spelled out where they exist:
//
//	eks:
//	  regions: [eu-west-1, us-east-1]            # required
//	  accounts:
//	    - id: "111111111111"
//	      roleARN: arn:aws:iam::111111111111:role/cluster-discovery  # optional: eks:ListClusters, eks:DescribeCluster, tag:GetResources
//	      externalID: ""
//	      sessionName: argocd-cluster-discovery
//	      argocdRoleARN: arn:aws:iam::111111111111:role/argocd       # awsAuthConfig.roleARN
//	      regions: []                              # overrides regions
//	  concurrency: 8                               # API calls in flight, whole source
//	  describeTTL: 1h
//	  tags: {allow: [], deny: ["aws:*"]}           # path.Match patterns on tag keys
//	  tenantTag: tenant
//	  projectTag: argocd-project
//	  namespacesTag: argocd-namespaces
//	  auth: {mode: awsAuthConfig, command: argocd-k8s-auth}   # or mode: exec
//	  privateEndpoints: {policy: include}          # exclude | proxy (with proxyUrl)
//	  nameTemplate: "{{.Name}}"                    # e.g. "{{.Name}}-{{.Region}}" when names repeat
//	  maxAttempts: 5
//	  maxBackoff: 20s
//	  endpoint: ""                                 # EKS BaseEndpoint override
//	  taggingEndpoint: ""                          # Resource Groups Tagging API BaseEndpoint override
//	  stsEndpoint: ""
//
// The former key statuses is rejected: every cluster is listed.
//
// IAM: the identity that lists an account (its roleARN, or the base
// identity for accounts without one) needs eks:ListClusters,
// eks:DescribeCluster and tag:GetResources; the base identity needs
// sts:AssumeRole on each roleARN.
package eks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/resourcegroupstaggingapi"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Options are the dependencies of a Source. Every field is optional.
type Options struct {
	Logger *slog.Logger
	// Registerer receives the metrics (fixed names, no source label: the
	// caller wraps it with one); nil registers nothing.
	Registerer prometheus.Registerer
	// AWSConfig is the base configuration (credentials, HTTP client, ...);
	// nil loads the SDK's default chain. Its region is not used: every
	// client gets its own.
	AWSConfig *aws.Config
	// HTTPClient, when set, sends every EKS, tagging and STS request.
	HTTPClient aws.HTTPClient
	// Now is the clock of the describe cache; nil means time.Now.
	Now func() time.Time
}

// api is the subset of the EKS API the source uses.
type api interface {
	eks.ListClustersAPIClient
	eks.DescribeClusterAPIClient
}

// taggingAPI is the subset of the Resource Groups Tagging API the source
// uses.
type taggingAPI interface {
	resourcegroupstaggingapi.GetResourcesAPIClient
}

// target is one (account, region) and its clients.
type target struct {
	account Account
	region  string
	client  api
	tagging taggingAPI
	// creds are the account's assumed-role credentials (nil without a
	// role), shared by the account's targets.
	creds aws.CredentialsProvider
	// cache holds the last listing's clusters by EKS name. Only a listing,
	// under Source.mu, reads or replaces it.
	cache map[string]cacheEntry
}

// cacheEntry is what the source keeps of one cluster between listings.
type cacheEntry struct {
	// expires and described: the DescribeCluster answer trimmed to what
	// the cache may keep (see keepDescribed), reused until expires when it
	// is ACTIVE.
	expires   time.Time
	described *types.Cluster
	// tags and result are the last mapping of described with those tags
	// (from GetResources), reused as long as neither changes; result is
	// nil until described is mapped.
	tags   map[string]string
	result *mapped
}

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

// New validates cfg (after applying its defaults) and builds one EKS client
// and one tagging client per account and region. It makes no API call:
// credentials are resolved, and roles assumed, by the first listing.
func New(name string, cfg Config, opts Options) (*Source, error) {
	cfg.Accounts = slices.Clone(cfg.Accounts) // Default writes into it
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Validate parsed the durations.
	ttl, _ := time.ParseDuration(cfg.DescribeTTL)
	maxBackoff, _ := time.ParseDuration(cfg.MaxBackoff)
	mp, err := newMapper(cfg)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var base aws.Config
	if opts.AWSConfig != nil {
		base = opts.AWSConfig.Copy()
	} else if base, err = awsconfig.LoadDefaultConfig(context.Background()); err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if opts.HTTPClient != nil {
		base.HTTPClient = opts.HTTPClient
	}
	// The SDK's own logs of the wire, the signing and the retries carry
	// credentials (signatures, session tokens, STS answers, error messages
	// quoting the canonical request): off, whatever the base asks.
	base.ClientLogMode = 0
	s := &Source{
		log: opts.Logger.With("source", name, "provider", string(sources.ProviderEKS)), metrics: m, now: opts.Now,
		mapper: mp, ttl: ttl, limit: cfg.Concurrency, sem: make(chan struct{}, cfg.Concurrency),
	}
	// Throttling is handled by backoff and by the bound on calls in flight.
	// The SDK's client-side retry quota is off: once drained by a throttled
	// cold start, it would fail every later listing of that client without
	// even trying.
	newRetryer := func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts, o.MaxBackoff, o.RateLimiter = cfg.MaxAttempts, maxBackoff, ratelimit.None
		})
	}
	apiOptions := append(slices.Clone(base.APIOptions), m.countRequests)
	for _, acct := range cfg.Accounts {
		regions := acct.Regions
		if len(regions) == 0 {
			regions = cfg.Regions
		}
		creds := base.Credentials
		var assumed aws.CredentialsProvider
		if acct.RoleARN != "" {
			stsClient := sts.NewFromConfig(base, func(o *sts.Options) {
				o.Region, o.Retryer, o.APIOptions = regions[0], newRetryer(), apiOptions
				if cfg.STSEndpoint != "" {
					o.BaseEndpoint = aws.String(cfg.STSEndpoint)
				}
			})
			creds = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(stsClient, acct.RoleARN, func(o *stscreds.AssumeRoleOptions) {
				o.RoleSessionName = acct.SessionName
				if acct.ExternalID != "" {
					o.ExternalID = aws.String(acct.ExternalID)
				}
			}))
			assumed = creds
		}
		for _, region := range regions {
			// Both clients of a target share the credentials, region,
			// retryer and metrics; only their endpoint overrides differ.
			cc := base.Copy()
			cc.Region, cc.Credentials, cc.Retryer, cc.APIOptions = region, creds, newRetryer, apiOptions
			client := eks.NewFromConfig(cc, func(o *eks.Options) {
				if cfg.Endpoint != "" {
					o.BaseEndpoint = aws.String(cfg.Endpoint)
				}
			})
			tagging := resourcegroupstaggingapi.NewFromConfig(cc, func(o *resourcegroupstaggingapi.Options) {
				if cfg.TaggingEndpoint != "" {
					o.BaseEndpoint = aws.String(cfg.TaggingEndpoint)
				}
			})
			s.targets = append(s.targets, &target{account: acct, region: region, client: client, tagging: tagging, creds: assumed})
		}
	}
	return s, nil
}

// targetResult is the listing of one target.
type targetResult struct {
	clusters []sources.Cluster
	statuses map[types.ClusterStatus]int
}

// Clusters lists every (account, region) concurrently. The first failure
// cancels the others and fails the listing; the error names the account and
// region of each failure.
func (s *Source) Clusters(ctx context.Context) ([]sources.Cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	results := make([]targetResult, len(s.targets))
	errs := make([]error, len(s.targets))
	if !s.assumeRoles(ctx, errs) {
		return nil, s.failure(ctx, errs)
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, t := range s.targets {
		g.Go(func() error {
			results[i], errs[i] = s.listTarget(gctx, t)
			return errs[i]
		})
	}
	if err := g.Wait(); err != nil {
		return nil, s.failure(ctx, errs)
	}
	var out []sources.Cluster
	statuses := map[types.ClusterStatus]int{}
	for _, r := range results {
		out = append(out, r.clusters...)
		for st, n := range r.statuses {
			statuses[st] += n
		}
	}
	s.metrics.clusters.Reset()
	for _, st := range types.ClusterStatus("").Values() {
		s.metrics.clusters.WithLabelValues(string(st)).Set(float64(statuses[st]))
		delete(statuses, st)
	}
	for st, n := range statuses { // a status newer than this SDK
		s.metrics.clusters.WithLabelValues(string(st)).Set(float64(n))
	}
	if out == nil {
		out = []sources.Cluster{}
	}
	return out, nil
}

// failure counts the failed targets and returns their errors. Targets
// cancelled because another one failed are not failures of their own.
func (s *Source) failure(ctx context.Context, errs []error) error {
	var real []error
	for i, err := range errs {
		if err == nil || ctx.Err() == nil && errors.Is(err, context.Canceled) {
			continue
		}
		t := s.targets[i]
		s.metrics.errors.WithLabelValues(errorKind(err), t.account.ID, t.region).Inc()
		real = append(real, redact(err))
		if ctx.Err() != nil {
			break // the caller gave up: one error says it
		}
	}
	if len(real) == 0 { // cannot happen: the first error is a real one
		return errors.New("listing failed")
	}
	return errors.Join(real...)
}

// assumeRoles assumes each account's role once, through the first of its
// targets, before its regions list: a denied role is one AssumeRole call
// and one error, not one of each per region racing for the credentials
// cache. It records each failure in errs and reports whether all
// succeeded. Credentials still valid come from the cache, with no call.
func (s *Source) assumeRoles(ctx context.Context, errs []error) bool {
	g, gctx := errgroup.WithContext(ctx)
	seen := map[string]bool{}
	for i, t := range s.targets {
		if t.creds == nil || seen[t.account.ID] {
			continue
		}
		seen[t.account.ID] = true
		g.Go(func() error {
			if _, err := t.creds.Retrieve(gctx); err != nil {
				errs[i] = fmt.Errorf("account %s region %s: assume role %s: %w", t.account.ID, t.region, t.account.RoleARN, err)
				return errs[i]
			}
			return nil
		})
	}
	return g.Wait() == nil
}

// listTarget lists one account and region: every page of names and every
// page of cluster tags (the two concurrently), then a describe of each name
// the cache cannot answer, then the mapping of each cluster with its tags
// of this listing.
func (s *Source) listTarget(ctx context.Context, t *target) (targetResult, error) {
	start := time.Now()
	defer func() {
		s.metrics.duration.WithLabelValues(t.account.ID, t.region).Observe(time.Since(start).Seconds())
	}()
	fail := func(what string, err error) error {
		if errorKind(err) == "assume_role" {
			what = "assume role " + t.account.RoleARN
		}
		return fmt.Errorf("account %s region %s: %s: %w", t.account.ID, t.region, what, err)
	}
	var (
		names []string
		tags  map[string]map[string]string
	)
	lg, lctx := errgroup.WithContext(ctx)
	lg.Go(func() (err error) {
		if names, err = s.listNames(lctx, t); err != nil {
			return fail("list clusters", err)
		}
		return nil
	})
	lg.Go(func() (err error) {
		if tags, err = s.listTags(lctx, t); err != nil {
			return fail("get cluster tags", err)
		}
		return nil
	})
	if err := lg.Wait(); err != nil {
		return targetResult{}, err
	}

	now := s.now()
	next := make(map[string]cacheEntry, len(names))
	var todo []string
	for _, n := range names {
		if e, ok := t.cache[n]; ok && e.described.Status == types.ClusterStatusActive && now.Before(e.expires) {
			next[n] = e
		} else {
			todo = append(todo, n)
		}
	}
	s.metrics.cache.WithLabelValues("hit").Add(float64(len(names) - len(todo)))
	s.metrics.cache.WithLabelValues("miss").Add(float64(len(todo)))

	described := make([]*types.Cluster, len(todo))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.limit)
	for i, n := range todo {
		g.Go(func() error {
			c, err := s.describe(gctx, t, n)
			if err != nil {
				return fail("describe cluster "+n, err)
			}
			described[i] = c
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return targetResult{}, err
	}
	for i, c := range described {
		if c != nil { // nil: deleted between list and describe, simply gone
			next[todo[i]] = cacheEntry{expires: s.expiry(now), described: keepDescribed(c)}
		}
	}

	r := targetResult{statuses: map[types.ClusterStatus]int{}}
	for _, n := range names {
		e, ok := next[n]
		if !ok {
			continue
		}
		// Tags come from this listing's GetResources answer: none when the
		// cluster is not in it. The last mapping stands while neither the
		// describe nor the tags changed.
		ct := tags[aws.ToString(e.described.Arn)]
		if e.result == nil || !maps.Equal(e.tags, ct) {
			res, err := s.mapper.toCluster(e.described, ct, t.account, t.region)
			if err != nil {
				return targetResult{}, fmt.Errorf("account %s region %s: %w", t.account.ID, t.region, err)
			}
			for _, d := range res.Dropped {
				s.log.Debug("tag not copied to labels", "account", t.account.ID, "region", t.region, "cluster", n, "reason", d)
			}
			if res.Skip != "" {
				s.log.Debug("cluster left out", "account", t.account.ID, "region", t.region, "cluster", n, "reason", res.Skip)
			}
			e.tags, e.result = ct, &res
			next[n] = e
		}
		r.statuses[e.described.Status]++
		if e.result.Skip == "" {
			r.clusters = append(r.clusters, cloneCluster(e.result.Cluster))
		}
	}
	t.cache = next
	s.log.Debug("listed account and region", "account", t.account.ID, "region", t.region,
		"names", len(names), "tagged", len(tags), "described", len(todo), "clusters", len(r.clusters))
	return r, nil
}

// listNames pages through ListClusters. A token seen before is an error
// rather than the end: stopping there would be a partial listing.
func (s *Source) listNames(ctx context.Context, t *target) ([]string, error) {
	p := eks.NewListClustersPaginator(t.client, &eks.ListClustersInput{MaxResults: aws.Int32(100)})
	var names []string
	seen, tokens := map[string]bool{}, map[string]bool{}
	for p.HasMorePages() {
		release, err := s.acquire(ctx)
		if err != nil {
			return nil, err
		}
		page, err := p.NextPage(ctx)
		release()
		if err != nil {
			return nil, err
		}
		for _, n := range page.Clusters {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
		if tok := aws.ToString(page.NextToken); tok != "" {
			if tokens[tok] {
				return nil, fmt.Errorf("nextToken of an earlier page returned again")
			}
			tokens[tok] = true
		}
	}
	return names, nil
}

// taggingResourceType is the GetResources resource type of EKS clusters
// (service:resourceType, as in their ARNs).
const taggingResourceType = "eks:cluster"

// listTags pages through GetResources for the EKS clusters of the target's
// account and region, and returns their tags by cluster ARN. GetResources
// leaves out resources never tagged, and answers "Tags": [] for those
// whose tags were all removed. A token seen before is an error, as for
// ListClusters.
func (s *Source) listTags(ctx context.Context, t *target) (map[string]map[string]string, error) {
	p := resourcegroupstaggingapi.NewGetResourcesPaginator(t.tagging, &resourcegroupstaggingapi.GetResourcesInput{
		ResourceTypeFilters: []string{taggingResourceType}, ResourcesPerPage: aws.Int32(100),
	})
	out := map[string]map[string]string{}
	tokens := map[string]bool{}
	for p.HasMorePages() {
		release, err := s.acquire(ctx)
		if err != nil {
			return nil, err
		}
		page, err := p.NextPage(ctx)
		release()
		if err != nil {
			return nil, err
		}
		for _, m := range page.ResourceTagMappingList {
			arn := aws.ToString(m.ResourceARN)
			if arn == "" {
				continue // matches no cluster
			}
			tags := make(map[string]string, len(m.Tags))
			for _, tag := range m.Tags {
				tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
			}
			out[arn] = tags
		}
		if tok := aws.ToString(page.PaginationToken); tok != "" {
			if tokens[tok] {
				return nil, fmt.Errorf("PaginationToken of an earlier page returned again")
			}
			tokens[tok] = true
		}
	}
	return out, nil
}

// keepDescribed is what the describe cache keeps of a DescribeCluster
// answer: what the mapping reads, except tags (they come from
// GetResources, fresh on every listing) and the connector's activation
// data (credentials, never kept).
func keepDescribed(c *types.Cluster) *types.Cluster {
	k := &types.Cluster{Name: c.Name, Arn: c.Arn, CreatedAt: c.CreatedAt, Status: c.Status, Version: c.Version, Endpoint: c.Endpoint}
	if c.CertificateAuthority != nil {
		k.CertificateAuthority = &types.Certificate{Data: c.CertificateAuthority.Data}
	}
	if c.ResourcesVpcConfig != nil {
		k.ResourcesVpcConfig = &types.VpcConfigResponse{EndpointPublicAccess: c.ResourcesVpcConfig.EndpointPublicAccess}
	}
	return k
}

// describe returns the cluster, or nil when it no longer exists.
func (s *Source) describe(ctx context.Context, t *target, name string) (*types.Cluster, error) {
	release, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	out, err := t.client.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return nil, nil
	case err != nil:
		return nil, err
	case out.Cluster == nil:
		return nil, fmt.Errorf("answer has no cluster")
	}
	if out.Cluster.Name == nil {
		out.Cluster.Name = aws.String(name)
	}
	return out.Cluster, nil
}

func (s *Source) acquire(ctx context.Context) (func(), error) {
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// expiry spreads expiries over the last fifth of the TTL, so that a fleet
// described at once is not described again all at once.
func (s *Source) expiry(now time.Time) time.Time {
	return now.Add(s.ttl - time.Duration(rand.Int64N(int64(s.ttl)/5+1)))
}

// cloneCluster copies what a caller could modify, so that the cache stays
// intact.
func cloneCluster(c sources.Cluster) sources.Cluster {
	c.Labels, c.Annotations, c.Namespaces = maps.Clone(c.Labels), maps.Clone(c.Annotations), slices.Clone(c.Namespaces)
	if c.Auth.AWS != nil {
		a := *c.Auth.AWS
		c.Auth.AWS = &a
	}
	if c.Auth.Exec != nil {
		e := *c.Auth.Exec
		e.Args, e.Env = slices.Clone(e.Args), maps.Clone(e.Env)
		c.Auth.Exec = &e
	}
	return c
}

// accessKeyRe matches AWS access key ids.
var accessKeyRe = regexp.MustCompile(`\b(AKIA|ASIA)[A-Z0-9]{12,}\b`)

// securityTokenRe matches a session token's value as a signature mismatch
// answer quotes it, in the canonical request it shows (header or query).
var securityTokenRe = regexp.MustCompile(`(?i)(x-amz-security-token\s*[:=]\s*)[^\s'"&<]+`)

// redact hides access key ids and session tokens should an upstream message
// carry one (a signature mismatch answer quotes the canonical request,
// session token included). The original error stays reachable through
// Unwrap for errors.Is and As.
func redact(err error) error {
	msg := err.Error()
	r := accessKeyRe.ReplaceAllString(msg, "<redacted>")
	r = securityTokenRe.ReplaceAllString(r, "${1}<redacted>")
	if r != msg {
		return &redactedError{msg: r, err: err}
	}
	return err
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
