package rancher

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Labels this source sets on every cluster, under a prefix of its own.
// Rancher labels and annotations with this prefix are dropped, so a cluster
// cannot fake them.
const (
	reservedPrefix = "rancher.argocd-cluster-discovery.io/"
	// LabelClusterID is the Rancher cluster id (c-xxxxx, c-m-xxxxxxxx).
	LabelClusterID = reservedPrefix + "cluster-id"
	// LabelDriver and LabelProvider are Rancher's driver (imported, k3s,
	// rke2, EKS, AKS, ...) and detected provider (rke2, k3s, eks, ...).
	LabelDriver   = reservedPrefix + "driver"
	LabelProvider = reservedPrefix + "provider"
	// LabelEndpoint is "proxy" (Rancher's /k8s/clusters proxy) or "ace"
	// (the authorized cluster endpoint).
	LabelEndpoint = reservedPrefix + "endpoint"
)

// Identity of the cloud cluster behind a hosted EKS or AKS cluster, so that
// the same cluster found by the EKS or AKS source is recognised (the model's
// CloudID is set too when the identity is complete: see hostedIdentity). A
// value that is not a valid label value (e.g. an EKS name over 63
// characters) is written as an annotation with the same key instead.
const (
	LabelEKSName          = reservedPrefix + "eks-cluster-name"
	LabelEKSRegion        = reservedPrefix + "eks-region"
	LabelEKSAccount       = reservedPrefix + "eks-account"
	LabelAKSName          = reservedPrefix + "aks-cluster-name"
	LabelAKSResourceGroup = reservedPrefix + "aks-resource-group"
	LabelAKSLocation      = reservedPrefix + "aks-location"
	// LabelAKSSubscription is the subscription of the cloud credential the
	// cluster names (see aksCredential): the only place Rancher keeps it.
	LabelAKSSubscription = reservedPrefix + "aks-subscription"
)

// Endpoint kinds, the values of LabelEndpoint.
const (
	EndpointProxy = "proxy"
	EndpointACE   = "ace"
)

