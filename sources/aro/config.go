package aro

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
)

// Config is the aro section of a source. The service calls Default, then
// SetDirectory, then Validate (which reports every problem at once, each
// with its full path), then NewSource. sources/aro/README.md describes
// every key for users.
type Config struct {
	// TenantID and ClientID select the identity this service uses to call
	// Azure Resource Manager, as for the aks provider: workload identity
	// first (AZURE_FEDERATED_TOKEN_FILE from the webhook), then managed
	// identity with ClientID, then the default chain (environment, managed
	// identity, Azure CLI). Both may be left empty when the environment
	// provides them. The identity needs Reader only.
	TenantID string `json:"tenantID,omitempty"`
	ClientID string `json:"clientID,omitempty"`
	// Cloud is AzurePublic (default), AzureChina or AzureGovernment.
	Cloud string `json:"cloud,omitempty"`
	// ARMEndpoint overrides the cloud's Resource Manager endpoint (Azure
	// Stack, or a test server). It must be https.
	ARMEndpoint string `json:"armEndpoint,omitempty"`

	// Subscriptions to list, by id. Empty means every subscription the
	// identity can see, except Deleted ones (see the package doc).
	Subscriptions []string `json:"subscriptions,omitempty"`
	// ResourceGroups, when set, keeps only clusters in these resource
	// groups (names compared case-insensitively, as Azure does). Each
	// subscription is still listed with one paged call.
	ResourceGroups []string `json:"resourceGroups,omitempty"`
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
	// argocd-namespaces (as for AKS and EKS).
	TenantTag     string `json:"tenantTag,omitempty"`
	ProjectTag    string `json:"projectTag,omitempty"`
	NamespacesTag string `json:"namespacesTag,omitempty"`
	// PrivateEndpoints decides what happens to clusters whose API server
	// visibility is Private.
	PrivateEndpoints PrivateEndpoints `json:"privateEndpoints,omitzero"`

	// Concurrency bounds the subscriptions listed at once. Default 8.
	Concurrency int `json:"concurrency,omitempty"`
	// NamePrefix is put before every cluster name (for example "aro-").
	NamePrefix string `json:"namePrefix,omitempty"`
	// NameTemplate renders the rest of the name (Go text/template) from
	// .Name, .ResourceGroup, .Subscription, .Location and .Tags, with the
	// function lower. Default "{{.Name}}". The prefix and the rendering
	// are made a DNS label (see dnsLabel): an ARM name may hold '_', '.',
	// '(' and ')' and 90 characters.
	NameTemplate string `json:"nameTemplate,omitempty"`

	// Auth is how Argo CD reaches the clusters: bearerToken (the default),
	// a token Secret bound to each cluster by an operator
	// (sources.BoundToken); or agent, through the Argo CD agent, with the
	// cluster Secret its tooling wrote and the hub bound to the cluster
	// (sources.AgentIndex.Join): the service writes no Secret for them.
	Auth string `json:"auth,omitempty"`
	// Agent configures auth agent.
	Agent Agent `json:"agent,omitzero"`
	// ManagedDomains are the API host suffixes of managed-domain clusters,
	// whose API certificate is publicly trusted: no caData. Default
	// [".aroapp.io"].
	ManagedDomains []string `json:"managedDomains,omitempty"`
	// CustomDomainCA is the CA of custom-domain clusters by domain: a key
	// matches an API host equal to it or ending in "."+key, the longest
	// key first. ARM exposes no CA for these clusters.
	CustomDomainCA map[string]CARef `json:"customDomainCA,omitempty"`
	// DefaultCA is the CA of custom-domain clusters no CustomDomainCA key
	// matches. Without it such a cluster is listed not ready.
	DefaultCA CARef `json:"defaultCA,omitzero"`
}

// ThroughAgents reports whether the section's clusters are served through
// the Argo CD agent (auth agent).
func (c *Config) ThroughAgents() bool { return c.Auth == AuthAgent }

// OwnerChoosesServers implements sources.OwnerChosenServers: an ARO
// cluster's owner chooses its API server's domain (through an agent, the
// server is the agent's resource proxy).
func (c *Config) OwnerChoosesServers() bool { return c.Auth != AuthAgent }

