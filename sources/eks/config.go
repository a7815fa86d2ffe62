package eks

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Defaults of Config, written by Default.
const (
	defaultConcurrency   = 8
	defaultDescribeTTL   = time.Hour
	defaultMaxAttempts   = 5
	defaultMaxBackoff    = 20 * time.Second
	defaultSessionName   = "argocd-cluster-discovery"
	defaultTenantTag     = "tenant"
	defaultProjectTag    = "argocd-project"
	defaultNamespacesTag = "argocd-namespaces"
	defaultRoleTag       = "argocd-role-arn"
	defaultNameTemplate  = "{{.Name}}"
	defaultExecCommand   = "argocd-k8s-auth"
)

// Bounds checked by Validate.
const (
	maxConcurrency = 100
	maxMaxAttempts = 20
)

// statusesRemoved is why Validate rejects the former statuses key.
const statusesRemoved = `was removed: every cluster is listed and its EKS status mapped to a phase (see "Cluster lifecycle" in the README)`

// Auth modes: how the Argo CD cluster Secret authenticates to a cluster.
const (
	// AuthModeAWS writes awsAuthConfig {clusterName, roleARN}.
	AuthModeAWS = "awsAuthConfig"
	// AuthModeExec writes execProviderConfig running
	// `argocd-k8s-auth aws --cluster-name X --role-arn Y` with AWS_REGION
	// set, for clusters outside the region Argo CD runs in (argocd-k8s-auth
	// has no region flag).
	AuthModeExec = "exec"
)

// Private endpoint policies, for clusters whose API server has no public
// endpoint (resourcesVpcConfig.endpointPublicAccess false).
const (
	// PrivateInclude lists them as any other: the network can reach them.
	PrivateInclude = "include"
	// PrivateExclude leaves them out of the listing.
	PrivateExclude = "exclude"
	// PrivateProxy lists them with the configured proxyUrl.
	PrivateProxy = "proxy"
)

// Config is the `eks:` section of a source: the accounts and regions to
// list and how their clusters become Argo CD clusters. The service calls
// Default, SetDirectory and Validate, then NewSource.
type Config struct {
	// Accounts to list; at least one.
	Accounts []Account `json:"accounts"`
	// Regions listed in every account that sets no regions of its own.
	// Required: there is no "all regions".
	Regions []string `json:"regions"`
	// Concurrency bounds the EKS and tagging API calls in flight at once for
	// the whole source, across accounts and regions. Default 8.
	Concurrency int `json:"concurrency,omitempty"`
	// DescribeTTL is how long a described ACTIVE cluster is reused before it
	// is described again (each entry expires up to 20% early so that a
	// fleet does not expire at once). Clusters not ACTIVE are described on
	// every listing. Default 1h.
	DescribeTTL sources.Duration `json:"describeTTL,omitzero"`
	// Statuses was removed: every cluster is listed and its EKS status
	// mapped to a phase. The key stays only so that Validate can reject it
	// with that explanation, rather than as an unknown field.
	Statuses []string `json:"statuses,omitempty"`
	// Tags choose which EKS tags become labels.
	Tags TagFilter `json:"tags,omitzero"`
	// TenantTag, ProjectTag and NamespacesTag name the tags read into the
	// cluster's tenant, Argo CD project and namespaces (whitespace- or
	// comma-separated namespace names). Defaults tenant, argocd-project,
	// argocd-namespaces.
	TenantTag     string `json:"tenantTag,omitempty"`
	ProjectTag    string `json:"projectTag,omitempty"`
	NamespacesTag string `json:"namespacesTag,omitempty"`
	// RoleTag names the tag that gives a cluster an Argo CD role of its
	// own, in place of its account's argocdRoleARN; it is read only when
	// RolePattern allows some roles. Default argocd-role-arn.
	RoleTag string `json:"roleTag,omitempty"`
	// RolePattern allow-lists the roles RoleTag may name: path.Match
	// patterns on the whole role ARN ("arn:aws:iam::*:role/argocd-*"; a
	// "*" does not cross a "/" of a role path). The value must also be a
	// role of the cluster's own partition and account. Empty (default):
	// the tag is ignored and every cluster gets its account's role.
	RolePattern []string `json:"rolePattern,omitempty"`
	// Auth chooses the form of the Secret's credentials.
	Auth AuthConfig `json:"auth,omitzero"`
	// PrivateEndpoints decides what happens to clusters without a public
	// endpoint.
	PrivateEndpoints PrivateEndpoints `json:"privateEndpoints,omitzero"`
	// NameTemplate makes the Argo CD cluster name, a text/template over
	// .Name (the EKS name), .Account and .Region. Default "{{.Name}}".
	// Names must be unique across all sources: when one EKS name exists in
	// two accounts or regions, the inventory serves neither of them and
	// reports a conflict; use e.g. "{{.Name}}-{{.Region}}" then.
	NameTemplate string `json:"nameTemplate,omitempty"`
	// Endpoint, TaggingEndpoint and STSEndpoint override the EKS, Resource
	// Groups Tagging API and STS endpoints (the SDK's BaseEndpoint), e.g.
	// for VPC endpoints or tests.
	Endpoint        string `json:"endpoint,omitempty"`
	TaggingEndpoint string `json:"taggingEndpoint,omitempty"`
	STSEndpoint     string `json:"stsEndpoint,omitempty"`
	// MaxAttempts and MaxBackoff configure the SDK's standard retryer (per
	// API call, throttling included). Defaults 5 and 20s.
	MaxAttempts int              `json:"maxAttempts,omitempty"`
	MaxBackoff  sources.Duration `json:"maxBackoff,omitzero"`
}

