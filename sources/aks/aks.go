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
// absent from the listing; ClustersAndAccounts tells the inventory which
// subscriptions a listing covered, and it holds the departure of clusters
// whose subscription went out of sight until an operator confirms it.
// Clusters of a subscription whose state is not Enabled carry it in the
// annotation AnnotationSubscriptionState. A state not known here is listed,
// its clusters' phases unchanged. Warned and Disabled subscriptions allow
// only GET and DELETE, so listClusterUserCredential (a POST) may fail there:
// a cluster keeps its cached CA, expired or not, and one never read is not
// ready.
//
// Clusters are left out only by the configured filters (resource group,
// tags, privateEndpoints policy) and when they have no Microsoft Entra ID
// integration (aadProfile): Argo CD reaches them with
// `argocd-k8s-auth azure`, whose Entra ID token such a cluster does not
// accept. The token is for the tenant and server application of each
// cluster's aadProfile (identityOf); a cluster whose aadProfile cannot
// name them is listed not ready. The identity needs Reader on the
// subscriptions and
// Microsoft.ContainerService/managedClusters/listClusterUserCredential/action
// on the clusters; nothing is ever written to Azure.
package aks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// Provider is the aks provider's registration.
type Provider struct{}

var (
	_ sources.Registration   = Provider{}
	_ sources.ProviderConfig = (*Config)(nil)
	_ sources.Deprecations   = (*Config)(nil)
	_ sources.Source         = (*Source)(nil)
)

// Name returns sources.ProviderAKS.
func (Provider) Name() sources.Provider { return sources.ProviderAKS }

// Kind returns sources.KindCloud: Azure is where the clusters run.
func (Provider) Kind() sources.Kind { return sources.KindCloud }

// NewConfig returns an empty aks section.
func (Provider) NewConfig() sources.ProviderConfig { return &Config{} }

// Source lists AKS clusters.
type Source struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	mapper  *mapper
	client  *armClient
	now     func() time.Time

	mu  sync.Mutex
	cas map[string]caEntry // by lower-cased resource id
}

// NewSource builds the source of a section that Default and Validate
// passed. It makes no call to Azure.
func (c *Config) NewSource(opts sources.SourceOptions) (sources.Source, error) {
	s, err := newSource(*c, opts, azurearm.Hooks{})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// newSource is NewSource with the hooks tests set.
func newSource(cfg Config, opts sources.SourceOptions, h azurearm.Hooks) (*Source, error) {
	if opts.Name == "" {
		return nil, errors.New("aks source: no name")
	}
	if errs := cfg.Validate(field.NewPath("aks")); len(errs) > 0 {
		return nil, fmt.Errorf("aks source %s: %w", opts.Name, errs.ToAggregate())
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	mp, err := newMapper(cfg, log)
	if err != nil {
		return nil, err
	}
	client, err := newARMClient(&cfg, h, m.Metrics)
	if err != nil {
		return nil, err
	}
	return &Source{
		cfg: cfg, log: log, metrics: m, mapper: mp, client: client,
		now: time.Now,
		cas: map[string]caEntry{},
	}, nil
}

// Clusters lists the clusters of every subscription. It returns an error,
// and no cluster, when any subscription or page cannot be listed; the
// error's chain holds an *upstream.Error with its kind and operation.
func (s *Source) Clusters(ctx context.Context) ([]sources.Cluster, error) {
	out, _, err := s.ClustersAndAccounts(ctx)
	return out, err
}

// ClustersAndAccounts is Clusters with the resource groups the listing
// covered, as scopes (azurearm.Scopes), so that the inventory can tell a
// cluster deleted from one whose subscription or resource group went out
// of sight (sources.AccountLister).
func (s *Source) ClustersAndAccounts(ctx context.Context) ([]sources.Cluster, []string, error) {
	defer s.metrics.Observe(time.Now())
	out, subs, err := s.list(ctx)
	var scopes []string
	if err == nil {
		scopes, err = s.client.Scopes(ctx, subs, s.cfg.Concurrency)
	}
	if err != nil {
		s.metrics.Failed(err)
		return nil, nil, err
	}
	return out, scopes, nil
}

func (s *Source) list(ctx context.Context) ([]sources.Cluster, []azurearm.Subscription, error) {
	subs, err := s.client.Subscriptions(ctx, s.cfg.Subscriptions, s.log)
	if err != nil {
		return nil, nil, err
	}
	perSub, err := azurearm.EachSubscription(ctx, s.log, subs, s.cfg.Concurrency, s.listSubscription)
	if err != nil {
		return nil, nil, err
	}
	listed, n := azurearm.Kept(s.log, perSub, (*mapped).about)
	err = azurearm.Parallel(ctx, len(listed), s.cfg.Concurrency, func(ctx context.Context, i int) error {
		if !listed[i].needCA {
			return nil
		}
		return s.resolveCA(ctx, listed[i])
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read cluster CAs: %w", &upstream.Error{Kind: azurearm.Classify(err), Operation: opCredentials, Err: err})
	}
	return s.finish(listed, n, subs), subs, nil
}

// finish turns a complete listing into the result: it warns about names
// listed twice, forgets what left, and sets the per-listing gauges.
func (s *Source) finish(listed []*mapped, n azurearm.Counts, subs []azurearm.Subscription) []sources.Cluster {
	out := make([]sources.Cluster, 0, len(listed))
	ids := make(map[string]bool, len(listed))
	byName := map[string]string{}
	notReady := map[string]int{notReadyCA: 0, notReadyScope: 0, notReadyServer: 0, notReadyAAD: 0}
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
	s.forgetCAs(ids)
	s.client.clusters.Forget(subs)
	// clusters_not_ready by reason kind (ca_unavailable, invalid_scope,
	// invalid_server, invalid_aad_profile, invalid_name), never by the
	// cluster's reason, which quotes ARM's error messages
	azurearm.SetListed(s.metrics.Metrics, out, notReady, n)
	sources.SortByName(out)
	return out
}

// listSubscription lists and maps the clusters of one subscription and
// adjusts them to the subscription's state.
func (s *Source) listSubscription(ctx context.Context, sub azurearm.Subscription) ([]mapped, error) {
	var out []mapped
	err := s.client.listClusters(ctx, sub.ID, func(mc *armcontainerservice.ManagedCluster) error {
		m, err := s.mapper.toCluster(sub.ID, mc)
		if err != nil {
			return azurearm.Malformed(opClusters, err)
		}
		if m.skip == "" {
			sub.Mark(&m.cluster, AnnotationSubscriptionState)
		}
		out = append(out, m)
		return nil
	})
	return out, err
}
