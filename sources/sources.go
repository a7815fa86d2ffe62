// Package sources defines the cluster model shared by every discovery source
// and the one-method Source interface they implement.
//
// Data flows one way: sources → inventory → generator. Nothing in this tree
// imports the generator packages.
package sources

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Source lists the clusters of one upstream (a Rancher server, a set of AWS
// accounts and regions, a static file, ...).
type Source interface {
	// Clusters returns every cluster the upstream currently has, after the
	// source's own filters.
	//
	// A non-nil error means the listing is incomplete: implementations must
	// then return a nil slice and never a partial result. A missing page or a
	// failed call is an error, not an empty answer, because callers treat a
	// successful listing as the complete truth (clusters absent from it are
	// taken to have left). Clusters must return when ctx is cancelled.
	//
	// The returned clusters are shared, not copied: neither the source nor
	// the caller modifies them, or anything they point to (labels,
	// annotations, auth, namespaces), once they are returned. A source may
	// hand out the same maps on every listing, and the caller keeps them as
	// they are.
	Clusters(ctx context.Context) ([]Cluster, error)
}

// AccountLister is a Source that discovers the accounts its clusters live
// in (AKS subscriptions found by listing them) rather than being given
// them, or that can lose sight of an account it is given (an EKS account
// whose role is refused). ClustersAndAccounts is Clusters with, for a complete listing, every
// account it covered, with clusters or without, or every scope: a prefix
// of cluster IDs ending in "/" (an Azure resource group,
// "/subscriptions/<id>/resourcegroups/<name>/"), for an upstream that
// grants access to parts of an account. A served cluster missing whose
// account (Cluster.Account) is not covered, and whose ID is in no covered
// scope, did not leave: what holds it went out of sight (a role removed,
// a subscription moved), and the inventory holds its departure until an
// operator confirms it.
type AccountLister interface {
	Source
	ClustersAndAccounts(ctx context.Context) ([]Cluster, []string, error)
}

// Provider names the kind of upstream a cluster was discovered in.
type Provider string

// The providers this binary ships; the command's registry
// (cmd/argocd-cluster-discovery/config/providers.go) decides which are
// known, so these are names, not a closed list.
const (
	ProviderStatic  Provider = "static"
	ProviderRancher Provider = "rancher"
	ProviderEKS     Provider = "eks"
	ProviderAKS     Provider = "aks"
	ProviderARO     Provider = "aro"
)

// Cluster is one discovered Kubernetes cluster: everything the plugin
// parameters and the Argo CD cluster Secret need, and no secret value.
// Credentials appear only as references (Auth), resolved by whoever writes a
// Secret, so nothing rendered from a Cluster can leak them.
type Cluster struct {
	// Source is the name of the source instance that listed the cluster.
	Source string `json:"source"`
	// Provider is the kind of that source.
	Provider Provider `json:"provider"`
	// Name is unique across all sources; it is the Argo CD cluster name.
	Name string `json:"name"`
	// Server is the API server URL, normalized (see NormalizeServer); an
	// agent cluster's is its agent Secret's, verbatim (see AgentServer).
	Server string `json:"server"`
	// CA is the API server's CA bundle (caData in JSON: base64 of its
	// PEM); zero when the server presents a publicly trusted certificate.
	CA CA `json:"caData,omitzero"`
	// Auth describes how Argo CD authenticates to the cluster.
	Auth Auth `json:"auth"`
	// CloudID identifies the cloud cluster behind this one (see EKSCloudID
	// and AKSCloudID), so that a cluster found both through Rancher (hosted
	// EKS/AKS) and through the EKS or AKS source is recognised as one.
	CloudID string `json:"cloudID,omitempty"`
	// ProxyURL, when set, is the proxy Argo CD must use to reach Server
	// (the proxyUrl of the cluster Secret's config), e.g. for private
	// endpoints.
	ProxyURL string `json:"proxyUrl,omitempty"`
	// Labels and Annotations are propagated to parameters and Secrets.
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Region is the cloud region or location, if any.
	Region string `json:"region,omitempty"`
	// Account is the AWS account id or Azure subscription id, if any.
	Account string `json:"account,omitempty"`
	// AccountLabel is the key of the label in which the source puts
	// Account, if it does (a Rancher-hosted cluster's aks-subscription).
	// When the inventory keeps a cluster's last known identity because a
	// listing could not tell it, it keeps that label with it. Set by the
	// source on every listing; the inventory clears it from a rendering.
	AccountLabel string `json:"-"`
	// Group is the operator-controlled group the cluster is in, if any: its
	// Azure resource group (AKS), or its Rancher fleet workspace (moving a
	// cluster to another needs fleetaddcluster on that workspace, which
	// rancher/webhook checks).
	Group string `json:"group,omitempty"`
	// Tenant, Project, Namespaces and ClusterResources scope the cluster in
	// Argo CD: the tenant that owns it, the AppProject its Secret names, and
	// the namespaces Argo CD may manage (all when empty).
	Tenant           string   `json:"tenant,omitempty"`
	Project          string   `json:"project,omitempty"`
	Namespaces       []string `json:"namespaces,omitempty"`
	ClusterResources bool     `json:"clusterResources,omitempty"`
	// TenantFromOwner and ProjectFromOwner: Tenant or Project was read
	// from what the cluster's owner writes (its labels or tags), not from
	// the operator's configuration. Such a value only selects among what
	// the tenant rules admit (see ApplyTenantRule).
	TenantFromOwner  bool `json:"tenantFromOwner,omitempty"`
	ProjectFromOwner bool `json:"projectFromOwner,omitempty"`
	// KubernetesVersion as reported upstream, e.g. v1.31.4.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// ID is the cluster's identity in its source, stable across renames:
	// the Rancher cluster id, the EKS cluster ARN, the AKS resource id
	// (lower case), the static cluster's name. Empty means Name. The
	// inventory tracks clusters, and names their Secrets, by source and ID.
	ID string `json:"id,omitempty"`
	// State is the upstream state, verbatim (e.g. active, ACTIVE, Succeeded).
	State string `json:"state,omitempty"`
	// Phase is State mapped to the lifecycle every consumer follows (see
	// Phase). A source sets it from the upstream state; the inventory may
	// raise pending to degraded (a cluster that was served before) and sets
	// absent. Empty is read as ready.
	Phase Phase `json:"phase,omitempty"`
	// Ready is false when the listing lacks what parameters or a Secret
	// need (a server, a CA that could be fetched, valid scoping): the
	// cluster cannot be rendered from this listing. It says nothing about
	// the upstream lifecycle (that is Phase): a served cluster that cannot
	// be rendered keeps its last good rendering.
	Ready bool `json:"ready"`
	// NotReadyReason says why Ready is false.
	NotReadyReason string `json:"notReadyReason,omitempty"`
}

// Key returns the cluster's identity in its source: ID, or Name when the
// source sets no ID.
func (c *Cluster) Key() string {
	if c.ID != "" {
		return c.ID
	}
	return c.Name
}

// Phase is where a cluster is in its lifecycle, the same for every
// provider. Each provider maps its upstream states to a phase (the tables
// are in the providers' package docs); an upstream value a provider does
// not know is degraded, never absence.
type Phase string

// The phases.
const (
	// PhasePending: never usable yet (being created, waiting for its agent).
	// A pending cluster is not served until it becomes ready or degraded.
	PhasePending Phase = "pending"
	// PhaseReady: usable.
	PhaseReady Phase = "ready"
	// PhaseDegraded: the same cluster, not healthy for now (an upgrade, a
	// disconnected agent, a failed operation, stopped). Served.
	PhaseDegraded Phase = "degraded"
	// PhaseLeaving: being deleted upstream. A served cluster stays served
	// while leaving until its departure is confirmed.
	PhaseLeaving Phase = "leaving"
	// PhaseAbsent is set by the inventory only: a served cluster missing
	// from its source's latest complete listing, served from its last good
	// rendering until its departure is confirmed.
	PhaseAbsent Phase = "absent"
)

// Phases lists every phase, in lifecycle order.
func Phases() []Phase {
	return []Phase{PhasePending, PhaseReady, PhaseDegraded, PhaseLeaving, PhaseAbsent}
}

// Valid reports whether p is a known phase (empty counts as ready).
func (p Phase) Valid() bool { return p == "" || slices.Contains(Phases(), p) }

// OrReady returns p, or ready when p is empty.
func (p Phase) OrReady() Phase {
	if p == "" {
		return PhaseReady
	}
	return p
}

// TenantRule scopes the clusters of a tenant in Argo CD. When a rule exists
// for a cluster's tenant, its non-empty fields win over what the source
// said: the platform team's configuration is the authority on scoping. The
// inventory applies the rules, so the plugin answer's project and the
// cluster Secret's project are always the same.
//
// Sources, Accounts, ResourceGroups, FleetWorkspaces and Names say what
// proves a cluster belongs to the tenant when its owner claims the tenant
// in a label or tag: the source that lists it, its AWS account or Azure
// subscription, its Azure resource group (AKS, ARO), its Rancher fleet
// workspace, its name (path.Match patterns). Each one set must match, and
// one at least of the first four must be set: a name only narrows (a
// Rancher cluster's owner may rename it). A Rancher cluster's account only
// narrows too: it is the one of the cloud credential or role its owner
// names on the cluster, so it needs Sources or FleetWorkspaces as well.
type TenantRule struct {
	Project          string   `json:"project,omitempty"`
	Namespaces       []string `json:"namespaces,omitempty"`
	ClusterResources *bool    `json:"clusterResources,omitempty"`
	Sources          []string `json:"sources,omitempty"`
	Accounts         []string `json:"accounts,omitempty"`
	ResourceGroups   []string `json:"resourceGroups,omitempty"`
	FleetWorkspaces  []string `json:"fleetWorkspaces,omitempty"`
	Names            []string `json:"names,omitempty"`
}

// Admits reports whether c proves it belongs to the rule's tenant (see
// TenantRule).
func (r TenantRule) Admits(c *Cluster) bool {
	switch {
	case len(r.Sources) == 0 && len(r.Accounts) == 0 && len(r.ResourceGroups) == 0 && len(r.FleetWorkspaces) == 0:
		return false // names alone prove nothing
	case c.Provider == ProviderRancher && len(r.Sources) == 0 && len(r.FleetWorkspaces) == 0:
		return false // nor does the account a Rancher cluster's owner names
	}
	if len(r.Sources) > 0 && !slices.Contains(r.Sources, c.Source) {
		return false
	}
	in := func(set []string, v string) bool {
		return v != "" && slices.ContainsFunc(set, func(a string) bool { return strings.EqualFold(a, v) })
	}
	if len(r.Accounts) > 0 && !in(r.Accounts, c.Account) {
		return false
	}
	if len(r.ResourceGroups) > 0 && (c.Provider != ProviderAKS && c.Provider != ProviderARO || !in(r.ResourceGroups, c.Group)) {
		return false
	}
	if len(r.FleetWorkspaces) > 0 && (c.Provider != ProviderRancher || !in(r.FleetWorkspaces, c.Group)) {
		return false
	}
	return len(r.Names) == 0 || slices.ContainsFunc(r.Names, func(p string) bool {
		ok, err := path.Match(p, c.Name)
		return err == nil && ok
	})
}

// ApplyTenantRule scopes c by the rule of its tenant, if any. A tenant or
// project its owner wrote (TenantFromOwner, ProjectFromOwner) is taken only
// when trustOwner (the source's trust: clusterLabels), or when a rule
// admits the cluster to that tenant and, for the project, sets it: else it
// returns why, and scopes nothing.
func (c *Cluster) ApplyTenantRule(rules map[string]TenantRule, trustOwner bool) string {
	rule, ok := rules[c.Tenant]
	if !trustOwner {
		switch {
		case c.TenantFromOwner && c.Tenant != "" && (!ok || !rule.Admits(c)):
			return fmt.Sprintf("tenant %q is the cluster owner's label or tag, and no rule secrets.tenants.%s admits this cluster (sources, accounts, resourceGroups, fleetWorkspaces or names)",
				c.Tenant, c.Tenant)
		case c.ProjectFromOwner && c.Project != "" && (!ok || rule.Project == ""):
			return fmt.Sprintf("project %q is the cluster owner's label or tag; only the tenant's rule (secrets.tenants.<tenant>.project) or the source may set it",
				c.Project)
		}
	}
	if !ok || c.Tenant == "" {
		return ""
	}
	if rule.Project != "" {
		c.Project = rule.Project
	}
	if len(rule.Namespaces) > 0 {
		c.Namespaces = rule.Namespaces
	}
	if rule.ClusterResources != nil {
		c.ClusterResources = *rule.ClusterResources
	}
	return ""
}

// AWSAuth is the awsAuthConfig of an Argo CD cluster Secret: Argo CD runs
// argocd-k8s-auth aws for the EKS cluster ClusterName, assuming RoleARN.
type AWSAuth struct {
	ClusterName string `json:"clusterName"`
	RoleARN     string `json:"roleARN,omitempty"`
	Region      string `json:"region,omitempty"`
}

// ExecProvider is the execProviderConfig of an Argo CD cluster Secret. Env
// holds configuration such as client ids, never secret values.
type ExecProvider struct {
	Command    string            `json:"command"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	APIVersion string            `json:"apiVersion,omitempty"`
}

// Validate checks that Kind and the set fields agree.
func (a Auth) Validate() error {
	set := 0
	for _, b := range []bool{a.TokenRef != nil, a.AWS != nil, a.Exec != nil, a.Agent != nil} {
		if b {
			set++
		}
	}
	if set > 1 {
		return fmt.Errorf("set at most one of bearer token, aws, exec and agent")
	}
	switch a.Kind {
	case AuthNone:
		if set != 0 {
			return fmt.Errorf("auth kind is empty but credentials are set")
		}
	case AuthBearerToken:
		if a.TokenRef == nil {
			return fmt.Errorf("bearer token auth needs a token reference")
		}
		if err := a.TokenRef.Validate(); err != nil {
			return fmt.Errorf("token reference: %w", err)
		}
	case AuthAWS:
		if a.AWS == nil || a.AWS.ClusterName == "" {
			return fmt.Errorf("aws auth needs a cluster name")
		}
	case AuthExec:
		if a.Exec == nil || a.Exec.Command == "" {
			return fmt.Errorf("exec auth needs a command")
		}
	case AuthAgent:
		if a.Agent == nil || a.Agent.Name == "" || a.Agent.Secret == "" {
			return fmt.Errorf("agent auth needs the agent's name and Secret")
		}
	default:
		return fmt.Errorf("unknown auth kind %q", a.Kind)
	}
	return nil
}

// Validate checks the fields every consumer relies on. It does not look at
// Ready: a not-ready cluster is still a valid listing entry.
func (c *Cluster) Validate() error {
	if c.Name == "" {
		return fmt.Errorf("cluster has no name")
	}
	if _, err := c.ValidServer(); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	if err := c.Auth.Validate(); err != nil {
		return fmt.Errorf("cluster %s: auth: %w", c.Name, err)
	}
	return nil
}

// EKSCloudID is the CloudID of an EKS cluster.
func EKSCloudID(account, region, name string) string {
	return strings.ToLower("eks/" + account + "/" + region + "/" + name)
}

// AKSCloudID is the CloudID of an AKS cluster (ARM ids are case-insensitive).
func AKSCloudID(subscription, resourceGroup, name string) string {
	return strings.ToLower("aks/" + subscription + "/" + resourceGroup + "/" + name)
}

// SortByName sorts clusters by name, then by source, in place.
func SortByName(cs []Cluster) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Name != cs[j].Name {
			return cs[i].Name < cs[j].Name
		}
		return cs[i].Source < cs[j].Source
	})
}

// ValidateProxyURL accepts http, https and socks5 URLs with a host and no
// user info (the configuration holds no secrets). Errors never quote the
// URL.
func ValidateProxyURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.User != nil {
		return errors.New("must not carry user info (the configuration holds no secrets)")
	}
	switch u.Scheme {
	case "http", "https", "socks5":
	default:
		return errors.New("scheme must be http, https or socks5")
	}
	if u.Hostname() == "" {
		return errors.New("has no host")
	}
	return nil
}

// ParseNamespaces reads a namespace list written in a tag, label or
// annotation ("a,b" or "a b"): each must be a valid namespace name, and an
// empty list is an error, because an empty Namespaces means every namespace
// and a broken value must never widen access.
func ParseNamespaces(v string) ([]string, error) {
	var out []string
	for _, ns := range strings.FieldsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || r == ',' }) {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("%q is not a namespace name", ns)
		}
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no namespace listed")
	}
	return out, nil
}
