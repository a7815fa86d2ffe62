// Package aks is a source of Azure Kubernetes Service clusters, discovered
// through Azure Resource Manager in a list of subscriptions or in every
// subscription the service's identity can see.
//
// One listing is: the subscriptions (unless configured), one paged list of
// managed clusters per subscription, and, for each cluster whose CA is not
// cached, one listClusterUserCredential call whose kubeconfig gives the CA.
// Any failed list call fails the whole listing. A cluster whose CA cannot
// be read is listed as not ready instead, so that its Secret is neither
// created without a CA nor pruned.
//
// # Cluster lifecycle
//
// Every cluster is listed whatever its state: a cluster never leaves the
// listing because it is upgrading, stopped or failed an operation. Its
// properties.provisioningState is Cluster.State, verbatim, and Cluster.ID
// is its ARM resource id, lower-cased. The phase comes from
// provisioningState, powerState.code and whether the cluster reports an API
// server FQDN (phaseOf), compared case-insensitively:
//
//	provisioningState     powerState   FQDN   phase
//	Creating              any          any    pending
//	Succeeded             Running      any    ready
//	Succeeded             Stopped      any    degraded
//	Succeeded             other/none   any    degraded
//	Updating, Upgrading,  any          any    degraded
//	Scaling, Starting,
//	Stopping, Canceling,
//	Canceled, Migrating,
//	Reconciling
//	Failed                any          yes    degraded (a failed operation on a cluster that ran)
//	Failed                any          no     pending (a failed creation)
//	Deleting              any          any    leaving
//	anything else         any          any    degraded
//
// Sources, as gathered in the project's cluster-states notes (section 3,
// Azure AKS): armcontainerservice v8.2.0, where provisioningState is a
// plain string with no enum and powerState.code is Running or Stopped;
// azure-aks-docs list-aks-clusters.md (Creating; Succeeded "doesn't
// indicate whether the cluster is running because a stopped cluster can
// also have a successful provisioning state"), start-stop-cluster.md
// (Starting, Stopping; a stop deallocates the control plane),
// manage-abort-operations.md (Canceling, Canceled), scale-node-pools.md
// (Scaling); SupportArticles-docs operationnotallowed.md (Updating,
// Deleting) and upgrading-or-scaling-does-not-succeed.md (Upgrading,
// Failed); Azure/AKS#244, #671 and #3231 (a Failed cluster that ran still
// serves workloads) and #1972 (a failed initial provisioning stays Failed);
// aks-operator ClusterStatusDeleting. Migrating and Reconciling were found
// in no source and are treated, like any unknown value, as an operation on
// the same cluster. Ready says only whether the cluster can be rendered: a
// cluster without an FQDN is listed not ready whatever its phase.
//
// Discovered subscriptions (armsubscriptions v1.3.0 SubscriptionState;
// learn.microsoft.com cost-management-billing subscription-states) are
// listed when Enabled, PastDue or Warned (their resources run; phases as
// above) and when Disabled (GET still works, but resources are deallocated:
// every cluster is degraded unless leaving). Deleted subscriptions are not
// listed, and a subscription that drops out of the list makes its clusters
// absent from the listing; the inventory decides when they have left.
// Clusters of a subscription whose state is not Enabled carry it in the
// annotation AnnotationSubscriptionState. A state not known here is listed,
// its clusters' phases unchanged. Warned and Disabled subscriptions allow
// only GET and DELETE, so listClusterUserCredential (a POST) may fail there:
// a cluster keeps its cached CA, expired or not, and one never read is not
// ready.
//
// Clusters are left out only by the configured filters (resource group,
// tags, private cluster policy) and when they have no Microsoft Entra ID
// integration (aadProfile): Argo CD reaches them with
// `argocd-k8s-auth azure`, whose Entra ID token such a cluster does not
// accept. The identity needs Reader on the subscriptions and
// Microsoft.ContainerService/managedClusters/listClusterUserCredential/action
// on the clusters; nothing is ever written to Azure.
package aks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Options are the dependencies of a Source; every field is optional.
type Options struct {
	Logger *slog.Logger
	// Registerer receives the source's metrics (fixed names
	// argocd_cluster_discovery_aks_*); the caller adds the source label.
	// nil registers nothing.
	Registerer prometheus.Registerer
	// Credential replaces the workload identity / default chain (tests).
	Credential azcore.TokenCredential
	// ClientOptions are the base ARM client options (tests: a fake
	// transport, or an httptest endpoint through Cloud). The source always
	// disables resource provider registration, which would write to the
	// subscriptions, and adds its request counter.
	ClientOptions *arm.ClientOptions
}

