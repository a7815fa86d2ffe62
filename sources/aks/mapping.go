package aks

import (
	"bytes"
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"text/template"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
)

// Keys this source sets beside the tags. They are outside the
// argocd-cluster-discovery.io/ prefix, which the cluster Secret writer
// reserves for itself, so that they reach the Secrets and Argo CD's
// cluster generator can select on them.
const (
	// LabelResourceGroup holds the cluster's resource group.
	LabelResourceGroup = "aks.argocd-cluster-discovery.io/resource-group"
	// AnnotationResourceID holds the cluster's ARM resource id.
	AnnotationResourceID = "aks.argocd-cluster-discovery.io/resource-id"
	// AnnotationSubscriptionState holds the state of the cluster's
	// subscription (PastDue, Warned, Disabled) when subscriptions are
	// discovered and the state is not Enabled.
	AnnotationSubscriptionState = "aks.argocd-cluster-discovery.io/subscription-state"
)

const managedClusterType = "Microsoft.ContainerService/managedClusters"

// skipReason says why a listed cluster is left out; it is the reason label
// of the skipped-clusters metric.
type skipReason = azurearm.SkipReason

const (
	skipResourceGroup            = azurearm.SkipResourceGroup
	skipTags                     = azurearm.SkipTags
	skipNoAAD         skipReason = "no_aad"
	skipPrivate       skipReason = "private"
)

// Not-ready reasons, the reason label of the not-ready metric.
const (
	notReadyCA     = "ca_unavailable"
	notReadyScope  = "invalid_scope"
	notReadyServer = "invalid_server"
	notReadyAAD    = "invalid_aad_profile"
	notReadyName   = "invalid_name"
)

// mapped is one listed cluster after mapping: either skipped, or a cluster
// for the listing, which may still need its CA.
type mapped struct {
	cluster sources.Cluster
	// id is the lower-cased resource id, the CA cache key.
	id                          string
	subscription, resourceGroup string
	azureName                   string
	// state is the provisioningState ("unknown" when there is none),
	// counted before the filters.
	state        string
	skip         skipReason
	detail       string // why skipped, for the debug log
	needCA       bool
	notReadyKind string
}

// about is what the listing counts and logs of m.
func (m *mapped) about() azurearm.Listed {
	return azurearm.Listed{Subscription: m.subscription, ResourceGroup: m.resourceGroup, Name: m.azureName, State: m.state, Skip: m.skip, Detail: m.detail}
}

// mapper maps ARM managed clusters to the model. It is built once from a
// validated Config and holds no state between listings.
type mapper struct {
	cfg  Config
	name *template.Template
	sel  *azurearm.Selector
}

func newMapper(cfg Config, log *slog.Logger) (*mapper, error) {
	t, err := parseNameTemplate(cfg.NameTemplate)
	if err != nil {
		return nil, fmt.Errorf("nameTemplate: %w", err)
	}
	return &mapper{cfg: cfg, name: t, sel: azurearm.NewSelector(cfg.selection(), log)}, nil
}

// phaseOf maps an AKS cluster's provisioningState and powerState.code to
// its phase, as tabled in the package doc. hasFQDN says whether the cluster
// reports an API server FQDN (public or private), which tells a failed
// operation on a cluster that ran (degraded) from a failed creation
// (pending). Values compare case-insensitively; any value not in the table
// is degraded, never absence.
func phaseOf(provisioningState, powerState string, hasFQDN bool) sources.Phase {
	switch strings.ToLower(provisioningState) {
	case "creating":
		return sources.PhasePending
	case "succeeded":
		if strings.EqualFold(powerState, string(armcontainerservice.CodeRunning)) {
			return sources.PhaseReady
		}
		return sources.PhaseDegraded // Stopped, or a power state not known
	case "failed":
		if hasFQDN {
			return sources.PhaseDegraded
		}
		return sources.PhasePending
	case "deleting":
		return sources.PhaseLeaving
	}
	// Updating, Upgrading, Scaling, Starting, Stopping, Canceling,
	// Canceled, Migrating, Reconciling and anything else: an operation on
	// the same cluster.
	return sources.PhaseDegraded
}

