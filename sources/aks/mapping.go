package aks

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"text/template"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
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
type skipReason string

const (
	skipResourceGroup skipReason = "resource_group"
	skipTags          skipReason = "tags"
	skipNoAAD         skipReason = "no_aad"
	skipPrivate       skipReason = "private"
	skipName          skipReason = "invalid_name"
)

// Not-ready reasons, the reason label of the not-ready metric.
const (
	notReadyCA     = "ca_unavailable"
	notReadyScope  = "invalid_scope"
	notReadyServer = "invalid_server"
)

// mapped is one listed cluster after mapping: either skipped, or a cluster
// for the listing, which may still need its CA.
type mapped struct {
	cluster sources.Cluster
	// id is the lower-cased resource id, the CA cache key.
	id                          string
	subscription, resourceGroup string
	azureName                   string
	skip                        skipReason
	detail                      string // why skipped, for the debug log
	needCA                      bool
	notReadyKind                string
}

// mapper maps ARM managed clusters to the model. It is built once from a
// validated Config and holds no state between listings.
type mapper struct {
	cfg        Config
	name       *template.Template
	rgs        map[string]bool
	labelTags  map[string]bool // nil: every tag
	ignoreTags map[string]bool
	log        *slog.Logger
}

func newMapper(cfg Config, log *slog.Logger) (*mapper, error) {
	t, err := parseNameTemplate(cfg.NameTemplate)
	if err != nil {
		return nil, fmt.Errorf("nameTemplate: %w", err)
	}
	return &mapper{
		cfg: cfg, name: t, log: log,
		rgs:        lowerSet(cfg.ResourceGroups),
		labelTags:  lowerSet(cfg.LabelTags),
		ignoreTags: lowerSet(cfg.IgnoreTags),
	}, nil
}