// Source lists AKS clusters.
type Source struct {
	name    string
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	mapper  *mapper
	cred    azcore.TokenCredential
	armOpts *arm.ClientOptions
	subs    *armsubscriptions.Client // nil with configured subscriptions
	now     func() time.Time

	caTTL, caErrorTTL time.Duration

	mu      sync.Mutex
	clients map[string]*armcontainerservice.ManagedClustersClient
	cas     map[string]caEntry
}

var _ sources.Source = (*Source)(nil)

// New applies defaults to cfg, validates it and builds the clients. It
// makes no call to Azure.
func New(name string, cfg Config, opts Options) (*Source, error) {
	if name == "" {
		return nil, errors.New("aks source: no name")
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("source", name)
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	mp, err := newMapper(cfg, log)
	if err != nil {
		return nil, err
	}
	s := &Source{
		name: name, cfg: cfg, log: log, metrics: m, mapper: mp,
		armOpts: armOptions(cfg, opts.ClientOptions, m),
		cred:    opts.Credential,
		now:     time.Now,
		clients: map[string]*armcontainerservice.ManagedClustersClient{},
		cas:     map[string]caEntry{},
	}
	s.caTTL, s.caErrorTTL, _ = cfg.ttls() // validated above
	if s.cred == nil {
		if s.cred, err = newCredential(cfg, s.armOpts.Cloud); err != nil {
			return nil, err
		}
	}
	if len(cfg.Subscriptions) == 0 {
		if s.subs, err = armsubscriptions.NewClient(s.cred, s.armOpts); err != nil {
			return nil, fmt.Errorf("subscriptions client: %w", err)
		}
	}
	return s, nil
}

// armOptions derives the client options every client of the source uses.
func armOptions(cfg Config, base *arm.ClientOptions, m *metrics) *arm.ClientOptions {
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
// chain. Building them makes no call.
func newCredential(cfg Config, cl cloud.Configuration) (azcore.TokenCredential, error) {
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

// Clusters lists the clusters of every subscription. It returns an error,
// and no cluster, when any subscription or page cannot be listed.
func (s *Source) Clusters(ctx context.Context) ([]sources.Cluster, error) {
	start := time.Now()
	defer func() { s.metrics.duration.Observe(time.Since(start).Seconds()) }()
	out, err := s.list(ctx)
	if err != nil {
		var le *listError
		if errors.As(err, &le) && ctx.Err() == nil {
			s.metrics.errors.WithLabelValues(le.kind, le.subscription).Inc()
		}
		return nil, err
	}
	return out, nil
}

func (s *Source) list(ctx context.Context) ([]sources.Cluster, error) {
	subs, err := s.subscriptions(ctx)
	if err != nil {
		return nil, err
	}
	perSub := make([][]mapped, len(subs))
	err = parallel(ctx, len(subs), s.cfg.Concurrency, func(ctx context.Context, i int) error {
		var err error
		perSub[i], err = s.listSubscription(ctx, subs[i])
		return err
	})
	if err != nil {
		return nil, err
	}

	var listed []*mapped
	skipped := map[skipReason]int{}
	for _, ms := range perSub {
		for i := range ms {
			m := &ms[i]
			if m.skip != "" {
				skipped[m.skip]++
				s.log.Debug("cluster skipped", "cluster", m.azureName, "resourceGroup", m.resourceGroup,
					"subscription", m.subscription, "reason", string(m.skip), "detail", m.detail)
				continue
			}
			listed = append(listed, m)
		}
	}
	err = parallel(ctx, len(listed), s.cfg.Concurrency, func(ctx context.Context, i int) error {
		if !listed[i].needCA {
			return nil
		}
		return s.resolveCA(ctx, listed[i])
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("read cluster CAs: %w", err)
	}

	return s.finish(listed, skipped, subs), nil
}

// finish turns a complete listing into the result: it warns about names
// listed twice, forgets what left, and sets the per-listing gauges.
func (s *Source) finish(listed []*mapped, skipped map[skipReason]int, subs []subscription) []sources.Cluster {
	out := make([]sources.Cluster, 0, len(listed))
	ids := make(map[string]bool, len(listed))
	byName := map[string]string{}
	notReady := map[string]int{notReadyCA: 0, notReadyScope: 0, notReadyServer: 0}
	for _, m := range listed {
		ids[m.id] = true
		rid := m.cluster.Annotations[AnnotationResourceID]
		if other, dup := byName[m.cluster.Name]; dup {
			s.log.Warn("two AKS clusters have the same name; the inventory serves neither (set nameTemplate, e.g. \"{{.Name}}-{{.ResourceGroup | lower}}\")",
				"cluster", m.cluster.Name, "resourceID", rid, "otherResourceID", other)
		}
		byName[m.cluster.Name] = rid
		if !m.cluster.Ready {
			notReady[m.notReadyKind]++
		}
		out = append(out, m.cluster)
	}
	s.forget(ids, subs)
	for r, n := range notReady {
		s.metrics.notReady.WithLabelValues(r).Set(float64(n))
	}
	s.metrics.skipped.Reset()
	for r, n := range skipped {
		s.metrics.skipped.WithLabelValues(string(r)).Set(float64(n))
	}
	sources.SortByName(out)
	return out
}

// subscription is one subscription to list: its lower-cased id and, when
// subscriptions are discovered, its state (empty when configured).
type subscription struct {
	id    string
	state armsubscriptions.SubscriptionState
}

// subscriptions returns the configured subscriptions, or every one the
// identity can see except Deleted ones: Enabled, PastDue and Warned
// subscriptions run their resources, and a Disabled one still answers GET,
// its clusters listed as degraded (see inSubscription). A state this
// package does not know is listed too: listing is only a GET, and leaving
// its clusters out would make them look gone.
//
// A subscription that drops out of the list makes its clusters absent from
// the listing, nothing more; the inventory decides when they have left.
// None visible at all is an error: an identity that lost its role
// assignments must not make every cluster disappear.
func (s *Source) subscriptions(ctx context.Context) ([]subscription, error) {
	if s.subs == nil {
		out := make([]subscription, len(s.cfg.Subscriptions))
		for i, id := range s.cfg.Subscriptions {
			out[i] = subscription{id: strings.ToLower(id)}
		}
		return out, nil
	}
	fail := func(err error) error {
		return &listError{kind: errListSubscriptions, msg: "list subscriptions: " + err.Error(), err: err}
	}
	var out []subscription
	err := walk(ctx, s.subs.NewListPager(nil), func(p armsubscriptions.ClientListResponse) *string { return p.NextLink },
		func(page armsubscriptions.ClientListResponse) error {
			for _, sub := range page.Value {
				if sub == nil || sub.SubscriptionID == nil || !guidRE.MatchString(*sub.SubscriptionID) {
					return errors.New("malformed response: a subscription without a valid subscriptionId")
				}
				id, state := strings.ToLower(*sub.SubscriptionID), deref(sub.State)
				if strings.EqualFold(string(state), string(armsubscriptions.SubscriptionStateDeleted)) {
					s.log.Debug("subscription skipped", "subscription", id, "state", string(state))
					continue
				}
				if !slices.ContainsFunc(out, func(o subscription) bool { return o.id == id }) {
					out = append(out, subscription{id: id, state: state})
				}
			}
			return nil
		})
	if err != nil {
		return nil, fail(err)
	}
	if len(out) == 0 {
		return nil, fail(errors.New("no subscription is visible to the identity (Deleted ones are not listed)"))
	}
	return out, nil
}

// listSubscription lists and maps the clusters of one subscription,
// following nextLink through the SDK pager, and adjusts their phase to the
// subscription's state.
func (s *Source) listSubscription(ctx context.Context, subscr subscription) ([]mapped, error) {
	sub := subscr.id
	flagState := subscr.state != "" && !strings.EqualFold(string(subscr.state), string(armsubscriptions.SubscriptionStateEnabled))
	if flagState {
		s.log.Debug("subscription listed in a state other than Enabled", "subscription", sub, "state", string(subscr.state))
	}
	fail := func(err error) error {
		return &listError{kind: errListClusters, subscription: sub,
			msg: fmt.Sprintf("subscription %s: list clusters: %s", sub, err.Error()), err: err}
	}
	client, err := s.clustersClient(sub)
	if err != nil {
		return nil, fail(err)
	}
	var out []mapped
	err = walk(ctx, client.NewListPager(nil), func(p armcontainerservice.ManagedClustersClientListResponse) *string { return p.NextLink },
		func(page armcontainerservice.ManagedClustersClientListResponse) error {
			for _, mc := range page.Value {
				m, err := s.mapper.mapCluster(sub, mc)
				if err != nil {
					return fmt.Errorf("malformed response: %w", err)
				}
				if m.skip == "" {
					m.cluster.Phase = inSubscription(m.cluster.Phase, subscr.state)
					if flagState {
						m.cluster.Annotations[AnnotationSubscriptionState] = string(subscr.state)
					}
				}
				out = append(out, m)
			}
			return nil
		})
	if err != nil {
		return nil, fail(err)
	}
	return out, nil
}

// walk calls each on every page of p, following nextLink through the SDK
// pager. A page the SDK cannot fetch comes back described in one line (see
// describe); a nextLink that repeats, which would loop, is an error.
func walk[T any](ctx context.Context, p *runtime.Pager[T], nextLink func(T) *string, each func(T) error) error {
	seen := map[string]bool{}
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return &shortError{msg: describe(err), err: err}
		}
		if next := nextLink(page); next != nil && *next != "" {
			if seen[*next] {
				return errors.New("malformed response: nextLink repeats")
			}
			seen[*next] = true
		}
		if err := each(page); err != nil {
			return err
		}
	}
	return nil
}

func (s *Source) clustersClient(sub string) (*armcontainerservice.ManagedClustersClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[sub]; ok {
		return c, nil
	}
	c, err := armcontainerservice.NewManagedClustersClient(sub, s.cred, s.armOpts)
	if err != nil {
		return nil, err
	}
	s.clients[sub] = c
	return c, nil
}

// resolveCA sets the cluster's CA from the cache or from
// listClusterUserCredential. A read that fails keeps the expired CA when
// there is one, and otherwise marks the cluster not ready; failures are
// remembered for caErrorTTL so that a missing permission does not cost a
// call per cluster and listing. It returns an error only when ctx ends.
func (s *Source) resolveCA(ctx context.Context, m *mapped) error {
	now := s.now()
	s.mu.Lock()
	e, cached := s.cas[m.id]
	s.mu.Unlock()
	switch {
	case cached && !e.ca.IsZero() && now.Sub(e.fetched) < caTTL(s.caTTL, m.id):
		s.metrics.caCache.WithLabelValues("hit").Inc()
	case cached && !e.failed.IsZero() && now.Sub(e.failed) < s.caErrorTTL:
		s.metrics.caCache.WithLabelValues("negative").Inc()
	default:
		s.metrics.caCache.WithLabelValues("miss").Inc()
		ca, err := s.fetchCA(ctx, m)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			e = caEntry{ca: ca, fetched: now}
		} else {
			s.metrics.errors.WithLabelValues(errCAFetch, m.subscription).Inc()
			e.failed, e.reason = now, err.Error()
			s.log.Warn("cannot read the cluster's CA", "cluster", m.cluster.Name, "resourceID", m.cluster.Annotations[AnnotationResourceID],
				"error", e.reason, "keptExpiredCA", !e.ca.IsZero())
		}
		s.mu.Lock()
		s.cas[m.id] = e
		s.mu.Unlock()
	}
	if e.ca.IsZero() {
		m.cluster.Ready, m.notReadyKind = false, notReadyCA
		m.cluster.NotReadyReason = "CA unavailable: " + e.reason
		return nil
	}
	m.cluster.CA = e.ca
	return nil
}

func (s *Source) fetchCA(ctx context.Context, m *mapped) (sources.CA, error) {
	client, err := s.clustersClient(m.subscription)
	if err != nil {
		return sources.CA{}, err
	}
	resp, err := client.ListClusterUserCredentials(ctx, m.resourceGroup, m.azureName, nil)
	if err != nil {
		return sources.CA{}, fmt.Errorf("listClusterUserCredential: %s", describe(err))
	}
	ca, err := caFromCredentials(resp.CredentialResults)
	if err != nil {
		return sources.CA{}, fmt.Errorf("listClusterUserCredential: %w", err)
	}
	return ca, nil
}

// forget drops the cached CAs of clusters no longer listed and the clients
// of subscriptions no longer listed.
func (s *Source) forget(ids map[string]bool, subs []subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.cas {
		if !ids[id] {
			delete(s.cas, id)
		}
	}
	for sub := range s.clients {
		if !slices.ContainsFunc(subs, func(o subscription) bool { return o.id == sub }) {
			delete(s.clients, sub)
		}
	}
}

// parallel runs fn(ctx, i) for i in [0, n) with at most limit at once. The
// first error cancels the context of the others and is returned.
func parallel(ctx context.Context, n, limit int, fn func(context.Context, int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i := range n {
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}
