package eks

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Defaults of Config, applied by Default.
const (
	DefaultConcurrency   = 8
	DefaultDescribeTTL   = "1h"
	DefaultMaxAttempts   = 5
	DefaultMaxBackoff    = "20s"
	DefaultSessionName   = "argocd-cluster-discovery"
	DefaultTenantTag     = "tenant"
	DefaultProjectTag    = "argocd-project"
	DefaultNamespacesTag = "argocd-namespaces"
	DefaultNameTemplate  = "{{.Name}}"
	DefaultExecCommand   = "argocd-k8s-auth"
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
// list and how their clusters become Argo CD clusters. Call Default, then
// Validate (New does both).
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
	DescribeTTL string `json:"describeTTL,omitempty"`
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
	MaxAttempts int    `json:"maxAttempts,omitempty"`
	MaxBackoff  string `json:"maxBackoff,omitempty"`
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

// Default fills every unset field with its default.
func (c *Config) Default() {
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.DescribeTTL == "" {
		c.DescribeTTL = DefaultDescribeTTL
	}
	if c.Tags.Deny == nil {
		c.Tags.Deny = []string{"aws:*"}
	}
	if c.TenantTag == "" {
		c.TenantTag = DefaultTenantTag
	}
	if c.ProjectTag == "" {
		c.ProjectTag = DefaultProjectTag
	}
	if c.NamespacesTag == "" {
		c.NamespacesTag = DefaultNamespacesTag
	}
	if c.Auth.Mode == "" {
		c.Auth.Mode = AuthModeAWS
	}
	if c.Auth.Command == "" {
		c.Auth.Command = DefaultExecCommand
	}
	if c.PrivateEndpoints.Policy == "" {
		c.PrivateEndpoints.Policy = PrivateInclude
	}
	if c.NameTemplate == "" {
		c.NameTemplate = DefaultNameTemplate
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxBackoff == "" {
		c.MaxBackoff = DefaultMaxBackoff
	}
	for i := range c.Accounts {
		if c.Accounts[i].SessionName == "" {
			c.Accounts[i].SessionName = DefaultSessionName
		}
	}
}

var (
	accountIDRe   = regexp.MustCompile(`^[0-9]{12}$`)
	regionRe      = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	sessionNameRe = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
	externalIDRe  = regexp.MustCompile(`^[\w+=,.@:/-]+$`)
)

// Validate checks every field and returns all problems at once, each
// naming its field relative to the section (`accounts[1].argocdRoleARN:
// ...`). It expects Default to have run.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	regions := func(field string, rs []string) {
		seen := map[string]bool{}
		for i, r := range rs {
			switch {
			case !regionRe.MatchString(r):
				bad(fmt.Sprintf("%s[%d]", field, i), "%q is not an AWS region such as eu-west-1", r)
			case seen[r]:
				bad(fmt.Sprintf("%s[%d]", field, i), "%q is listed twice", r)
			}
			seen[r] = true
		}
	}
	if len(c.Regions) == 0 {
		bad("regions", "required")
	}
	regions("regions", c.Regions)
	if len(c.Accounts) == 0 {
		bad("accounts", "at least one account is required")
	}
	ids := map[string]int{}
	for i, a := range c.Accounts {
		at := fmt.Sprintf("accounts[%d]", i)
		if !accountIDRe.MatchString(a.ID) {
			bad(at+".id", "%q is not a 12-digit AWS account id", a.ID)
		} else if j, dup := ids[a.ID]; dup {
			bad(at+".id", "%s is already listed by accounts[%d]", a.ID, j)
		}
		ids[a.ID] = i
		if a.RoleARN != "" {
			if acct, err := roleAccount(a.RoleARN); err != nil {
				bad(at+".roleARN", "%v", err)
			} else if acct != a.ID {
				bad(at+".roleARN", "is a role of account %s, not %s (the discovery role must be in the account it lists)", acct, a.ID)
			}
		} else if a.ExternalID != "" {
			bad(at+".externalID", "only used with roleARN")
		}
		if a.ExternalID != "" && (!externalIDRe.MatchString(a.ExternalID) || len(a.ExternalID) < 2 || len(a.ExternalID) > 1224) {
			bad(at+".externalID", "must be 2-1224 characters of letters, digits and +=,.@:/-")
		}
		if !sessionNameRe.MatchString(a.SessionName) {
			bad(at+".sessionName", "%q must be 2-64 characters of letters, digits and +=,.@_-", a.SessionName)
		}
		if a.ArgocdRoleARN != "" {
			if _, err := roleAccount(a.ArgocdRoleARN); err != nil {
				bad(at+".argocdRoleARN", "%v", err)
			}
		}
		regions(at+".regions", a.Regions)
	}
	if c.Concurrency < 1 || c.Concurrency > 100 {
		bad("concurrency", "%d must be between 1 and 100", c.Concurrency)
	}
	if d, err := time.ParseDuration(c.DescribeTTL); err != nil || d <= 0 {
		bad("describeTTL", "%q is not a positive duration such as \"1h\"", c.DescribeTTL)
	}
	if c.Statuses != nil {
		bad("statuses", "%s", statusesRemoved)
	}
	patterns := func(field string, ps []string) {
		for i, p := range ps {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				bad(fmt.Sprintf("%s[%d]", field, i), "%q is not a path.Match pattern", p)
			}
		}
	}
	patterns("tags.allow", c.Tags.Allow)
	patterns("tags.deny", c.Tags.Deny)
	switch c.Auth.Mode {
	case AuthModeAWS, AuthModeExec:
	default:
		bad("auth.mode", "%q is not one of %s, %s", c.Auth.Mode, AuthModeAWS, AuthModeExec)
	}
	if strings.TrimSpace(c.Auth.Command) != c.Auth.Command || c.Auth.Command == "" {
		bad("auth.command", "must be a command name without surrounding spaces")
	}
	switch c.PrivateEndpoints.Policy {
	case PrivateInclude, PrivateExclude:
		if c.PrivateEndpoints.ProxyURL != "" {
			bad("privateEndpoints.proxyUrl", "only used with policy %s", PrivateProxy)
		}
	case PrivateProxy:
		if err := validateProxyURL(c.PrivateEndpoints.ProxyURL); err != nil {
			bad("privateEndpoints.proxyUrl", "%v", err)
		}
	default:
		bad("privateEndpoints.policy", "%q is not one of %s, %s, %s", c.PrivateEndpoints.Policy, PrivateInclude, PrivateExclude, PrivateProxy)
	}
	if _, err := parseNameTemplate(c.NameTemplate); err != nil {
		bad("nameTemplate", "%v", err)
	}
	endpoint := func(field, e string) {
		if u, err := url.Parse(e); e != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil) {
			bad(field, "must be an http(s) URL with a host and no user info")
		}
	}
	endpoint("endpoint", c.Endpoint)
	endpoint("taggingEndpoint", c.TaggingEndpoint)
	endpoint("stsEndpoint", c.STSEndpoint)
	if c.MaxAttempts < 1 || c.MaxAttempts > 20 {
		bad("maxAttempts", "%d must be between 1 and 20", c.MaxAttempts)
	}
	if d, err := time.ParseDuration(c.MaxBackoff); err != nil || d <= 0 {
		bad("maxBackoff", "%q is not a positive duration such as \"20s\"", c.MaxBackoff)
	}
	return errors.Join(errs...)
}