// Agent is how agent mode finds a cluster's agent.
type Agent struct {
	// Tag is the ARM tag by which a cluster's owner may name its agent
	// (default argocd-agent-name). It only narrows: the agent's Secret
	// must be bound to the cluster, and a tag naming another agent
	// refuses the join.
	Tag string `json:"tag,omitempty"`
}

// PrivateEndpoints is the policy for clusters with a Private API server.
type PrivateEndpoints struct {
	// Policy is include (default: the cluster is listed; Argo CD must
	// reach its VNet, for example through ProxyURL) or exclude.
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
	PrivateInclude PrivatePolicy = "include"
	PrivateExclude PrivatePolicy = "exclude"
)

// AuthBearerToken is the auth mode of a cluster reached with a bearer token
// from a Secret an operator binds to it.
const AuthBearerToken = string(sources.AuthBearerToken)

// AuthAgent is the auth mode of clusters reached through the Argo CD agent.
const AuthAgent = string(sources.AuthAgent)

// CARef is a CA bundle given in the configuration: CAData, base64 of a PEM
// bundle (as caData of an Argo CD cluster Secret and of a static cluster),
// or CAFile, the path of a PEM bundle, read at start-up and again at each
// listing (so that a mounted ConfigMap's update is taken).
type CARef struct {
	CAData string `json:"caData,omitempty"`
	CAFile string `json:"caFile,omitempty"`
}

// IsZero reports whether no CA is given.
func (r CARef) IsZero() bool { return r.CAData == "" && r.CAFile == "" }

// maxNamePrefix bounds namePrefix, so that a name keeps room for the
// cluster's own.
const maxNamePrefix = 40

// defaultManagedDomains is the public cloud's zone of managed domains
// (ARO-RP pkg/util/dns: a domain is managed when it is one label under the
// resource provider's zone, <location>.aroapp.io in the public cloud).
var defaultManagedDomains = []string{".aroapp.io"}

// Default fills every unset field with its default.
func (c *Config) Default() {
	orDefault(&c.Cloud, azurearm.DefaultCloud)
	orDefault(&c.TenantTag, azurearm.DefaultTenantTag)
	orDefault(&c.ProjectTag, azurearm.DefaultProjectTag)
	orDefault(&c.NamespacesTag, azurearm.DefaultNamespacesTag)
	orDefault(&c.PrivateEndpoints.Policy, PrivateInclude)
	orDefault(&c.Concurrency, azurearm.DefaultConcurrency)
	orDefault(&c.NameTemplate, azurearm.DefaultNameTemplate)
	orDefault(&c.Auth, AuthBearerToken)
	if c.Auth == AuthAgent {
		orDefault(&c.Agent.Tag, sources.DefaultAgentTag)
	}
	if c.ManagedDomains == nil {
		c.ManagedDomains = slices.Clone(defaultManagedDomains)
	}
}

// orDefault sets *p to v when *p is the zero value.
func orDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// SetDirectory makes the relative caFile paths relative to dir, the
// configuration file's directory.
func (c *Config) SetDirectory(dir string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	c.DefaultCA.CAFile = abs(c.DefaultCA.CAFile)
	for k, r := range c.CustomDomainCA {
		r.CAFile = abs(r.CAFile)
		c.CustomDomainCA[k] = r
	}
}

var (
	privatePolicies = []PrivatePolicy{PrivateInclude, PrivateExclude}
	authModes       = []string{AuthBearerToken, AuthAgent}
)

// Validate returns every problem of the section, assuming Default was
// applied, each with its full path under path. It changes nothing and
// reads no file (NewSource reads the CA files).
func (c *Config) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, c.identity().Validate(path)...)
	errs = append(errs, c.validateSelection(path)...)
	errs = append(errs, c.validateListing(path)...)
	return append(errs, c.validateTrust(path)...)
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
	errs = append(errs, c.selection().ValidateTags(path)...)
	if !slices.Contains(privatePolicies, c.PrivateEndpoints.Policy) {
		errs = append(errs, field.NotSupported(path.Child("privateEndpoints", "policy"), c.PrivateEndpoints.Policy, privatePolicies))
	}
	if u := c.PrivateEndpoints.ProxyURL; u != "" {
		if err := sources.ValidateProxyURL(u); err != nil {
			errs = append(errs, field.Invalid(path.Child("privateEndpoints", "proxyUrl"), azurearm.RedactURL(u), err.Error()))
		}
	}
	return errs
}

