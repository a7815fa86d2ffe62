package azurearm

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
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v3"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// Hooks replace what a source would build itself; only tests set them.
type Hooks struct {
	// Credential replaces the workload identity / default chain.
	Credential azcore.TokenCredential
	// Options are the base ARM client options (a fake transport, or an
	// httptest endpoint through Cloud). The source always disables
	// resource provider registration, which would write to the
	// subscriptions, and adds its request counter.
	Options *arm.ClientOptions
}

// Client is the part of Azure Resource Manager every Azure provider
// calls: the credential and client options its clients share, and the
// subscription list. A provider adds the clients of its own resources
// (Clients).
type Client struct {
	// Cred is the identity's credential; a failure to get a token is an
	// *upstream.Error of its kind (TokenKind).
	Cred azcore.TokenCredential
	// Opts are the options of every client of the source (ClientOptions).
	Opts *arm.ClientOptions
	// Subs lists the subscriptions; nil with configured subscriptions.
	Subs *armsubscriptions.Client
	// groups lists each subscription's resource groups (Scopes).
	groups *Clients[armresources.ResourceGroupsClient]
}

// NewClient builds the client of a source whose identity is id; discover
// says that no subscription is configured, so that they are listed. h
// replaces the credential and the base options in tests; counter is the
// source's request counter (NewCountingPolicy). It makes no call to
// Azure.
func NewClient(id Identity, discover bool, h Hooks, counter policy.Policy) (*Client, error) {
	c := &Client{Cred: h.Credential, Opts: ClientOptions(id, h.Options, counter)}
	var err error
	if c.Cred == nil {
		if c.Cred, err = newCredential(id, c.Opts.Cloud); err != nil {
			return nil, err
		}
	}
	c.Cred = classifiedCredential{c.Cred}
	c.groups = NewClients(c, armresources.NewResourceGroupsClient)
	if discover {
		if c.Subs, err = armsubscriptions.NewClient(c.Cred, c.Opts); err != nil {
			return nil, fmt.Errorf("subscriptions client: %w", err)
		}
	}
	return c, nil
}

// ClientOptions derives the client options every client of a source
// uses from base (nil: the defaults), which it does not modify: id's
// cloud unless base names one, id's Resource Manager endpoint when set,
// resource provider registration disabled (a discovery service never
// writes to a subscription), and counter run per retry.
func ClientOptions(id Identity, base *arm.ClientOptions, counter policy.Policy) *arm.ClientOptions {
	o := &arm.ClientOptions{}
	if base != nil {
		o = base.Clone()
	}
	if o.Cloud.Services == nil && o.Cloud.ActiveDirectoryAuthorityHost == "" {
		o.Cloud, _ = cloudOf(id.Cloud)
	}
	o.Cloud.Services = maps.Clone(o.Cloud.Services)
	if id.ARMEndpoint != "" {
		if o.Cloud.Services == nil {
			o.Cloud.Services = map[cloud.ServiceName]cloud.ServiceConfiguration{}
		}
		rm := o.Cloud.Services[cloud.ResourceManager]
		rm.Endpoint = id.ARMEndpoint
		o.Cloud.Services[cloud.ResourceManager] = rm
	}
	o.DisableRPRegistration = true
	o.PerRetryPolicies = append(slices.Clone(o.PerRetryPolicies), counter)
	return o
}

// newCredential chains workload identity (when the webhook's environment
// is there), managed identity with ClientID (when set) and the default
// chain. Building them makes no call.
func newCredential(id Identity, cl cloud.Configuration) (azcore.TokenCredential, error) {
	co := azcore.ClientOptions{Cloud: cl}
	var chain []azcore.TokenCredential
	if wi, err := azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
		ClientOptions: co, ClientID: id.ClientID, TenantID: id.TenantID,
	}); err == nil {
		chain = append(chain, wi)
	}
	if id.ClientID != "" {
		if mi, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{
			ClientOptions: co, ID: azidentity.ClientID(id.ClientID),
		}); err == nil {
			chain = append(chain, mi)
		}
	}
	def, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: co, TenantID: id.TenantID})
	if err == nil {
		chain = append(chain, def)
	} else if len(chain) == 0 {
		return nil, fmt.Errorf("azure credential: %w", err)
	}
	return azidentity.NewChainedTokenCredential(chain, nil)
}

// classifiedCredential gives the failures to get a token their kind (see
// TokenKind), so that the listing they fail reports them as such.
type classifiedCredential struct{ azcore.TokenCredential }

func (c classifiedCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tk, err := c.TokenCredential.GetToken(ctx, o)
	if err != nil {
		return tk, &upstream.Error{Kind: TokenKind(err), Err: err}
	}
	return tk, nil
}

// Clients holds a provider's client of one resource type per
// subscription, each made on first use with the source's credential and
// options, and dropped when its subscription is no longer listed.
type Clients[C any] struct {
	newClient func(sub string) (*C, error)

	mu    sync.Mutex
	bySub map[string]*C
}

// NewClients returns the clients of c made by newClient, the SDK's
// constructor (e.g. armcontainerservice.NewManagedClustersClient).
func NewClients[C any](c *Client, newClient func(string, azcore.TokenCredential, *arm.ClientOptions) (*C, error)) *Clients[C] {
	return &Clients[C]{
		newClient: func(sub string) (*C, error) { return newClient(sub, c.Cred, c.Opts) },
		bySub:     map[string]*C{},
	}
}

// Get returns the client of subscription sub, made on first use.
func (cs *Clients[C]) Get(sub string) (*C, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.bySub[sub]; ok {
		return c, nil
	}
	c, err := cs.newClient(sub)
	if err != nil {
		return nil, err
	}
	cs.bySub[sub] = c
	return c, nil
}

// Forget drops the clients of subscriptions no longer listed.
func (cs *Clients[C]) Forget(subs []Subscription) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for sub := range cs.bySub {
		if !slices.ContainsFunc(subs, func(o Subscription) bool { return o.ID == sub }) {
			delete(cs.bySub, sub)
		}
	}
}

// Subscriptions returns the subscriptions that have a client, sorted.
func (cs *Clients[C]) Subscriptions() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return slices.Sorted(maps.Keys(cs.bySub))
}

// List calls each on every item of a list of subscription sub: pager
// makes the list's pager from the subscription's client of cs, items
// returns a page's items and nextLink. A client that cannot be made is a
// config error of op; a failed page is as Walk says.
func List[C, P, T any](ctx context.Context, op string, cs *Clients[C], sub string,
	pager func(*C) *runtime.Pager[P], items func(P) ([]*T, *string), each func(*T) error) error {
	client, err := cs.Get(sub)
	if err != nil {
		return &upstream.Error{Kind: upstream.KindConfig, Operation: op, Err: err}
	}
	return Walk(ctx, op, pager(client), items, each)
}

// Walk calls each on every item of every page of p, following nextLink
// through the SDK pager. A page the SDK cannot fetch comes back classified
// and described in one line (see CallError); a nextLink that repeats,
// which would loop, is a malformed response.
func Walk[P, T any](ctx context.Context, op string, p *runtime.Pager[P], items func(P) ([]*T, *string), each func(*T) error) error {
	seen := map[string]bool{}
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return CallError(op, err)
		}
		list, next := items(page)
		if next != nil && *next != "" {
			if seen[*next] {
				return Malformed(op, errors.New("nextLink repeats"))
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