// roleAccount checks that s is an IAM role ARN and returns its account.
func roleAccount(s string) (string, error) {
	a, err := arn.Parse(s)
	if err != nil || a.Service != "iam" || !strings.HasPrefix(a.Resource, "role/") || !accountIDRe.MatchString(a.AccountID) {
		return "", fmt.Errorf("%q is not an IAM role ARN such as arn:aws:iam::123456789012:role/name", s)
	}
	return a.AccountID, nil
}

// validateProxyURL is sources.ValidateProxyURL, required with policy proxy.
func validateProxyURL(s string) error {
	if s == "" {
		return fmt.Errorf("required with policy %s", PrivateProxy)
	}
	return sources.ValidateProxyURL(s)
}

// nameData is what NameTemplate sees.
type nameData struct {
	Name, Account, Region string
}

// parseNameTemplate parses t and checks that it renders a non-empty name
// from sample data and only refers to known fields.
func parseNameTemplate(t string) (*template.Template, error) {
	tmpl, err := template.New("name").Option("missingkey=error").Parse(t)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, nameData{Name: "payments-prod", Account: "123456789012", Region: "eu-west-1"}); err != nil {
		return nil, err
	}
	if strings.TrimSpace(b.String()) == "" {
		return nil, fmt.Errorf("renders an empty name")
	}
	return tmpl, nil
}