// toCluster maps one cluster of subscription sub. An error means the
// response is malformed and fails the listing; filters set skip instead.
func (m *mapper) toCluster(sub string, mc *armcontainerservice.ManagedCluster) (mapped, error) {
	rid, err := clusterID(sub, mc)
	if err != nil {
		return mapped{}, err
	}
	p := mc.Properties
	if p == nil {
		return mapped{}, fmt.Errorf("cluster %s has no properties", rid.Name)
	}
	out := mapped{
		id: strings.ToLower(*mc.ID), subscription: sub, resourceGroup: rid.ResourceGroupName, azureName: rid.Name,
		state: cmp.Or(azurearm.Deref(p.ProvisioningState), "unknown"),
	}
	tags := azurearm.DerefTags(mc.Tags)
	if out.skip, out.detail = m.filter(rid.ResourceGroupName, tags, p); out.skip != "" {
		return out, nil
	}
	host, private, skip, detail := m.endpoint(p)
	if skip != "" {
		out.skip, out.detail = skip, detail
		return out, nil
	}
	location := strings.ToLower(azurearm.Deref(mc.Location))
	// a name that cannot be rendered (a tag value the template cannot
	// use) lists the cluster not ready under its Azure name, never absent:
	// a served cluster keeps its last rendering, under its last name
	name, nameErr := m.renderName(nameData{
		Name: rid.Name, ResourceGroup: rid.ResourceGroupName, Subscription: sub, Location: location, Tags: tags,
	})
	if nameErr != nil {
		name = rid.Name
	}
	// A cluster whose identity cannot be read gets the configured exec
	// env (id is empty), never a value of its aadProfile.
	id, idReason := identityOf(p.AADProfile)
	out.cluster = m.newCluster(name, sub, location, rid, mc, tags, id)
	if private {
		out.cluster.ProxyURL = m.cfg.PrivateEndpoints.ProxyURL
	}
	notReady := func(kind, reason string) (mapped, error) {
		out.cluster.Ready, out.cluster.NotReadyReason, out.notReadyKind = false, reason, kind
		return out, nil
	}
	if nameErr != nil {
		return notReady(notReadyName, nameErr.Error())
	}
	if host == "" {
		return notReady(notReadyServer, cmp.Or(detail, "the cluster reports no API server FQDN"))
	}
	srv, err := sources.NormalizeServer("https://" + host + ":443")
	if err != nil {
		return notReady(notReadyServer, "API server FQDN: "+err.Error())
	}
	out.cluster.Server = srv
	if idReason != "" {
		return notReady(notReadyAAD, idReason)
	}
	if reason := m.sel.Scope(&out.cluster, tags); reason != "" {
		return notReady(notReadyScope, reason)
	}
	out.needCA = true
	return out, nil
}

// clusterID parses the resource id of a cluster listed in subscription
// sub; an error means a malformed response.
func clusterID(sub string, mc *armcontainerservice.ManagedCluster) (*arm.ResourceID, error) {
	var id *string
	if mc != nil {
		id = mc.ID
	}
	return azurearm.ClusterID(sub, id, managedClusterType, "a managed cluster")
}

// filter returns why the configured filters, or a missing Entra ID
// integration, leave a cluster out; "" keeps it.
func (m *mapper) filter(rg string, tags map[string]string, p *armcontainerservice.ManagedClusterProperties) (skipReason, string) {
	if skip, detail := m.sel.Skip(rg, tags); skip != "" {
		return skip, detail
	}
	if p.AADProfile == nil {
		// argocd-k8s-auth azure gets Entra ID tokens, which a cluster
		// without Entra ID integration does not accept.
		return skipNoAAD, "no aadProfile"
	}
	return "", ""
}

