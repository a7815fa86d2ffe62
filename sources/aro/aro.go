// Package aro is a source of Azure Red Hat OpenShift clusters, discovered
// through Azure Resource Manager in a list of subscriptions or in every
// subscription the service's identity can see, and reached by Argo CD with
// a bearer token an operator binds to each cluster.
//
// One listing is: the token Secrets bound to the provider's clusters
// (sources.TokenBindings, metadata only, one list), the subscriptions
// (unless configured), and one paged list of
// Microsoft.RedHatOpenShift/openShiftClusters per subscription
// (api-version 2023-11-22, drained to its last page: the resource
// provider pages at 10). Any failed list fails the whole listing. Nothing
// else is called: listCredentials and listAdminCredentials hand out admin
// material (the kubeadmin password, a system:admin client certificate) and
// are never called, so the identity needs Reader only.
//
// # Cluster lifecycle
//
// Every cluster is listed whatever its state. Its
// properties.provisioningState is Cluster.State, verbatim, and Cluster.ID
// is its ARM resource id, lower-cased. The phase comes from
// provisioningState and whether the cluster reports an API server URL
// (phaseOf), compared case-insensitively:
//
//	provisioningState   API URL   phase
//	Creating            any       pending
//	Succeeded           any       ready
//	Updating            any       degraded
//	AdminUpdating       any       degraded
//	Canceled            any       degraded
//	Failed              yes       degraded (a failed operation on a cluster that ran)
//	Failed              no        pending (a failed creation)
//	Deleting            any       leaving
//	anything else       any       degraded
//
// Sources, as gathered in the project's cluster-states notes (section 4,
// Azure Red Hat OpenShift): armredhatopenshift v1.6.0 ProvisioningState
// (AdminUpdating, Canceled, Creating, Deleting, Failed, Succeeded,
// Updating) and the state-machine comment of ARO-RP pkg/api/openshiftcluster.go:
// AdminUpdating is an SRE update that always returns to the previous
// state; Canceled is "currently unused in ARO"; Failed is terminal, and a
// failed creation has no remedy but deletion; a deleting cluster stays in
// the list until its deletion has finished. ARO-RP's internal Maintenance
// state, like any value not known here, is degraded. Ready says only
// whether the cluster can be rendered: a cluster without an API URL is
// listed not ready whatever its phase.
//
// Subscriptions are handled as by the aks provider: discovered ones are
// listed when Enabled, PastDue or Warned, and when Disabled (GET still
// works, but resources are deallocated: every cluster is degraded unless
// leaving); Deleted ones are not listed; ClustersAndAccounts tells the
// inventory which subscriptions a listing covered, so that the departure
// of the clusters of a subscription that went out of sight is held until
// an operator confirms it.
//
// # Credentials
//
// An ARO API server does not accept Microsoft Entra ID tokens, so
// argocd-k8s-auth azure cannot reach it. Each cluster's Secret carries a
// bearer token (a ServiceAccount token of the cluster) from a Secret an
// operator creates in Argo CD's namespace and binds to the cluster
// (sources.LabelTokenBinding = aro, sources.AnnotationTokenBinding = its
// ARM resource id). A cluster with no bound Secret, or more than one, is
// listed not ready with the reason. The CA: none for a cluster on a
// managed domain (ManagedDomains, by default .aroapp.io: the certificate
// is publicly trusted), the configured one for a custom domain, or not
// ready.
package aro

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redhatopenshift/armredhatopenshift"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// Provider is the aro provider's registration.
type Provider struct{}

var (
	_ sources.Registration   = Provider{}
	_ sources.Schema         = Provider{}
	_ sources.ProviderConfig = (*Config)(nil)
	_ sources.AccountLister  = (*Source)(nil)
)

// Name returns sources.ProviderARO.
func (Provider) Name() sources.Provider { return sources.ProviderARO }

// Kind returns sources.KindCloud: Azure is where the clusters run.
func (Provider) Kind() sources.Kind { return sources.KindCloud }

// NewConfig returns an empty aro section.
func (Provider) NewConfig() sources.ProviderConfig { return &Config{} }

// Source lists ARO clusters.
type Source struct {
	cfg      Config
	log      *slog.Logger
	metrics  *metrics
	mapper   *mapper
	client   *armClient
	bindings sources.TokenBindings
	agents   sources.Agents
}

// errNoKubernetes is NewSource's error without token bindings.
var errNoKubernetes = errors.New("the aro provider needs the Kubernetes API to find the token Secrets or the agents bound to its clusters " +
	"(secrets.kubeconfig, or running in a cluster)")

// NewSource builds the source of a section that Default and Validate
// passed. It reads the configured CA files and makes no call to Azure or
// to Kubernetes.
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
		return nil, errors.New("aro source: no name")
	}
	if errs := cfg.Validate(field.NewPath("aro")); len(errs) > 0 {
		return nil, fmt.Errorf("aro source %s: %w", opts.Name, errs.ToAggregate())
	}
	if opts.TokenBindings == nil || cfg.Auth == AuthAgent && opts.Agents == nil {
		return nil, fmt.Errorf("aro source %s: %w", opts.Name, errNoKubernetes)
	}
	if err := loadTrust(&cfg).err(); err != nil {
		return nil, fmt.Errorf("aro source %s: %w", opts.Name, err)
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
	return &Source{cfg: cfg, log: log, metrics: m, mapper: mp, client: client, bindings: opts.TokenBindings, agents: opts.Agents}, nil
}

