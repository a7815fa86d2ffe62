package aro

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redhatopenshift/armredhatopenshift"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// clientHooks replace what the source would build itself; only tests set
// them.
type clientHooks struct {
	// credential replaces the workload identity / default chain.
	credential azcore.TokenCredential
	// options are the base ARM client options (a fake transport, or an
	// httptest endpoint through Cloud). The source always disables
	// resource provider registration, which would write to the
	// subscriptions, and adds its request counter.
	options *arm.ClientOptions
}

// armClient is the part of Azure Resource Manager the source calls: the
// subscription list and one paged OpenShift cluster list per
// subscription. Every call is a GET: the credential actions
// (listCredentials, listAdminCredentials) hand out admin material and are
// never called.
type armClient struct {
	cred azcore.TokenCredential
	opts *arm.ClientOptions
	subs *armsubscriptions.Client // nil with configured subscriptions

	mu       sync.Mutex
	clusters map[string]*armredhatopenshift.OpenShiftClustersClient // by subscription
}

// newARMClient builds the clients; it makes no call to Azure.
func newARMClient(cfg *Config, h clientHooks, m *upstream.Metrics) (*armClient, error) {
	c := &armClient{
		cred:     h.credential,
		opts:     armOptions(cfg, h.options, m),
		clusters: map[string]*armredhatopenshift.OpenShiftClustersClient{},
	}
	var err error
	if c.cred == nil {
		if c.cred, err = newCredential(cfg, c.opts.Cloud); err != nil {
			return nil, err
		}
	}
	c.cred = classifiedCredential{c.cred}
	if len(cfg.Subscriptions) == 0 {
		if c.subs, err = armsubscriptions.NewClient(c.cred, c.opts); err != nil {
			return nil, fmt.Errorf("subscriptions client: %w", err)
		}
	}
	return c, nil
}

// armOptions derives the client options every client of the source uses.
func armOptions(cfg *Config, base *arm.ClientOptions, m *upstream.Metrics) *arm.ClientOptions {
	o := &arm.ClientOptions{}
	if base != nil {
		o = base.Clone()
	}
	if o.Cloud.Services == nil && o.Cloud.ActiveDirectoryAuthorityHost == "" {
		o.Cloud = clouds[cfg.Cloud]
	}
	o.Cloud.Services = maps.Clone(o.Cloud.Services)
	if cfg.ARMEndpoint != "" {
		if o.Cloud.Services == nil {
			o.Cloud.Services = map[cloud.ServiceName]cloud.ServiceConfiguration{}
		}
		rm := o.Cloud.Services[cloud.ResourceManager]
		rm.Endpoint = cfg.ARMEndpoint
		o.Cloud.Services[cloud.ResourceManager] = rm
	}
	o.DisableRPRegistration = true
	o.PerRetryPolicies = append(slices.Clone(o.PerRetryPolicies), policy.Policy(countingPolicy{m}))
	return o
}

// newCredential chains workload identity (when the webhook's environment
// is there), managed identity with ClientID (when set) and the default
// chain, as the aks provider does. Building them makes no call.
func newCredential(cfg *Config, cl cloud.Configuration) (azcore.TokenCredential, error) {
	co := azcore.ClientOptions{Cloud: cl}
	var chain []azcore.TokenCredential
	if wi, err := azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
		ClientOptions: co, ClientID: cfg.ClientID, TenantID: cfg.TenantID,
	}); err == nil {
		chain = append(chain, wi)
	}
	if cfg.ClientID != "" {
		if mi, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{
			ClientOptions: co, ID: azidentity.ClientID(cfg.ClientID),
		}); err == nil {
			chain = append(chain, mi)
		}
	}
	def, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: co, TenantID: cfg.TenantID})
	if err == nil {
		chain = append(chain, def)
	} else if len(chain) == 0 {
		return nil, fmt.Errorf("azure credential: %w", err)
	}
	return azidentity.NewChainedTokenCredential(chain, nil)
}

// classifiedCredential gives the failures to get a token their kind (see
// tokenKind), so that the listing they fail reports them as such.
type classifiedCredential struct{ azcore.TokenCredential }

func (c classifiedCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tk, err := c.TokenCredential.GetToken(ctx, o)
	if err != nil {
		return tk, &upstream.Error{Kind: tokenKind(err), Err: err}
	}
	return tk, nil
}

// listSubscriptions calls each on every subscription the identity can
// see. A failure is an *upstream.Error of subscriptions.list.
func (c *armClient) listSubscriptions(ctx context.Context, each func(*armsubscriptions.Subscription) error) error {
	return walk(ctx, opSubscriptions, c.subs.NewListPager(nil),
		func(p armsubscriptions.ClientListResponse) ([]*armsubscriptions.Subscription, *string) {
			return p.Value, p.NextLink
		},
		each)
}

// listClusters calls each on every OpenShift cluster of subscription sub,
// draining the pager to its last page (the resource provider pages at 10).
// A failure is an *upstream.Error of openShiftClusters.list.
func (c *armClient) listClusters(ctx context.Context, sub string, each func(*armredhatopenshift.OpenShiftCluster) error) error {
	client, err := c.clustersClient(sub)
	if err != nil {
		return &upstream.Error{Kind: upstream.KindConfig, Operation: opClusters, Err: err}
	}
	return walk(ctx, opClusters, client.NewListPager(nil),
		func(p armredhatopenshift.OpenShiftClustersClientListResponse) ([]*armredhatopenshift.OpenShiftCluster, *string) {
			return p.Value, p.NextLink
		},
		each)
}

// walk calls each on every item of every page of p, following nextLink
// through the SDK pager. A page the SDK cannot fetch comes back classified
// and described in one line (see callError); a nextLink that repeats,
// which would loop, is a malformed response.
func walk[P, T any](ctx context.Context, op string, p *runtime.Pager[P], items func(P) ([]*T, *string), each func(*T) error) error {
	seen := map[string]bool{}
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return callError(op, err)
		}
		list, next := items(page)
		if next != nil && *next != "" {
			if seen[*next] {
				return malformed(op, errors.New("nextLink repeats"))
			}
			seen[*next] = true
		}
		for _, item := range list {
			if err := each(item); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *armClient) clustersClient(sub string) (*armredhatopenshift.OpenShiftClustersClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if oc, ok := c.clusters[sub]; ok {
		return oc, nil
	}
	oc, err := armredhatopenshift.NewOpenShiftClustersClient(sub, c.cred, c.opts)
	if err != nil {
		return nil, err
	}
	c.clusters[sub] = oc
	return oc, nil
}

// forgetSubscriptions drops the clients of subscriptions no longer listed.
func (c *armClient) forgetSubscriptions(subs []subscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for sub := range c.clusters {
		if !slices.ContainsFunc(subs, func(o subscription) bool { return o.id == sub }) {
			delete(c.clusters, sub)
		}
	}
}
