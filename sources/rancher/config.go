package rancher

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Defaults of Config, written by Default only.
const (
	defaultPageLimit            = 1000
	defaultRequestTimeout       = 30 * time.Second
	defaultACELabel             = "argocd-cluster-discovery.io/ace"
	defaultTenantLabel          = "tenant"
	defaultProjectLabel         = "argocd-project"
	defaultNamespacesAnnotation = "argocd-namespaces"
	defaultTokenTTL             = 24 * time.Hour
	// minTokenTTL leaves a per-cluster token time to be written and used
	// before it is replaced.
	minTokenTTL = 10 * time.Minute
	// maxPageLimit is the largest page norman serves (a larger limit is
	// cut to it).
	maxPageLimit = 10000
)

// defaultDropPrefixes are the label and annotation key prefixes that
// Rancher and its controllers write for their own use. They are left out
// of the clusters' labels and annotations by default: they say nothing a
// user selects on, and some change on every refresh (ke-last-refresh), which
// would make every listing a new snapshot.
func defaultDropPrefixes() []string {
	return []string{
		"objectset.rio.cattle.io/",
		"field.cattle.io/",
		"lifecycle.cattle.io/",
		"authz.management.cattle.io/",
		"management.cattle.io/",
		"clusters.management.cattle.io/",
		"provisioning.cattle.io/",
		"rancher.io/imported-cluster-version-management",
		"cattle.io/creator",
		"cattle.io/status",
		"kubectl.kubernetes.io/last-applied-configuration",
	}
}