// Account is one AWS account to list.
type Account struct {
	// ID is the 12-digit account id.
	ID string `json:"id"`
	// RoleARN, when set, is assumed (from the base credentials) to list the
	// account; it must be a role of the account. Without it the base
	// credentials are used and must belong to the account.
	RoleARN string `json:"roleARN,omitempty"`
	// ExternalID and SessionName go with the AssumeRole call. SessionName
	// defaults to argocd-cluster-discovery.
	ExternalID  string `json:"externalID,omitempty"`
	SessionName string `json:"sessionName,omitempty"`
	// ArgocdRoleARN is the role Argo CD assumes to reach this account's
	// clusters (awsAuthConfig.roleARN); without it Argo CD uses its own
	// identity.
	ArgocdRoleARN string `json:"argocdRoleARN,omitempty"`
	// Regions overrides the source's regions for this account.
	Regions []string `json:"regions,omitempty"`
}

// TagFilter chooses tags by key, with path.Match patterns ("team",
// "example.com/*"). A tag becomes a label when Allow is empty or matches it,
// and Deny does not. Deny defaults to ["aws:*"]; write `deny: []` for none.
type TagFilter struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny"`
}

// AuthConfig chooses the credentials form of the cluster Secret.
type AuthConfig struct {
	// Mode is awsAuthConfig (default) or exec.
	Mode string `json:"mode,omitempty"`
	// Command is the exec command, default argocd-k8s-auth.
	Command string `json:"command,omitempty"`
}

// PrivateEndpoints is the policy for clusters without a public endpoint.
type PrivateEndpoints struct {
	// Policy is include (default), exclude or proxy.
	Policy string `json:"policy,omitempty"`
	// ProxyURL is required with policy proxy; it must not hold credentials.
	ProxyURL string `json:"proxyUrl,omitempty"`
}

// Default fills every unset field with its default. It is the only place
// the section's defaults are written.
func (c *Config) Default() {
	setDefault(&c.Concurrency, defaultConcurrency)
	if c.DescribeTTL.IsZero() {
		c.DescribeTTL = sources.D(defaultDescribeTTL)
	}
	if c.Tags.Deny == nil {
		c.Tags.Deny = []string{"aws:*"}
	}
	setDefault(&c.TenantTag, defaultTenantTag)
	setDefault(&c.ProjectTag, defaultProjectTag)
	setDefault(&c.NamespacesTag, defaultNamespacesTag)
	setDefault(&c.RoleTag, defaultRoleTag)
	setDefault(&c.Auth.Mode, AuthModeAWS)
	setDefault(&c.Auth.Command, defaultExecCommand)
	setDefault(&c.PrivateEndpoints.Policy, PrivateInclude)
	setDefault(&c.NameTemplate, defaultNameTemplate)
	setDefault(&c.MaxAttempts, defaultMaxAttempts)
	if c.MaxBackoff.IsZero() {
		c.MaxBackoff = sources.D(defaultMaxBackoff)
	}
	for i := range c.Accounts {
		setDefault(&c.Accounts[i].SessionName, defaultSessionName)
	}
}