// endpoint returns the API server host Argo CD is to use and whether the
// cluster is private, or why the privateEndpoints policy leaves it out. A
// private cluster the policy keeps but whose endpoint is missing has no
// host, and detail says why: it is listed not ready, never absent.
func (m *mapper) endpoint(p *armcontainerservice.ManagedClusterProperties) (host string, private bool, skip skipReason, detail string) {
	host = azurearm.Deref(p.Fqdn)
	ap := p.APIServerAccessProfile
	if ap == nil || !azurearm.Deref(ap.EnablePrivateCluster) {
		return host, false, "", ""
	}
	switch m.cfg.PrivateEndpoints.Policy {
	case PrivateFQDN:
		if host = azurearm.Deref(p.PrivateFQDN); host == "" {
			return "", true, "", "the private cluster reports no privateFQDN"
		}
	case PrivatePublicFQDN:
		if !azurearm.Deref(ap.EnablePrivateClusterPublicFQDN) || host == "" {
			return "", true, "", "the private cluster has no public FQDN (enablePrivateClusterPublicFQDN is off)"
		}
	default:
		return "", true, skipPrivate, "private cluster"
	}
	return host, true, "", ""
}

// newCluster is the model of a cluster the filters kept, without its
// server, scope and CA; its exec env is the configured one with the
// cluster's Entra ID identity id.
func (m *mapper) newCluster(name, sub, location string, rid *arm.ResourceID, mc *armcontainerservice.ManagedCluster,
	tags map[string]string, id aadIdentity) sources.Cluster {
	p := mc.Properties
	powState := ""
	if p.PowerState != nil && p.PowerState.Code != nil {
		powState = string(*p.PowerState.Code)
	}
	c := sources.Cluster{
		Provider:          sources.ProviderAKS,
		Name:              name,
		ID:                strings.ToLower(*mc.ID),
		Auth:              sources.Auth{Kind: sources.AuthExec, Exec: m.cfg.Auth.execProvider(id)},
		CloudID:           sources.AKSCloudID(sub, rid.ResourceGroupName, rid.Name),
		Labels:            m.sel.Labels(tags, rid.Name),
		Annotations:       map[string]string{AnnotationResourceID: *mc.ID},
		Region:            location,
		Account:           sub,
		Group:             rid.ResourceGroupName,
		KubernetesVersion: kubernetesVersion(p),
		State:             azurearm.Deref(p.ProvisioningState),
		Phase:             phaseOf(azurearm.Deref(p.ProvisioningState), powState, azurearm.Deref(p.Fqdn) != "" || azurearm.Deref(p.PrivateFQDN) != ""),
		Ready:             true,
	}
	if v, ok := azurearm.SanitizeLabelValue(rid.ResourceGroupName); ok {
		c.Labels[LabelResourceGroup] = v
	}
	return c
}

func (m *mapper) renderName(d nameData) (string, error) {
	var b bytes.Buffer
	if err := m.name.Execute(&b, d); err != nil {
		return "", fmt.Errorf("nameTemplate: %w", err)
	}
	name := m.cfg.NamePrefix + b.String()
	switch {
	case b.Len() == 0:
		return "", fmt.Errorf("nameTemplate rendered an empty name")
	case strings.ContainsFunc(name, isBadNameRune):
		return "", fmt.Errorf("name %q has spaces or control characters", name)
	case len(name) > 253:
		return "", fmt.Errorf("name is longer than 253 characters")
	}
	return name, nil
}

// kubernetesVersion prefers the version running (currentKubernetesVersion,
// e.g. 1.31.11) over the one requested (kubernetesVersion, may be 1.31),
// with a leading v as in the rest of the model.
func kubernetesVersion(p *armcontainerservice.ManagedClusterProperties) string {
	v := azurearm.Deref(p.CurrentKubernetesVersion)
	if v == "" {
		v = azurearm.Deref(p.KubernetesVersion)
	}
	if v != "" && v[0] >= '0' && v[0] <= '9' {
		v = "v" + v
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