// Config is the `rancher:` section of a source: one Rancher server. It is a
// sources.ProviderConfig: the service calls Default, SetDirectory and
// Validate, then NewSource.
type Config struct {
	// URL is the Rancher server, e.g. https://rancher.example.com, without
	// /v3 or any other path. Clusters are served through its auth proxy,
	// <url>/k8s/clusters/<id>, unless SecretURL is set.
	URL string `json:"url"`
	// SecretURL is the base URL Argo CD reaches Rancher by, when it is not
	// URL (e.g. an in-cluster service): the proxied clusters' server is
	// <secretURL>/k8s/clusters/<id>. Validated as URL; discovery itself
	// never uses it, nor does an authorized cluster endpoint. Its
	// certificate must chain to the CA written (caFile or cacerts).
	SecretURL string `json:"secretURL,omitempty"`
	// Token is the Rancher API token (token-xxxxx:secret), from a file or
	// an environment variable. A file is re-read at every listing, so a
	// rotated token is used without a restart. The same reference is the
	// clusters' bearer token for Argo CD.
	Token sources.SecretRef `json:"token"`
	// CAFile is a PEM bundle that Rancher's certificate chains to. When set
	// it is used both to trust Rancher and as the proxied clusters' caData,
	// and /v3/settings/cacerts is not read. Without it the system roots
	// are trusted and caData is Rancher's cacerts setting (none when that
	// is empty, i.e. Rancher has a publicly trusted certificate). The file
	// is re-read at every listing.
	CAFile string `json:"caFile,omitempty"`
	// Events subscribes to Rancher's cluster events (/v3/subscribe, the
	// leader only): a change, a removal or a reconnect lists the source
	// within about a second instead of at its interval; the listing stays
	// the only truth. Default true.
	Events *bool `json:"events,omitempty"`
	// PageLimit is the page size of the cluster list, 1 to 10000. Default
	// 1000.
	PageLimit int `json:"pageLimit,omitempty"`
	// States was removed: every cluster is listed, whatever its Rancher
	// state, and the state is mapped to a phase (see phase). The key is
	// kept only so that Validate rejects it, instead of a configuration
	// written for the old filter failing as an unknown key or being read
	// as a filter that no longer applies.
	States []string `json:"states,omitempty"`
	// IncludeLocal lists Rancher's own cluster (id local, internal).
	// Default false.
	IncludeLocal bool `json:"includeLocal,omitempty"`
	// LabelSelector and NameRegex keep only the clusters they match;
	// ExcludeLabelSelector and ExcludeNameRegex drop the clusters they
	// match. Selectors are Kubernetes label selectors over the Rancher
	// cluster's labels (before dropping); regexes match the Rancher display
	// name (unanchored: write ^...$ for a whole name).
	LabelSelector        string `json:"labelSelector,omitempty"`
	NameRegex            string `json:"nameRegex,omitempty"`
	ExcludeLabelSelector string `json:"excludeLabelSelector,omitempty"`
	ExcludeNameRegex     string `json:"excludeNameRegex,omitempty"`
	// DropLabelPrefixes and DropAnnotationPrefixes are key prefixes left
	// out of the clusters' labels and annotations. Default: Rancher's own
	// prefixes (see defaultDropPrefixes); write [] to keep everything.
	DropLabelPrefixes      []string `json:"dropLabelPrefixes"`
	DropAnnotationPrefixes []string `json:"dropAnnotationPrefixes"`
	// ACE chooses between Rancher's proxy and the clusters' authorized
	// cluster endpoints (https://<localClusterAuthEndpoint.fqdn>, with its
	// caCerts); see ACEPolicy. Default false, the proxy.
	ACE ACEPolicy `json:"ace,omitempty"`
	// ACELabel is the cluster label that sets ACE for one cluster ("true",
	// "false" or "auto"). Default argocd-cluster-discovery.io/ace. The
	// label is the cluster owner's: it narrows, never widens. "false"
	// always sends the cluster through the proxy; "true" and "auto" count
	// only where ACE (the key above) is true or auto.
	ACELabel string `json:"aceLabel,omitempty"`
	// ACEAllowedHosts are the hosts an authorized cluster endpoint may
	// name: a host name, or *.<domain> for any name under it. The fqdn is
	// the cluster owner's to set, and Argo CD sends the cluster's token
	// there: required when ACE is true or auto. An fqdn that matches none
	// (or carries a path, user info or a query, or names an in-cluster
	// host, a loopback, link-local or unspecified address, or Rancher
	// itself) makes the cluster not ready.
	ACEAllowedHosts []string `json:"aceAllowedHosts,omitempty"`
	// ClusterTokens is shared (default: every cluster uses Token) or
	// perCluster (each cluster gets a Rancher token scoped to it). A cluster
	// served through its authorized cluster endpoint always gets its own
	// token, whatever this says: the endpoint accepts only tokens scoped to
	// its cluster.
	ClusterTokens string `json:"clusterTokens,omitempty"`
	// TokenTTL is the lifetime of the per-cluster tokens. Default 24h,
	// at least 10m.
	TokenTTL sources.Duration `json:"tokenTTL,omitzero"`
	// TokenGracePeriod is how long a per-cluster token stays valid after
	// the cluster's Secret holds its replacement (Argo CD's cached cluster
	// config, a write of an earlier leader in flight). Default 10m, at
	// least 1s.
	TokenGracePeriod sources.Duration `json:"tokenGracePeriod,omitzero"`
	// TenantLabel and ProjectLabel name the cluster labels read into the
	// cluster's tenant and Argo CD project; NamespacesAnnotation names the
	// annotation that lists its namespaces (comma- or whitespace-separated).
	// Defaults tenant, argocd-project, argocd-namespaces.
	TenantLabel          string `json:"tenantLabel,omitempty"`
	ProjectLabel         string `json:"projectLabel,omitempty"`
	NamespacesAnnotation string `json:"namespacesAnnotation,omitempty"`
	// Tenant, Project and Namespaces apply to clusters without the label or
	// annotation above.
	Tenant     string   `json:"tenant,omitempty"`
	Project    string   `json:"project,omitempty"`
	Namespaces []string `json:"namespaces,omitempty"`
	// NamePrefix is put before the Rancher display name to make the Argo CD
	// cluster name. Default none. Names must be unique across all sources,
	// and display names (and ids, and the local cluster) repeat from one
	// Rancher server to the next: give each Rancher source its own prefix
	// when several are configured (e.g. "eu-" and "us-"). A name listed
	// twice is served for neither cluster and reported as a conflict.
	NamePrefix string `json:"namePrefix,omitempty"`
	// RequestTimeout bounds each HTTP request to Rancher. Default 30s.
	RequestTimeout sources.Duration `json:"requestTimeout,omitzero"`
}

var _ sources.ProviderConfig = (*Config)(nil)

// ACEPolicy is the value of the ace key and label: which endpoint Argo CD
// is given for a cluster.
type ACEPolicy string

// The ACE policies.
const (
	// ACEOff is Rancher's proxy, <url or secretURL>/k8s/clusters/<id>.
	ACEOff ACEPolicy = "false"
	// ACEOn is the authorized cluster endpoint; a cluster without one
	// enabled with an fqdn is listed not ready.
	ACEOn ACEPolicy = "true"
	// ACEAuto is the authorized cluster endpoint when the cluster has one
	// enabled with an fqdn, else the proxy, as Rancher's own kubeconfig
	// does (hosted EKS, AKS and GKE clusters never have one; RKE2, K3s and
	// imported clusters have one only when it is enabled).
	ACEAuto ACEPolicy = "auto"
)

// aceValues are the values of ACEPolicy, for error messages.
var aceValues = []string{string(ACEOff), string(ACEOn), string(ACEAuto)}

// Valid reports whether p is one of the policies.
func (p ACEPolicy) Valid() bool {
	return p == ACEOff || p == ACEOn || p == ACEAuto
}