// validateListing checks the concurrency, the names and the auth mode.
func (c *Config) validateListing(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Concurrency < 1 || c.Concurrency > azurearm.MaxConcurrency {
		errs = append(errs, field.Invalid(path.Child("concurrency"), c.Concurrency, fmt.Sprintf("must be between 1 and %d", azurearm.MaxConcurrency)))
	}
	if !prefixRE.MatchString(c.NamePrefix) || len(c.NamePrefix) > maxNamePrefix {
		errs = append(errs, field.Invalid(path.Child("namePrefix"), c.NamePrefix,
			fmt.Sprintf("must be lower-case letters, digits and '-', starting with a letter or digit, at most %d characters", maxNamePrefix)))
	}
	if _, err := parseNameTemplate(c.NameTemplate); err != nil {
		errs = append(errs, field.Invalid(path.Child("nameTemplate"), c.NameTemplate, err.Error()))
	}
	if !slices.Contains(authModes, c.Auth) {
		errs = append(errs, field.NotSupported(path.Child("auth"), c.Auth, authModes))
	}
	if c.Agent != (Agent{}) && c.Auth != AuthAgent {
		errs = append(errs, field.Forbidden(path.Child("agent"), "only with auth: agent"))
	}
	if t := c.Agent.Tag; c.Auth == AuthAgent && strings.TrimSpace(t) == "" {
		errs = append(errs, field.Invalid(path.Child("agent", "tag"), t, "empty tag key"))
	}
	return errs
}

// prefixRE is a name prefix: the start of a DNS label.
var prefixRE = regexp.MustCompile(`^([a-z0-9][-a-z0-9]*)?$`)

// validateTrust checks the managed domains and the configured CAs. A
// caData that does not parse is reported here; a caFile is read by
// NewSource.
func (c *Config) validateTrust(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(c.ManagedDomains) == 0 {
		errs = append(errs, field.Required(path.Child("managedDomains"), `at least one suffix, e.g. ".aroapp.io"`))
	}
	for i, d := range c.ManagedDomains {
		if !isDomain(strings.TrimPrefix(d, ".")) {
			errs = append(errs, field.Invalid(path.Child("managedDomains").Index(i), d, `not a domain suffix such as ".aroapp.io"`))
		}
	}
	seen := map[string]string{}
	for _, k := range sortedKeys(c.CustomDomainCA) {
		p := path.Child("customDomainCA").Key(k)
		norm := domainKey(k)
		switch other, dup := seen[norm]; {
		case !isDomain(norm):
			errs = append(errs, field.Invalid(p, k, "not a domain such as ocp.example.com"))
		case dup:
			e := field.Duplicate(p, k)
			e.Detail = "repeats " + path.Child("customDomainCA").Key(other).String() + " (domains compare case-insensitively)"
			errs = append(errs, e)
		}
		seen[norm] = k
		errs = append(errs, c.CustomDomainCA[k].validate(p)...)
	}
	if !c.DefaultCA.IsZero() {
		errs = append(errs, c.DefaultCA.validate(path.Child("defaultCA"))...)
	}
	return errs
}

// validate checks a CA reference: exactly one of caData and caFile, and a
// caData that is base64 of a PEM bundle. No error quotes caData.
func (r CARef) validate(path *field.Path) field.ErrorList {
	switch {
	case r.CAData != "" && r.CAFile != "":
		return field.ErrorList{field.Invalid(path, field.OmitValueType{}, "set caData or caFile, not both")}
	case r.CAData == "" && r.CAFile == "":
		return field.ErrorList{field.Required(path, "caData or caFile")}
	case r.CAData != "":
		if _, err := sources.ParseCAData(r.CAData); err != nil {
			return field.ErrorList{field.Invalid(path.Child("caData"), field.OmitValueType{}, err.Error())}
		}
	}
	return nil
}

// domainKey is the form of a domain that matching uses: lower case, no
// leading or trailing dot.
func domainKey(d string) string { return strings.Trim(strings.ToLower(strings.TrimSpace(d)), ".") }

func isDomain(d string) bool {
	return d != "" && len(validation.IsDNS1123Subdomain(strings.ToLower(d))) == 0
}

// nameData is what NameTemplate sees.
type nameData azurearm.NameData

func parseNameTemplate(s string) (*template.Template, error) {
	return azurearm.ParseNameTemplate(s, nameData(azurearm.SampleName()))
}