// setDefault sets *v to def when it is the zero value.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// SetDirectory does nothing: the eks section has no file paths.
func (c *Config) SetDirectory(string) {}

var (
	accountIDRe   = regexp.MustCompile(`^[0-9]{12}$`)
	sessionNameRe = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
	externalIDRe  = regexp.MustCompile(`^[\w+=,.@:/-]+$`)
)

// Validate returns every problem of the section at once, each with its
// full path under path (sources[2].eks.accounts[1].roleARN: ...). It
// expects Default to have run and does not change the section. Values
// that may hold credentials (URLs, external ids) are never quoted.
func (c *Config) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(c.Regions) == 0 {
		errs = append(errs, field.Required(path.Child("regions"), `there is no "all regions"`))
	}
	errs = append(errs, validateRegions(path.Child("regions"), c.Regions)...)
	errs = append(errs, c.validateAccounts(path.Child("accounts"))...)
	errs = append(errs, inRange(path.Child("concurrency"), c.Concurrency, 1, maxConcurrency)...)
	errs = append(errs, positive(path.Child("describeTTL"), c.DescribeTTL)...)
	if c.Statuses != nil {
		errs = append(errs, field.Forbidden(path.Child("statuses"), statusesRemoved))
	}
	errs = append(errs, validatePatterns(path.Child("tags", "allow"), c.Tags.Allow)...)
	errs = append(errs, validatePatterns(path.Child("tags", "deny"), c.Tags.Deny)...)
	errs = append(errs, c.validateRoleTag(path)...)
	errs = append(errs, c.Auth.validate(path.Child("auth"))...)
	errs = append(errs, c.PrivateEndpoints.validate(path.Child("privateEndpoints"))...)
	if _, err := parseNameTemplate(c.NameTemplate); err != nil {
		errs = append(errs, field.Invalid(path.Child("nameTemplate"), c.NameTemplate, err.Error()))
	}
	errs = append(errs, validateEndpoint(path.Child("endpoint"), c.Endpoint)...)
	errs = append(errs, validateEndpoint(path.Child("taggingEndpoint"), c.TaggingEndpoint)...)
	errs = append(errs, validateEndpoint(path.Child("stsEndpoint"), c.STSEndpoint)...)
	errs = append(errs, inRange(path.Child("maxAttempts"), c.MaxAttempts, 1, maxMaxAttempts)...)
	errs = append(errs, positive(path.Child("maxBackoff"), c.MaxBackoff)...)
	return errs
}

// validateAccounts checks that there is at least one account, each listed
// once, and each account's fields.
func (c *Config) validateAccounts(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(c.Accounts) == 0 {
		errs = append(errs, field.Required(path, "at least one account is required"))
	}
	first := map[string]int{}
	for i, a := range c.Accounts {
		if j, dup := first[a.ID]; dup && accountIDRe.MatchString(a.ID) {
			e := field.Duplicate(path.Index(i).Child("id"), a.ID)
			e.Detail = "already listed by " + path.Index(j).String()
			errs = append(errs, e)
		} else if !dup {
			first[a.ID] = i
		}
		errs = append(errs, a.validate(path.Index(i), c.Regions)...)
	}
	return errs
}