// UnmarshalJSON reads a policy, or a boolean as the ace key was before
// auto (true and false keep their meaning). Like sources.Duration, any
// other value is kept as written, for Validate to report at its path.
func (p *ACEPolicy) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case nil: // null leaves the value unset, as for other keys
	case bool:
		*p = ACEPolicy(strconv.FormatBool(v))
	case string:
		*p = ACEPolicy(v)
	default:
		*p = ACEPolicy(b)
	}
	return nil
}

// The values of Config.ClusterTokens.
const (
	ClusterTokensShared     = "shared"
	ClusterTokensPerCluster = "perCluster"
)

// EventsOn reports whether the source subscribes to Rancher's cluster
// events (Events, true unless written false).
func (c *Config) EventsOn() bool { return c.Events == nil || *c.Events }

// OwnerChoosesServers implements sources.OwnerChosenServers: with ace
// true or auto a cluster's owner sets its endpoint's fqdn in Rancher.
func (c *Config) OwnerChoosesServers() bool { return c.ACE == ACEOn || c.ACE == ACEAuto }

// Default fills every unset field with its default. It is the only place
// the defaults are written.
func (c *Config) Default() {
	if c.Events == nil {
		on := true
		c.Events = &on
	}
	if c.PageLimit == 0 {
		c.PageLimit = defaultPageLimit
	}
	if c.DropLabelPrefixes == nil {
		c.DropLabelPrefixes = defaultDropPrefixes()
	}
	if c.DropAnnotationPrefixes == nil {
		c.DropAnnotationPrefixes = defaultDropPrefixes()
	}
	if c.ACE == "" {
		c.ACE = ACEOff
	}
	if c.ACELabel == "" {
		c.ACELabel = defaultACELabel
	}
	if c.ClusterTokens == "" {
		c.ClusterTokens = ClusterTokensShared
	}
	if c.TokenTTL.IsZero() {
		c.TokenTTL = sources.D(defaultTokenTTL)
	}
	if c.TokenGracePeriod.IsZero() {
		c.TokenGracePeriod = sources.D(defaultTokenGrace)
	}
	if c.TenantLabel == "" {
		c.TenantLabel = defaultTenantLabel
	}
	if c.ProjectLabel == "" {
		c.ProjectLabel = defaultProjectLabel
	}
	if c.NamespacesAnnotation == "" {
		c.NamespacesAnnotation = defaultNamespacesAnnotation
	}
	if c.RequestTimeout.IsZero() {
		c.RequestTimeout = sources.D(defaultRequestTimeout)
	}
}

// CredentialRefs implements sources.CredentialRefs: the API token.
func (c *Config) CredentialRefs(path *field.Path) []sources.RefAt {
	return []sources.RefAt{{Path: path.Child("token"), Ref: &c.Token}}
}

// SetDirectory makes the relative paths of token.file and caFile relative
// to dir, the configuration file's directory.
func (c *Config) SetDirectory(dir string) {
	if c.Token.File != "" && !filepath.IsAbs(c.Token.File) {
		c.Token.File = filepath.Join(dir, c.Token.File)
	}
	if c.CAFile != "" && !filepath.IsAbs(c.CAFile) {
		c.CAFile = filepath.Join(dir, c.CAFile)
	}
}

// statesRemoved is the detail of the error on the removed states key.
const statesRemoved = `removed: every cluster is listed and its Rancher state mapped to a phase (see "Cluster lifecycle" in the README)`