// Clusters lists the clusters of every subscription. It returns an error,
// and no cluster, when the token bindings, a subscription or a page
// cannot be listed; the error's chain holds an *upstream.Error with its
// kind and operation.
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
		if upstream.OperationOf(err) == "" {
			err = &upstream.Error{Kind: azurearm.Classify(err), Operation: opClusters, Err: err}
		}
		s.metrics.Failed(err)
		return nil, nil, err
	}
	return out, scopes, nil
}

func (s *Source) list(ctx context.Context) ([]sources.Cluster, []azurearm.Subscription, error) {
	l, err := s.read(ctx)
	if err != nil {
		return nil, nil, err
	}
	subs, err := s.client.Subscriptions(ctx, s.cfg.Subscriptions, s.log)
	if err != nil {
		return nil, nil, err
	}
	perSub, err := azurearm.EachSubscription(ctx, s.log, subs, s.cfg.Concurrency,
		func(ctx context.Context, sub azurearm.Subscription) ([]mapped, error) {
			return s.listSubscription(ctx, sub, l)
		})
	if err != nil {
		return nil, nil, err
	}
	listed, n := azurearm.Kept(s.log, perSub, (*mapped).about)
	return s.finish(listed, n, subs), subs, nil
}

// read reads what the listing's mapping needs from the Kubernetes API:
// the token bindings, or in agent mode the agents' Secrets.
func (s *Source) read(ctx context.Context) (*listing, error) {
	if s.cfg.Auth == AuthAgent {
		agents, err := s.agents.Agents(ctx)
		if err != nil {
			return nil, kubernetesError(opAgents, "agents", err)
		}
		return &listing{agents: sources.IndexAgents(agents)}, nil
	}
	bindings, err := s.bindings.Bound(ctx, sources.ProviderARO)
	if err != nil {
		return nil, kubernetesError(opTokenBindings, "token bindings", err)
	}
	return &listing{bindings: bindings, trust: loadTrust(&s.cfg)}, nil
}

// finish turns a complete listing into the result: clusters whose names
// collide are listed not ready, each naming the others (never one
// silently dropped), clients of subscriptions that left are forgotten,
// and the per-listing gauges are set.
func (s *Source) finish(listed []*mapped, n azurearm.Counts, subs []azurearm.Subscription) []sources.Cluster {
	byName := map[string][]*mapped{}
	for _, m := range listed {
		byName[m.cluster.Name] = append(byName[m.cluster.Name], m)
	}
	notReady := map[string]int{}
	for _, k := range notReadyKinds {
		notReady[k] = 0
	}
	out := make([]sources.Cluster, 0, len(listed))
	for _, m := range listed {
		if same := byName[m.cluster.Name]; len(same) > 1 {
			nameConflict(m, same)
			s.log.Warn("two ARO clusters have the same name; both are listed not ready (set nameTemplate, e.g. \"{{.Name}}-{{.ResourceGroup | lower}}\")",
				"cluster", m.cluster.Name, "resourceID", m.cluster.Annotations[AnnotationResourceID])
		}
		if !m.cluster.Ready {
			notReady[m.notReadyKind]++
		}
		out = append(out, m.cluster)
	}
	s.client.clusters.Forget(subs)
	// clusters_not_ready by reason kind (notReadyKinds), never by the
	// cluster's reason, which quotes resource ids
	azurearm.SetListed(s.metrics.Metrics, out, notReady, n)
	sources.SortByName(out)
	return out
}

// nameConflict lists m, one of the clusters same whose names are one, not
// ready with a reason naming the others' resource ids. A cluster already
// not ready keeps its kind and gets the conflict added to its reason.
func nameConflict(m *mapped, same []*mapped) {
	var others []string
	for _, o := range same {
		if o != m {
			others = append(others, o.cluster.Annotations[AnnotationResourceID])
		}
	}
	slices.Sort(others)
	reason := fmt.Sprintf("name %s is also the name of %s: set nameTemplate (e.g. {{.Name}}-{{.ResourceGroup | lower}}) to tell them apart",
		m.cluster.Name, strings.Join(others, ", "))
	if !m.cluster.Ready {
		m.cluster.NotReadyReason += "; " + reason
		return
	}
	m.cluster.Ready, m.cluster.NotReadyReason, m.notReadyKind = false, reason, notReadyConflict
}

// listSubscription lists and maps the clusters of one subscription with
// what the listing read (l), and adjusts them to the subscription's
// state.
func (s *Source) listSubscription(ctx context.Context, sub azurearm.Subscription, l *listing) ([]mapped, error) {
	var out []mapped
	err := s.client.listClusters(ctx, sub.ID, func(oc *armredhatopenshift.OpenShiftCluster) error {
		m, err := s.mapper.toCluster(sub.ID, oc, l)
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
