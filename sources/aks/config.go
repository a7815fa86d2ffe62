package aks

import (
	"fmt"
	"slices"
	"strings"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
)

// Config is the aks section of a source. The service calls Default, then
// SetDirectory, then Validate (which reports every problem at once, each
// with its full path), then NewSource. sources/aks/README.md describes
// every key for users.
type Config struct {
	// TenantID and ClientID select the identity this service uses to call
	// Azure Resource Manager: workload identity first (AZURE_FEDERATED_TOKEN_FILE
	// from the webhook), then managed identity with ClientID, then the
	// default chain (environment, managed identity, Azure CLI). Both may be
	// left empty when the environment provides them.
	TenantID string `json:"tenantID,omitempty"`
	ClientID string `json:"clientID,omitempty"`
	// Cloud is AzurePublic (default), AzureChina or AzureGovernment.
	Cloud string `json:"cloud,omitempty"`

	// Subscriptions to list, by id. Empty means every subscription the
	// identity can see, except Deleted ones (see the package doc).
	Subscriptions []string `json:"subscriptions,omitempty"`
	// ResourceGroups, when set, keeps only clusters in these resource groups
	// (names compared case-insensitively, as Azure does). Each subscription
	// is still listed with one paged call; the filter is applied here.
	ResourceGroups []string `json:"resourceGroups,omitempty"`
	// ProvisioningStates and PowerStates were state filters. They are kept
	// only so that a configuration still setting them is rejected with an
	// explanation instead of "unknown field": every cluster is now listed
	// and its state mapped to a phase (see the package doc).
	ProvisioningStates []string `json:"provisioningStates,omitempty"`
	PowerStates        []string `json:"powerStates,omitempty"`

	// IncludeTags keeps only clusters carrying every one of these tags;
	// ExcludeTags drops clusters carrying any of them. Tag keys match
	// case-insensitively (as in Azure), values exactly; the value "*"
	// matches any value.
	IncludeTags map[string]string `json:"includeTags,omitempty"`
	ExcludeTags map[string]string `json:"excludeTags,omitempty"`
	// LabelTags lists the tag keys copied to labels (empty: every tag);
	// IgnoreTags lists tag keys never copied. Keys are case-insensitive.
	LabelTags  []string `json:"labelTags,omitempty"`
	IgnoreTags []string `json:"ignoreTags,omitempty"`

	// TenantTag, ProjectTag and NamespacesTag name the tags that scope a
	// cluster in Argo CD. Defaults: tenant, argocd-project,
	// argocd-namespaces (as for EKS). The namespaces tag holds names
	// separated by commas, semicolons or spaces. A project or namespaces
	// tag that is present but invalid lists the cluster as not ready
	// rather than widening its scope.
	TenantTag     string `json:"tenantTag,omitempty"`
	ProjectTag    string `json:"projectTag,omitempty"`
	NamespacesTag string `json:"namespacesTag,omitempty"`

	// PrivateEndpoints decides what happens to private clusters
	// (apiServerAccessProfile.enablePrivateCluster).
	PrivateEndpoints PrivateEndpoints `json:"privateEndpoints,omitzero"`
	// PrivateClusters is the old name of PrivateEndpoints.Policy.
	//
	// Deprecated: use PrivateEndpoints.Policy.
	PrivateClusters PrivatePolicy `json:"privateClusters,omitempty"`
	// PrivateProxyURL is the old name of PrivateEndpoints.ProxyURL.
	//
	// Deprecated: use PrivateEndpoints.ProxyURL.
	PrivateProxyURL string `json:"privateProxyURL,omitempty"`

	// CATTL is how long a cluster's CA, read with listClusterUserCredential,
	// is reused before it is read again: between 80% and 100% of CATTL,
	// fixed per cluster, so that reads spread out. Default 1h.
	CATTL sources.Duration `json:"caTTL,omitzero"`
	// CAErrorTTL is how long a failed CA read (e.g. 403: the identity
	// lacks listClusterUserCredential/action) is remembered before the call
	// is made again. Meanwhile the cluster keeps its expired CA, or is
	// listed as not ready when it never had one. Default 5m.
	CAErrorTTL sources.Duration `json:"caErrorTTL,omitzero"`
	// Concurrency bounds the calls in flight: subscriptions listed at once,
	// then CA reads at once. Default 8.
	Concurrency int `json:"concurrency,omitempty"`

	// NamePrefix is put before every cluster name, to keep names unique
	// across sources (for example "aks-").
	NamePrefix string `json:"namePrefix,omitempty"`
	// NameTemplate renders the rest of the name (Go text/template) from
	// .Name, .ResourceGroup, .Subscription, .Location and .Tags, with the
	// function lower. Default "{{.Name}}". An AKS name is unique only within
	// its resource group: when two clusters render to one name, both are
	// listed and the inventory serves neither (a name conflict), so with
	// several subscriptions use e.g. "{{.Name}}-{{.ResourceGroup | lower}}".
	NameTemplate string `json:"nameTemplate,omitempty"`

	// Auth is how Argo CD authenticates to the clusters.
	Auth AuthConfig `json:"auth,omitempty"`

	// ARMEndpoint overrides the cloud's Resource Manager endpoint (Azure
	// Stack, or a test server). It must be https.
	ARMEndpoint string `json:"armEndpoint,omitempty"`
}