// Validate returns every problem of a defaulted section, each with its full
// path under path (nil: paths relative to the section). It reads no file
// and changes nothing.
func (c *Config) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := parseURL(c.URL); err != nil {
		if strings.TrimSpace(c.URL) == "" {
			errs = append(errs, field.Required(path.Child("url"), "the Rancher server's base URL"))
		} else {
			// Never the value: a malformed URL may carry user info.
			errs = append(errs, field.Invalid(path.Child("url"), field.OmitValueType{}, err.Error()))
		}
	}
	if _, err := parseURL(c.SecretURL); c.SecretURL != "" && err != nil {
		if strings.TrimSpace(c.SecretURL) == "" {
			err = errors.New("blank: leave secretURL out to use url")
		}
		errs = append(errs, field.Invalid(path.Child("secretURL"), field.OmitValueType{}, err.Error()))
	}
	errs = append(errs, validateTokenRef(path.Child("token"), &c.Token)...)
	if c.PageLimit < 1 || c.PageLimit > maxPageLimit {
		errs = append(errs, field.Invalid(path.Child("pageLimit"), c.PageLimit, fmt.Sprintf("must be between 1 and %d", maxPageLimit)))
	}
	if c.States != nil {
		errs = append(errs, field.Forbidden(path.Child("states"), statesRemoved))
	}
	for _, f := range []struct{ key, v string }{{"labelSelector", c.LabelSelector}, {"excludeLabelSelector", c.ExcludeLabelSelector}} {
		if _, err := parseSelector(f.v); err != nil {
			errs = append(errs, field.Invalid(path.Child(f.key), f.v, err.Error()))
		}
	}
	for _, f := range []struct{ key, v string }{{"nameRegex", c.NameRegex}, {"excludeNameRegex", c.ExcludeNameRegex}} {
		if _, err := parseRegex(f.v); err != nil {
			errs = append(errs, field.Invalid(path.Child(f.key), f.v, err.Error()))
		}
	}
	for _, f := range []struct{ key, v string }{{"aceLabel", c.ACELabel}, {"tenantLabel", c.TenantLabel},
		{"projectLabel", c.ProjectLabel}, {"namespacesAnnotation", c.NamespacesAnnotation}} {
		if msgs := validation.IsQualifiedName(f.v); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child(f.key), f.v, "not a valid key: "+strings.Join(msgs, "; ")))
		}
	}
	if !c.ACE.Valid() {
		errs = append(errs, field.NotSupported(path.Child("ace"), string(c.ACE), aceValues))
	}
	errs = append(errs, validateAllowedHosts(path.Child("aceAllowedHosts"), c.ACEAllowedHosts)...)
	if c.ACE.Valid() && c.ACE != ACEOff && len(c.ACEAllowedHosts) == 0 {
		errs = append(errs, field.Required(path.Child("aceAllowedHosts"),
			"ace "+string(c.ACE)+" sends each cluster's token to the fqdn its owner sets in Rancher: name the hosts it may be (e.g. \"*.k8s.example.com\")"))
	}
	if c.ClusterTokens != ClusterTokensShared && c.ClusterTokens != ClusterTokensPerCluster {
		errs = append(errs, field.NotSupported(path.Child("clusterTokens"), c.ClusterTokens,
			[]string{ClusterTokensShared, ClusterTokensPerCluster}))
	}
	if err := c.TokenTTL.Validate(path.Child("tokenTTL"), minTokenTTL, 0); err != nil {
		errs = append(errs, err)
	}
	if err := c.TokenGracePeriod.Validate(path.Child("tokenGracePeriod"), time.Second, 0); err != nil {
		errs = append(errs, err)
	}
	for i, ns := range c.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child("namespaces").Index(i), ns, "not a namespace name"))
		}
	}
	p := path.Child("requestTimeout")
	if err := c.RequestTimeout.Validate(p, 0, 0); err != nil {
		errs = append(errs, err)
	} else if c.RequestTimeout.Std() <= 0 {
		errs = append(errs, field.Invalid(p, c.RequestTimeout.String(), "must be positive"))
	}
	return errs
}

// validateTokenRef accepts a file or an environment variable: the source
// reads the token itself and has no access to Kubernetes Secrets.
func validateTokenRef(path *field.Path, r *sources.SecretRef) field.ErrorList {
	if r.File == "" && r.Env == "" && r.Secret == nil {
		return field.ErrorList{field.Required(path, "set file or env")}
	}
	if err := r.Validate(); err != nil {
		return field.ErrorList{field.Invalid(path, field.OmitValueType{}, err.Error())}
	}
	if r.Secret != nil {
		return field.ErrorList{field.Forbidden(path.Child("secret"), "a Kubernetes Secret reference is not supported here: set file or env")}
	}
	return nil
}

// parseURL checks the server URL and returns it without a trailing slash.
// Its errors never quote the URL.
func parseURL(s string) (*url.URL, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("required")
	}
	n, err := sources.NormalizeServer(s)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(n)
	if err != nil {
		return nil, errors.New("invalid url")
	}
	if u.Path != "" {
		return nil, errors.New("must be the server's base URL, without a path (no /v3)")
	}
	return u, nil
}

func parseSelector(s string) (labels.Selector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	return labels.Parse(s)
}

func parseRegex(s string) (*regexp.Regexp, error) {
	if s == "" {
		return nil, nil
	}
	return regexp.Compile(s)
}

// validateAllowedHosts checks aceAllowedHosts: each a host name or an IP
// address, or *.<domain> with a domain of two labels at least.
func validateAllowedHosts(path *field.Path, hosts []string) field.ErrorList {
	var errs field.ErrorList
	for i, h := range hosts {
		name := strings.ToLower(strings.TrimSuffix(h, "."))
		domain, wild := strings.CutPrefix(name, "*.")
		switch {
		case !wild && net.ParseIP(name) != nil:
		case len(validation.IsDNS1123Subdomain(domain)) > 0, wild && !strings.Contains(domain, "."):
			errs = append(errs, field.Invalid(path.Index(i), h, "not a host name or address, or *.<domain> (a domain of two labels at least)"))
		}
	}
	return errs
}