func lowerSet(list []string) map[string]bool {
	if len(list) == 0 {
		return nil
	}
	out := make(map[string]bool, len(list))
	for _, s := range list {
		out[strings.ToLower(strings.TrimSpace(s))] = true
	}
	return out
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

// inSubscription adjusts a cluster's phase to the state of the
// subscription it was listed in: a Disabled subscription has its resources
// deallocated, so every cluster in it is degraded unless it is leaving.
// Other states (Enabled, PastDue, Warned: resources run) change nothing.
func inSubscription(p sources.Phase, state armsubscriptions.SubscriptionState) sources.Phase {
	if strings.EqualFold(string(state), string(armsubscriptions.SubscriptionStateDisabled)) && p != sources.PhaseLeaving {
		return sources.PhaseDegraded
	}
	return p
}

// mapCluster maps one cluster of subscription sub. An error means the
// response is malformed and fails the listing; filters set skip instead.
func (m *mapper) mapCluster(sub string, mc *armcontainerservice.ManagedCluster) (mapped, error) {
	if mc == nil || mc.ID == nil {
		return mapped{}, fmt.Errorf("cluster without id")
	}
	rid, err := arm.ParseResourceID(*mc.ID)
	if err != nil {
		return mapped{}, fmt.Errorf("cluster id %q: %w", *mc.ID, err)
	}
	if !strings.EqualFold(rid.ResourceType.String(), managedClusterType) || rid.ResourceGroupName == "" || rid.Name == "" {
		return mapped{}, fmt.Errorf("cluster id %q is not a managed cluster", *mc.ID)
	}
	if !strings.EqualFold(rid.SubscriptionID, sub) {
		return mapped{}, fmt.Errorf("cluster id %q is outside the subscription", *mc.ID)
	}
	p := mc.Properties
	if p == nil {
		return mapped{}, fmt.Errorf("cluster %s has no properties", rid.Name)
	}
	out := mapped{id: strings.ToLower(*mc.ID), subscription: sub, resourceGroup: rid.ResourceGroupName, azureName: rid.Name}
	skip := func(r skipReason, detail string) (mapped, error) {
		out.skip, out.detail = r, detail
		return out, nil
	}
	tags := derefTags(mc.Tags)
	provState, powState := deref(p.ProvisioningState), ""
	if p.PowerState != nil && p.PowerState.Code != nil {
		powState = string(*p.PowerState.Code)
	}
	switch {
	case m.rgs != nil && !m.rgs[strings.ToLower(rid.ResourceGroupName)]:
		return skip(skipResourceGroup, rid.ResourceGroupName)
	case !matchAll(tags, m.cfg.IncludeTags):
		return skip(skipTags, "a tag of includeTags is missing")
	case matchAny(tags, m.cfg.ExcludeTags):
		return skip(skipTags, "a tag of excludeTags is present")
	case p.AADProfile == nil:
		// argocd-k8s-auth azure gets Entra ID tokens, which a cluster
		// without Entra ID integration does not accept.
		return skip(skipNoAAD, "no aadProfile")
	}

	host, private := deref(p.Fqdn), false
	if ap := p.APIServerAccessProfile; ap != nil && deref(ap.EnablePrivateCluster) {
		private = true
		switch m.cfg.PrivateClusters {
		case PrivateFQDN:
			host = deref(p.PrivateFQDN)
			if host == "" {
				return skip(skipPrivate, "no privateFQDN")
			}
		case PrivatePublicFQDN:
			if !deref(ap.EnablePrivateClusterPublicFQDN) || host == "" {
				return skip(skipPrivate, "no public FQDN (enablePrivateClusterPublicFQDN is off)")
			}
		default:
			return skip(skipPrivate, "private cluster")
		}
	}

	location := strings.ToLower(deref(mc.Location))
	name, err := m.renderName(nameData{
		Name: rid.Name, ResourceGroup: rid.ResourceGroupName, Subscription: sub, Location: location, Tags: tags,
	})
	if err != nil {
		return skip(skipName, err.Error())
	}

	c := sources.Cluster{
		Provider:          sources.ProviderAKS,
		Name:              name,
		ID:                out.id,
		Auth:              sources.Auth{Kind: sources.AuthExec, Exec: m.execProvider()},
		CloudID:           sources.AKSCloudID(sub, rid.ResourceGroupName, rid.Name),
		Labels:            m.labels(tags, rid.Name),
		Annotations:       map[string]string{AnnotationResourceID: *mc.ID},
		Region:            location,
		Account:           sub,
		KubernetesVersion: kubernetesVersion(p),
		State:             provState,
		Phase:             phaseOf(provState, powState, deref(p.Fqdn) != "" || deref(p.PrivateFQDN) != ""),
		Ready:             true,
	}
	if v, ok := sanitizeLabelValue(rid.ResourceGroupName); ok {
		c.Labels[LabelResourceGroup] = v
	}
	if private {
		c.ProxyURL = m.cfg.PrivateProxyURL
	}
	out.cluster = c
	notReady := func(kind, reason string) (mapped, error) {
		out.cluster.Ready, out.cluster.NotReadyReason, out.notReadyKind = false, reason, kind
		return out, nil
	}
	if host == "" {
		return notReady(notReadyServer, "the cluster reports no API server FQDN")
	}
	srv, err := sources.NormalizeServer("https://" + host + ":443")
	if err != nil {
		return notReady(notReadyServer, "API server FQDN: "+err.Error())
	}
	out.cluster.Server = srv
	if reason := m.scope(&out.cluster, tags); reason != "" {
		return notReady(notReadyScope, reason)
	}
	out.needCA = true
	return out, nil
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

// scope sets Tenant, Project and Namespaces from the tags and returns a
// reason when a present tag is invalid: a scope that cannot be read must not
// become "everything" (empty namespaces mean all of them).
func (m *mapper) scope(c *sources.Cluster, tags map[string]string) string {
	var tenant, project string
	var namespaces []string
	if v, ok := tagValue(tags, m.cfg.TenantTag); ok {
		tenant = strings.TrimSpace(v)
	}
	if v, ok := tagValue(tags, m.cfg.ProjectTag); ok {
		project = strings.TrimSpace(v)
		if errs := validation.IsDNS1123Subdomain(project); len(errs) > 0 {
			return fmt.Sprintf("tag %s is not a valid AppProject name", m.cfg.ProjectTag)
		}
	}
	if v, ok := tagValue(tags, m.cfg.NamespacesTag); ok {
		fields := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' })
		if len(fields) == 0 {
			return fmt.Sprintf("tag %s names no namespace", m.cfg.NamespacesTag)
		}
		for _, ns := range fields {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return fmt.Sprintf("tag %s holds %q, not a namespace name", m.cfg.NamespacesTag, ns)
			}
			if !slices.Contains(namespaces, ns) {
				namespaces = append(namespaces, ns)
			}
		}
	}
	c.Tenant, c.Project, c.Namespaces = tenant, project, namespaces
	return ""
}

// execProvider returns a fresh execProviderConfig for one cluster.
func (m *mapper) execProvider() *sources.ExecProvider {
	a := m.cfg.Auth
	env := maps.Clone(a.Env)
	if env == nil {
		env = map[string]string{}
	}
	set := func(k, v string) {
		if v != "" {
			env[k] = v
		}
	}
	set("AAD_LOGIN_METHOD", a.LoginMethod)
	set("AZURE_CLIENT_ID", a.ClientID)
	set("AZURE_TENANT_ID", a.TenantID)
	set("AZURE_FEDERATED_TOKEN_FILE", a.FederatedTokenFile)
	set("AZURE_AUTHORITY_HOST", a.AuthorityHost)
	set("AAD_ENVIRONMENT_NAME", a.Environment)
	set("AAD_SERVER_APPLICATION_ID", a.ServerApplicationID)
	return &sources.ExecProvider{Command: a.Command, Args: []string{"azure"}, Env: env, APIVersion: a.APIVersion}
}

// labels turns the allowed tags into labels. A tag whose key or value
// cannot be made a valid label is dropped with a debug log (key only: tag
// values are not logged). Keys already valid win over sanitized ones.
func (m *mapper) labels(tags map[string]string, cluster string) map[string]string {
	out := make(map[string]string, len(tags)+1)
	keys := sortedKeys(tags)
	// Two passes: valid keys first, so that a sanitized key never
	// replaces a tag that was already a valid label.
	for _, pass := range []bool{true, false} {
		for _, k := range keys {
			lk := strings.ToLower(k)
			if m.ignoreTags[lk] || (m.labelTags != nil && !m.labelTags[lk]) {
				continue
			}
			valid := len(validation.IsQualifiedName(k)) == 0
			if valid != pass {
				continue
			}
			key, ok := sanitizeLabelKey(k)
			if !ok {
				m.log.Debug("tag dropped: key cannot be a label key", "cluster", cluster, "tag", k)
				continue
			}
			if _, taken := out[key]; taken {
				m.log.Debug("tag dropped: its label key is taken by another tag", "cluster", cluster, "tag", k, "label", key)
				continue
			}
			val, ok := sanitizeLabelValue(tags[k])
			if !ok {
				m.log.Debug("tag dropped: value cannot be a label value", "cluster", cluster, "tag", k)
				continue
			}
			out[key] = val
		}
	}
	return out
}

// sanitizeLabelKey makes k a label name as the EKS source does: characters
// other than ASCII letters, digits, '-', '_' and '.' become '-', and the
// ends are trimmed to a letter or digit. Azure tag keys cannot hold '/', so
// there is never a prefix.
// Keys longer than 63 characters are dropped rather than truncated, which
// could make two tags one label.
func sanitizeLabelKey(k string) (string, bool) {
	s := sanitize(k)
	return s, s != "" && len(validation.IsQualifiedName(s)) == 0
}

// sanitizeLabelValue is sanitizeLabelKey for values, which may be empty.
func sanitizeLabelValue(v string) (string, bool) {
	s := sanitize(v)
	if v != "" && s == "" {
		return "", false
	}
	return s, len(validation.IsValidLabelValue(s)) == 0
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.TrimFunc(b.String(), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
}

// kubernetesVersion prefers the version running (currentKubernetesVersion,
// e.g. 1.31.11) over the one requested (kubernetesVersion, may be 1.31),
// with a leading v as in the rest of the model.
func kubernetesVersion(p *armcontainerservice.ManagedClusterProperties) string {
	v := deref(p.CurrentKubernetesVersion)
	if v == "" {
		v = deref(p.KubernetesVersion)
	}
	if v != "" && v[0] >= '0' && v[0] <= '9' {
		v = "v" + v
	}
	return v
}

// tagValue looks a tag up the way Azure does: keys are case-insensitive.
func tagValue(tags map[string]string, key string) (string, bool) {
	if v, ok := tags[key]; ok {
		return v, true
	}
	for k, v := range tags {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return "", false
}

func tagMatches(tags map[string]string, key, want string) bool {
	v, ok := tagValue(tags, key)
	return ok && (want == "*" || v == want)
}

func matchAll(tags, want map[string]string) bool {
	for k, v := range want {
		if !tagMatches(tags, k, v) {
			return false
		}
	}
	return true
}

func matchAny(tags, want map[string]string) bool {
	for k, v := range want {
		if tagMatches(tags, k, v) {
			return true
		}
	}
	return false
}

func derefTags(in map[string]*string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = deref(v)
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