// Cluster is the part of a Rancher v3 cluster object this source reads
// (rancher/rancher pkg/client/generated/management/v3 Cluster, trimmed).
// Status is embedded at the top level by Rancher's schema.
type Cluster struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	State string `json:"state,omitempty"`
	// Removed is metadata.deletionTimestamp, renamed by norman's metadata
	// mapper (types/mapper/metadata.go): set once the cluster is being
	// deleted.
	Removed string `json:"removed,omitempty"`
	// Conditions are status.conditions, flattened to the top level. A
	// listing keeps only the types the phase reads (see keepConditions).
	Conditions  []Condition       `json:"conditions,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// FleetWorkspaceName is spec.fleetWorkspaceName.
	FleetWorkspaceName       string                    `json:"fleetWorkspaceName,omitempty"`
	Provider                 string                    `json:"provider,omitempty"`
	Driver                   string                    `json:"driver,omitempty"`
	Internal                 bool                      `json:"internal,omitempty"`
	Version                  *Version                  `json:"version,omitempty"`
	LocalClusterAuthEndpoint *LocalClusterAuthEndpoint `json:"localClusterAuthEndpoint,omitempty"`
	EKSConfig                *EKSConfig                `json:"eksConfig,omitempty"`
	EKSStatus                *EKSStatus                `json:"eksStatus,omitempty"`
	AKSConfig                *AKSConfig                `json:"aksConfig,omitempty"`
	AKSStatus                *AKSStatus                `json:"aksStatus,omitempty"`
}

// Condition is one of a cluster's conditions (norman's v3 Condition).
// Status is True, False or Unknown.
type Condition struct {
	Type           string `json:"type"`
	Status         string `json:"status"`
	Reason         string `json:"reason,omitempty"`
	Message        string `json:"message,omitempty"`
	LastUpdateTime string `json:"lastUpdateTime,omitempty"`
}

// Version is the cluster's Kubernetes version info.
type Version struct {
	GitVersion string `json:"gitVersion,omitempty"`
}

// LocalClusterAuthEndpoint is the authorized cluster endpoint (ACE).
// CACerts is PEM, not base64.
type LocalClusterAuthEndpoint struct {
	Enabled bool   `json:"enabled,omitempty"`
	FQDN    string `json:"fqdn,omitempty"`
	CACerts string `json:"caCerts,omitempty"`
}

// EKSConfig is the part of eksConfig and eksStatus.upstreamSpec that
// identifies the EKS cluster (rancher/rancher pkg/client/generated/management/v3
// zz_generated_eks_cluster_config_spec.go; rancher/eks-operator
// pkg/apis/eks.cattle.io/v1/types.go). DisplayName is the EKS name.
// ServiceRole is a role name in eksConfig (eks-operator calls iam GetRole),
// the cluster's roleArn in upstreamSpec (its controller/external.go).
type EKSConfig struct {
	DisplayName string `json:"displayName,omitempty"`
	Region      string `json:"region,omitempty"`
	ServiceRole string `json:"serviceRole,omitempty"`
}

// EKSStatus is the spec read back from EKS (zz_generated_eks_status.go). The
// cluster's ARN is not in it: Rancher's clusterupstreamrefresher drops it.
type EKSStatus struct {
	UpstreamSpec *EKSConfig `json:"upstreamSpec,omitempty"`
}

// AKSConfig is the part of aksConfig and aksStatus.upstreamSpec that
// identifies the AKS cluster (zz_generated_aks_cluster_config_spec.go;
// rancher/aks-operator pkg/apis/aks.cattle.io/v1/types.go). It has no
// subscription nor resource id: aks-operator reads the subscription from the
// cloud credential that AzureCredentialSecret names (pkg/aks/client.go:
// "namespace:name", which is the credential's /v3 id, e.g.
// cattle-global-data:cc-q7t2w); subscriptionId was pre-release only.
type AKSConfig struct {
	AzureCredentialSecret string `json:"azureCredentialSecret,omitempty"`
	ClusterName           string `json:"clusterName,omitempty"`
	ResourceGroup         string `json:"resourceGroup,omitempty"`
	ResourceLocation      string `json:"resourceLocation,omitempty"`
}

// AKSStatus is the spec read back from AKS (zz_generated_aks_status.go).
type AKSStatus struct {
	UpstreamSpec *AKSConfig `json:"upstreamSpec,omitempty"`
}

// displayName is the cluster's Rancher name, or its id when it has none.
func (c *Cluster) displayName() string {
	if c.Name != "" {
		return c.Name
	}
	return c.ID
}

// mapper turns Rancher clusters into model clusters. It holds only
// validated configuration and does no I/O.
type mapper struct {
	source          string
	server          string // the proxy's base: secretURL, else url; no trailing slash
	tokenRef        *sources.SecretRef
	cfg             *Config
	dropLabels      []string
	dropAnnotations []string
	// rancherHosts are the host:port of url and secretURL (lower case):
	// never an authorized cluster endpoint.
	rancherHosts []string
}

// newMapper maps the clusters of the Rancher server at server (url).
func newMapper(name, server string, c Config) *mapper {
	var hosts []string
	for _, raw := range []string{server, c.URL, c.SecretURL} {
		if u, err := url.Parse(raw); raw != "" && err == nil && u.Hostname() != "" {
			hosts = append(hosts, strings.ToLower(hostPort(u)))
		}
	}
	if u, err := parseURL(c.SecretURL); c.SecretURL != "" && err == nil {
		server = u.String()
	}
	return &mapper{
		rancherHosts:    hosts,
		source:          name,
		server:          server,
		tokenRef:        &c.Token,
		cfg:             &c,
		dropLabels:      slices.Concat(c.DropLabelPrefixes, []string{reservedPrefix}),
		dropAnnotations: slices.Concat(c.DropAnnotationPrefixes, []string{reservedPrefix}),
	}
}

// toCluster maps one Rancher cluster, whatever its state: the state sets
// the phase only. It never fails: a cluster that cannot be rendered (no
// usable CA, endpoint or scoping) is returned not ready, with the reason.
// subs are the subscriptions of the cloud credentials read in this listing
// (nil when none were).
func (m *mapper) toCluster(c *Cluster, ca rancherCA, subs subscriptions) sources.Cluster {
	out := sources.Cluster{
		Source:   m.source,
		Provider: sources.ProviderRancher,
		Name:     m.cfg.NamePrefix + c.displayName(),
		ID:       c.ID,
		Auth:     sources.Auth{Kind: sources.AuthBearerToken, TokenRef: m.tokenRef},
		State:    c.State,
		Phase:    phase(c.State, c.Removed != "", c.Conditions),
		Ready:    true,
		Labels:   keep(c.Labels, m.dropLabels),
		Group:    c.FleetWorkspaceName,
		Tenant:   m.cfg.Tenant,
		Project:  m.cfg.Project,
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Annotations = keep(c.Annotations, m.dropAnnotations)
	if c.Version != nil {
		out.KubernetesVersion = c.Version.GitVersion
	}
	notReady := func(format string, args ...any) {
		if out.Ready {
			out.Ready, out.NotReadyReason = false, fmt.Sprintf(format, args...)
		}
	}
	setLabel(&out, LabelClusterID, c.ID)
	setLabel(&out, LabelDriver, c.Driver)
	setLabel(&out, LabelProvider, c.Provider)
	m.hostedIdentity(&out, c, subs)

	m.route(&out, c, ca, notReady)

	if v, ok := c.Labels[m.cfg.TenantLabel]; ok && v != "" {
		out.Tenant, out.TenantFromOwner = v, true
	}
	if v, ok := c.Labels[m.cfg.ProjectLabel]; ok && v != "" {
		out.Project, out.ProjectFromOwner = v, true
	}
	out.Namespaces = slices.Clone(m.cfg.Namespaces)
	if v, ok := c.Annotations[m.cfg.NamespacesAnnotation]; ok {
		out.Namespaces = m.narrowNamespaces(v, notReady)
	}
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	return out
}

// Condition types the phase reads (rancher/rancher
// pkg/apis/management.cattle.io/v3/cluster_types.go).
const (
	// condConnected is set every 15 s by the clusterconnected controller:
	// False when the cluster agent has no tunnel to Rancher.
	condConnected = "Connected"
	// condReady is the health check (healthsyncer), the agent connection
	// (clusterconnected) or, for provisioning-v2 clusters, the control plane.
	condReady = "Ready"
	// condWaiting is set True by healthsyncer after the cluster's first
	// successful health check: a cluster whose Waiting is True has been
	// established.
	condWaiting = "Waiting"
)

// keepConditions returns the conditions phase reads, in a slice of their
// own: a cluster has about twenty conditions, and a listing of 10,000
// clusters would otherwise hold all of them until it ends. Nil when there
// are none.
func keepConditions(cs []Condition) []Condition {
	var out []Condition
	for _, c := range cs {
		if c.Type == condConnected || c.Type == condReady || c.Type == condWaiting {
			out = append(out, c)
		}
	}
	return out
}

// conditionStatus is the status of the first condition of type typ, or ""
// when there is none.
func conditionStatus(cs []Condition, typ string) string {
	for _, c := range cs {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// phase maps a Rancher state and conditions to the cluster's lifecycle
// phase (the table is in the package doc). removed reports that
// metadata.removed (the deletion timestamp) is set. An unknown or empty
// state is degraded: a cluster is never dropped for its state.
func phase(state string, removed bool, conditions []Condition) sources.Phase {
	if removed {
		return sources.PhaseLeaving
	}
	is := func(typ, status string) bool { return strings.EqualFold(conditionStatus(conditions, typ), status) }
	switch strings.ToLower(strings.TrimSpace(state)) {
	case "active":
		if is(condConnected, "False") || is(condReady, "False") || is(condReady, "Unknown") {
			return sources.PhaseDegraded
		}
		return sources.PhaseReady
	case "removing":
		return sources.PhaseLeaving
	case "initializing", "pending", "provisioning", "waiting", "activating", "configuring", "unavailable":
		if is(condWaiting, "True") {
			return sources.PhaseDegraded // established: the same cluster, unhealthy for now
		}
		return sources.PhasePending
	case "updating", "upgrading", "error", "reconciling", "in-progress", "failed":
		return sources.PhaseDegraded
	}
	return sources.PhaseDegraded
}

// hostedIdentity sets the identity of the cloud cluster behind a hosted
// cluster, and the CloudID the EKS or AKS source computes when it is
// complete. EKS: the account is the one of upstreamSpec's role ARN (none
// before Rancher's first refresh), never eksConfig's role name. AKS: the
// subscription is the one subs hold for the cluster's cloud credential (see
// AKSConfig); without it there is no CloudID.
func (m *mapper) hostedIdentity(out *sources.Cluster, c *Cluster, subs subscriptions) {
	switch strings.ToUpper(c.Driver) {
	case "EKS":
		var cfg, up EKSConfig
		if c.EKSConfig != nil {
			cfg = *c.EKSConfig
		}
		if c.EKSStatus != nil && c.EKSStatus.UpstreamSpec != nil {
			up = *c.EKSStatus.UpstreamSpec
		}
		name := first(cfg.DisplayName, up.DisplayName)
		region := first(cfg.Region, up.Region)
		account := accountFromARN(up.ServiceRole)
		setLabel(out, LabelEKSName, name)
		setLabel(out, LabelEKSRegion, region)
		setLabel(out, LabelEKSAccount, account)
		out.Region, out.Account, out.AccountLabel = region, account, LabelEKSAccount
		if name != "" && region != "" && account != "" {
			out.CloudID = sources.EKSCloudID(account, region, name)
		}
	case "AKS":
		var cfg, up AKSConfig
		if c.AKSConfig != nil {
			cfg = *c.AKSConfig
		}
		if c.AKSStatus != nil && c.AKSStatus.UpstreamSpec != nil {
			up = *c.AKSStatus.UpstreamSpec
		}
		name := first(cfg.ClusterName, up.ClusterName)
		group := first(cfg.ResourceGroup, up.ResourceGroup)
		location := first(cfg.ResourceLocation, up.ResourceLocation)
		sub := subs[aksCredential(c)]
		setLabel(out, LabelAKSName, name)
		setLabel(out, LabelAKSResourceGroup, group)
		setLabel(out, LabelAKSLocation, location)
		setLabel(out, LabelAKSSubscription, sub)
		out.Region, out.Account, out.AccountLabel = location, sub, LabelAKSSubscription
		if name != "" && group != "" && sub != "" {
			// The arguments of the AKS source: the subscription, and the
			// resource group and name of the cluster's resource id.
			out.CloudID = sources.AKSCloudID(sub, group, name)
		}
	}
}

// aksCredential is the cloud credential a hosted AKS cluster names
// (aksConfig, else upstreamSpec), or "" for any other cluster.
func aksCredential(c *Cluster) string {
	if !strings.EqualFold(c.Driver, "AKS") {
		return ""
	}
	var ref string
	if c.AKSConfig != nil {
		ref = c.AKSConfig.AzureCredentialSecret
	}
	if ref == "" && c.AKSStatus != nil && c.AKSStatus.UpstreamSpec != nil {
		ref = c.AKSStatus.UpstreamSpec.AzureCredentialSecret
	}
	return ref
}

// accountFromARN returns the account of an IAM ARN
// (arn:aws:iam::123456789012:role/x), or "". The EKS cluster role belongs
// to the cluster's account: EKS takes only a role the caller may pass
// (iam:PassRole), which is one of its own account.
func accountFromARN(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return ""
	}
	a := parts[4]
	if len(a) != 12 || strings.IndexFunc(a, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return ""
	}
	return a
}

// setLabel sets key to v as a label, or as an annotation when v is not a
// valid label value; an empty v sets nothing.
func setLabel(c *sources.Cluster, key, v string) {
	if v == "" {
		return
	}
	if len(validation.IsValidLabelValue(v)) == 0 {
		c.Labels[key] = v
		return
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[key] = v
}

// keep copies in without the keys that have one of the prefixes.
func keep(in map[string]string, drop []string) map[string]string {
	var out map[string]string
	for k, v := range in {
		if slices.ContainsFunc(drop, func(p string) bool { return strings.HasPrefix(k, p) }) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(in))
		}
		out[k] = v
	}
	return out
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
