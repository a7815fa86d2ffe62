package eks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/resourcegroupstaggingapi"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/logging"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

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

// baseConfig is the AWS configuration every client starts from: the one
// of h, else the SDK's default chain (IRSA, EKS Pod Identity, environment,
// profile), with the SDK's own wire logging off and what it still logs
// (warnings) going to logger.
func baseConfig(h hooks, logger *slog.Logger) (aws.Config, error) {
	var base aws.Config
	if h.awsConfig != nil {
		base = h.awsConfig.Copy()
	} else {
		var err error
		if base, err = awsconfig.LoadDefaultConfig(context.Background()); err != nil {
			return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
		}
	}
	if h.httpClient != nil {
		base.HTTPClient = h.httpClient
	}
	// The SDK's own logs of the wire, the signing and the retries carry
	// credentials (signatures, session tokens, STS answers, error messages
	// quoting the canonical request): off, whatever the base asks.
	base.ClientLogMode = 0
	if h.awsConfig == nil || h.awsConfig.Logger == nil {
		base.Logger = sdkLogger{logger: logger.With("component", "aws-sdk")}
	}
	return base, nil
}

// sdkLogger makes the AWS SDK's own log lines (its default writes text
// lines to stderr) records of the source's logger, in the service's
// format: a warning at Warn, anything else at Debug.
type sdkLogger struct{ logger *slog.Logger }

// Logf implements logging.Logger.
func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelDebug
	if c == logging.Warn {
		level = slog.LevelWarn
	}
	l.logger.Log(context.Background(), level, fmt.Sprintf(format, v...))
}

// newTargets builds one EKS client and one tagging client per account and
// region, sharing the account's credentials (assumed from base when the
// account has a role), the retryer settings and the metrics. It makes no
// API call.
func newTargets(cfg *Config, base aws.Config, m *metrics) []*target {
	// Throttling is handled by backoff and by the bound on calls in flight.
	// The SDK's client-side retry quota is off: once drained by a throttled
	// cold start, it would fail every later listing of that client without
	// even trying.
	newRetryer := func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts, o.MaxBackoff, o.RateLimiter = cfg.MaxAttempts, cfg.MaxBackoff.Std(), ratelimit.None
		})
	}
	apiOptions := append(slices.Clone(base.APIOptions), m.countRequests)
	var targets []*target
	for _, acct := range cfg.Accounts {
		regions := acct.Regions
		if len(regions) == 0 {
			regions = cfg.Regions
		}
		creds, assumed := base.Credentials, aws.CredentialsProvider(nil)
		if acct.RoleARN != "" {
			stsClient := sts.NewFromConfig(base, func(o *sts.Options) {
				o.Region, o.Retryer, o.APIOptions = regions[0], newRetryer(), apiOptions
				setEndpoint(&o.BaseEndpoint, cfg.STSEndpoint)
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
			targets = append(targets, &target{
				account: acct, region: region, creds: assumed,
				client: eks.NewFromConfig(cc, func(o *eks.Options) { setEndpoint(&o.BaseEndpoint, cfg.Endpoint) }),
				tagging: resourcegroupstaggingapi.NewFromConfig(cc, func(o *resourcegroupstaggingapi.Options) {
					setEndpoint(&o.BaseEndpoint, cfg.TaggingEndpoint)
				}),
			})
		}
	}
	return targets
}

// setEndpoint overrides an SDK BaseEndpoint with e, when set.
func setEndpoint(base **string, e string) {
	if e != "" {
		*base = aws.String(e)
	}
}

// listNames pages through ListClusters. A token seen before is an error
// rather than the end: stopping there would be a partial listing.
func (s *Source) listNames(ctx context.Context, t *target) ([]string, error) {
	p := eks.NewListClustersPaginator(t.client, &eks.ListClustersInput{MaxResults: aws.Int32(100)})
	var names []string
	seen, tokens := map[string]bool{}, map[string]bool{}
	for p.HasMorePages() {
		page, err := nextPage(ctx, s, p.NextPage)
		if err != nil {
			return nil, err
		}
		for _, n := range page.Clusters {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
		if err := once(tokens, aws.ToString(page.NextToken), "nextToken"); err != nil {
			return nil, err
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
		page, err := nextPage(ctx, s, p.NextPage)
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
		if err := once(tokens, aws.ToString(page.PaginationToken), "PaginationToken"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// nextPage fetches a paginator's next page within the bound on calls in
// flight.
func nextPage[Out, Opt any](ctx context.Context, s *Source, next func(context.Context, ...Opt) (*Out, error)) (*Out, error) {
	release, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return next(ctx)
}

// once records a page token and fails on one seen before (an empty token
// ends the listing and is not recorded).
func once(seen map[string]bool, token, name string) error {
	if token == "" {
		return nil
	}
	if seen[token] {
		return &upstream.Error{Kind: upstream.KindInvalidResponse, Msg: name + " of an earlier page returned again"}
	}
	seen[token] = true
	return nil
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
		return nil, &upstream.Error{Kind: upstream.KindInvalidResponse, Msg: "answer has no cluster"}
	}
	if out.Cluster.Name == nil {
		out.Cluster.Name = aws.String(name)
	}
	return out.Cluster, nil
}

// acquire takes one of the calls in flight; release gives it back.
func (s *Source) acquire(ctx context.Context) (release func(), err error) {
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