// PrivateEndpoints is the policy for private clusters.
type PrivateEndpoints struct {
	// Policy is exclude (default), privateFQDN (server
	// https://<privateFQDN>:443; Argo CD must reach the private endpoint,
	// for example through ProxyURL) or publicFQDN (server
	// https://<fqdn>:443, only for clusters with
	// enablePrivateClusterPublicFQDN; others are excluded).
	Policy PrivatePolicy `json:"policy,omitempty"`
	// ProxyURL, when set, is the proxy Argo CD uses for private clusters
	// (proxyUrl in the cluster Secret): http, https or socks5, without
	// user info.
	ProxyURL string `json:"proxyUrl,omitempty"`
}

// PrivatePolicy says how private clusters are served.
type PrivatePolicy string

// The private cluster policies.
const (
	PrivateExclude    PrivatePolicy = "exclude"
	PrivateFQDN       PrivatePolicy = "privateFQDN"
	PrivatePublicFQDN PrivatePolicy = "publicFQDN"
)

const (
	defaultCATTL       = time.Hour
	defaultCAErrorTTL  = 5 * time.Minute
	minTTL             = time.Second
	defaultLoginMethod = "workloadidentity"
	defaultCommand     = "argocd-k8s-auth"
	defaultAPIVersion  = "client.authentication.k8s.io/v1beta1"
)

// Default fills every unset field with its default. A deprecated key's
// value is copied to its replacement when the replacement is unset; the
// old key is kept, for Deprecations and Validate to see.
func (c *Config) Default() {
	orDefault(&c.PrivateEndpoints.Policy, c.PrivateClusters)
	orDefault(&c.PrivateEndpoints.ProxyURL, c.PrivateProxyURL)
	orDefault(&c.PrivateEndpoints.Policy, PrivateExclude)
	orDefault(&c.Cloud, azurearm.DefaultCloud)
	orDefault(&c.TenantTag, azurearm.DefaultTenantTag)
	orDefault(&c.ProjectTag, azurearm.DefaultProjectTag)
	orDefault(&c.NamespacesTag, azurearm.DefaultNamespacesTag)
	orDefault(&c.CATTL, sources.D(defaultCATTL))
	orDefault(&c.CAErrorTTL, sources.D(defaultCAErrorTTL))
	orDefault(&c.Concurrency, azurearm.DefaultConcurrency)
	orDefault(&c.NameTemplate, azurearm.DefaultNameTemplate)
	orDefault(&c.Auth.Environment, aadEnvironments[c.Cloud])
	orDefault(&c.Auth.LoginMethod, defaultLoginMethod)
	orDefault(&c.Auth.Command, defaultCommand)
	orDefault(&c.Auth.APIVersion, defaultAPIVersion)
}

// orDefault sets *p to v when *p is the zero value.
func orDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// SetDirectory does nothing: the section's only file path,
// auth.federatedTokenFile, is read by argocd-k8s-auth in Argo CD's pod, not
// beside this configuration, and Validate requires it absolute.
func (c *Config) SetDirectory(string) {}

// Deprecations returns one warning per deprecated key the section sets.
func (c *Config) Deprecations(path *field.Path) []string {
	var out []string
	for _, a := range c.aliases(path) {
		if a.old != "" {
			out = append(out, fmt.Sprintf("%s is deprecated: use %s", a.oldPath, a.newPath))
		}
	}
	return out
}

// alias is a deprecated key and the key that replaces it.
type alias struct {
	oldPath, newPath *field.Path
	old, new         string
}