// validate checks one account; regions are the source's, which it lists
// unless it has regions of its own.
func (a *Account) validate(path *field.Path, regions []string) field.ErrorList {
	var errs field.ErrorList
	if !accountIDRe.MatchString(a.ID) {
		errs = append(errs, field.Invalid(path.Child("id"), a.ID, "not a 12-digit AWS account id"))
	}
	if len(a.Regions) > 0 {
		regions = a.Regions
	}
	part := regionsPartition(regions)
	if a.RoleARN != "" {
		if r, ok := parseRoleARN(a.RoleARN); !ok {
			errs = append(errs, field.Invalid(path.Child("roleARN"), a.RoleARN, notRoleARN))
		} else if r.AccountID != a.ID {
			errs = append(errs, field.Invalid(path.Child("roleARN"), a.RoleARN,
				fmt.Sprintf("a role of account %s, not %s (the discovery role must be in the account it lists)", r.AccountID, a.ID)))
		} else if part != "" && r.Partition != part {
			errs = append(errs, field.Invalid(path.Child("roleARN"), a.RoleARN, otherPartition(r.Partition, part)))
		}
	} else if a.ExternalID != "" {
		errs = append(errs, field.Forbidden(path.Child("externalID"), "only used with roleARN"))
	}
	if a.ExternalID != "" && (!externalIDRe.MatchString(a.ExternalID) || len(a.ExternalID) < 2 || len(a.ExternalID) > 1224) {
		errs = append(errs, field.Invalid(path.Child("externalID"), field.OmitValueType{},
			"must be 2-1224 characters of letters, digits and +=,.@:/-"))
	}
	if !sessionNameRe.MatchString(a.SessionName) {
		errs = append(errs, field.Invalid(path.Child("sessionName"), a.SessionName, "must be 2-64 characters of letters, digits and +=,.@_-"))
	}
	if a.ArgocdRoleARN != "" {
		if r, ok := parseRoleARN(a.ArgocdRoleARN); !ok {
			errs = append(errs, field.Invalid(path.Child("argocdRoleARN"), a.ArgocdRoleARN, notRoleARN))
		} else if part != "" && r.Partition != part {
			errs = append(errs, field.Invalid(path.Child("argocdRoleARN"), a.ArgocdRoleARN, otherPartition(r.Partition, part)))
		}
	}
	return append(errs, validateRegions(path.Child("regions"), a.Regions)...)
}

// otherPartition is the detail of a role of partition got where the
// account's regions are of partition want.
func otherPartition(got, want string) string {
	return fmt.Sprintf("a role of partition %s, but the account's regions are of %s", got, want)
}

// validatePatterns checks path.Match patterns of tag keys.
func validatePatterns(fp *field.Path, patterns []string) field.ErrorList {
	var errs field.ErrorList
	for i, p := range patterns {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			errs = append(errs, field.Invalid(fp.Index(i), p, "not a path.Match pattern"))
		}
	}
	return errs
}

// validate checks the auth mode and its command.
func (a *AuthConfig) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch a.Mode {
	case AuthModeAWS, AuthModeExec:
	default:
		errs = append(errs, field.NotSupported(path.Child("mode"), a.Mode, []string{AuthModeAWS, AuthModeExec}))
	}
	if strings.TrimSpace(a.Command) != a.Command || a.Command == "" {
		errs = append(errs, field.Invalid(path.Child("command"), a.Command, "must be a command name without surrounding spaces"))
	}
	return errs
}

// validate checks the policy and that proxyUrl goes with policy proxy.
func (p *PrivateEndpoints) validate(path *field.Path) field.ErrorList {
	proxy := path.Child("proxyUrl")
	switch p.Policy {
	case PrivateInclude, PrivateExclude:
		if p.ProxyURL != "" {
			return field.ErrorList{field.Forbidden(proxy, "only used with policy "+PrivateProxy)}
		}
	case PrivateProxy:
		if p.ProxyURL == "" {
			return field.ErrorList{field.Required(proxy, "required with policy "+PrivateProxy)}
		}
		if err := sources.ValidateProxyURL(p.ProxyURL); err != nil {
			return field.ErrorList{field.Invalid(proxy, field.OmitValueType{}, err.Error())}
		}
	default:
		return field.ErrorList{field.NotSupported(path.Child("policy"), p.Policy, []string{PrivateInclude, PrivateExclude, PrivateProxy})}
	}
	return nil
}

// validateEndpoint checks an optional API endpoint override; the value is
// not quoted, as it could carry user info.
func validateEndpoint(path *field.Path, e string) field.ErrorList {
	if e == "" {
		return nil
	}
	if u, err := url.Parse(e); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return field.ErrorList{field.Invalid(path, field.OmitValueType{}, "must be an http(s) URL with a host and no user info")}
	}
	return nil
}

// inRange checks that n lies in [lo, hi].
func inRange(path *field.Path, n, lo, hi int) field.ErrorList {
	if n < lo || n > hi {
		return field.ErrorList{field.Invalid(path, n, fmt.Sprintf("must be between %d and %d", lo, hi))}
	}
	return nil
}

// positive checks that a duration parsed and is positive.
func positive(path *field.Path, d sources.Duration) field.ErrorList {
	if err := d.Validate(path, time.Nanosecond, 0); err != nil {
		return field.ErrorList{err}
	}
	return nil
}