func (c *Config) aliases(path *field.Path) []alias {
	pe := path.Child("privateEndpoints")
	return []alias{
		{path.Child("privateClusters"), pe.Child("policy"), string(c.PrivateClusters), string(c.PrivateEndpoints.Policy)},
		{path.Child("privateProxyURL"), pe.Child("proxyUrl"), c.PrivateProxyURL, c.PrivateEndpoints.ProxyURL},
	}
}

var privatePolicies = []PrivatePolicy{PrivateExclude, PrivateFQDN, PrivatePublicFQDN}

// removedStateFilter explains why provisioningStates and powerStates are
// rejected.
const removedStateFilter = `was removed: every cluster is listed and its AKS state mapped to a phase (see "Cluster lifecycle" in the README)`

// Validate returns every problem of the section, assuming Default was
// applied, each with its full path under path. It changes nothing.
func (c *Config) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, c.identity().Validate(path)...)
	errs = append(errs, c.validateSelection(path)...)
	errs = append(errs, c.validatePrivate(path)...)
	errs = append(errs, c.validateListing(path)...)
	return append(errs, c.Auth.validate(path.Child("auth"))...)
}

// selection is the section's subscription, resource group and tag keys.
func (c *Config) selection() azurearm.Selection {
	return azurearm.Selection{
		Subscriptions: c.Subscriptions, ResourceGroups: c.ResourceGroups,
		IncludeTags: c.IncludeTags, ExcludeTags: c.ExcludeTags, LabelTags: c.LabelTags, IgnoreTags: c.IgnoreTags,
		TenantTag: c.TenantTag, ProjectTag: c.ProjectTag, NamespacesTag: c.NamespacesTag,
	}
}

// validateSelection checks which subscriptions and clusters are listed
// and which tags are read.
func (c *Config) validateSelection(path *field.Path) field.ErrorList {
	errs := c.selection().ValidateSubscriptions(path)
	if c.ProvisioningStates != nil {
		errs = append(errs, field.Forbidden(path.Child("provisioningStates"), removedStateFilter))
	}
	if c.PowerStates != nil {
		errs = append(errs, field.Forbidden(path.Child("powerStates"), removedStateFilter))
	}
	return append(errs, c.selection().ValidateTags(path)...)
}

// validatePrivate checks privateEndpoints and its deprecated aliases. A
// value copied from an alias is reported at the alias, the key the file
// used.
func (c *Config) validatePrivate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	as := c.aliases(path)
	for _, a := range as {
		if a.old != "" && a.new != "" && a.old != a.new {
			errs = append(errs, field.Invalid(a.oldPath, field.OmitValueType{},
				fmt.Sprintf("conflicts with %s, which replaces it: remove it", a.newPath)))
		}
	}
	at := func(a alias) *field.Path {
		if a.old != "" && a.old == a.new {
			return a.oldPath
		}
		return a.newPath
	}
	if !slices.Contains(privatePolicies, c.PrivateEndpoints.Policy) {
		errs = append(errs, field.NotSupported(at(as[0]), c.PrivateEndpoints.Policy, privatePolicies))
	}
	if u := c.PrivateEndpoints.ProxyURL; u != "" {
		if err := sources.ValidateProxyURL(u); err != nil {
			errs = append(errs, field.Invalid(at(as[1]), azurearm.RedactURL(u), err.Error()))
		}
	}
	return errs
}

// validateListing checks the CA cache, the concurrency and the names.
func (c *Config) validateListing(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, d := range []struct {
		name string
		d    sources.Duration
	}{{"caTTL", c.CATTL}, {"caErrorTTL", c.CAErrorTTL}} {
		if err := d.d.Validate(path.Child(d.name), minTTL, 0); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Concurrency < 1 || c.Concurrency > azurearm.MaxConcurrency {
		errs = append(errs, field.Invalid(path.Child("concurrency"), c.Concurrency, fmt.Sprintf("must be between 1 and %d", azurearm.MaxConcurrency)))
	}
	if strings.ContainsFunc(c.NamePrefix, isBadNameRune) {
		errs = append(errs, field.Invalid(path.Child("namePrefix"), c.NamePrefix, "must not contain spaces or control characters"))
	}
	if _, err := parseNameTemplate(c.NameTemplate); err != nil {
		errs = append(errs, field.Invalid(path.Child("nameTemplate"), c.NameTemplate, err.Error()))
	}
	return errs
}

func isBadNameRune(r rune) bool {
	return r <= ' ' || r == 0x7f
}

// nameData is what NameTemplate sees.
type nameData azurearm.NameData

func parseNameTemplate(s string) (*template.Template, error) {
	return azurearm.ParseNameTemplate(s, nameData(azurearm.SampleName()))
}
