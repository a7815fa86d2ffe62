package aks

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Config is the aks section of a source. Zero values are replaced by
// Default; Validate reports every problem at once, each naming its field
// relative to the section.
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
	// cluster in Argo CD. Defaults: tenant, project, namespaces. The
	// namespaces tag holds names separated by commas, semicolons or spaces.
	// A project or namespaces tag that is present but invalid lists the
	// cluster as not ready rather than widening its scope.
	TenantTag     string `json:"tenantTag,omitempty"`
	ProjectTag    string `json:"projectTag,omitempty"`
	NamespacesTag string `json:"namespacesTag,omitempty"`

	// PrivateClusters is the policy for clusters with
	// apiServerAccessProfile.enablePrivateCluster: exclude (default),
	// privateFQDN (server https://<privateFQDN>:443; Argo CD must reach the
	// private endpoint, for example through PrivateProxyURL) or publicFQDN
	// (server https://<fqdn>:443, only for clusters with
	// enablePrivateClusterPublicFQDN; others are excluded).
	PrivateClusters PrivatePolicy `json:"privateClusters,omitempty"`
	// PrivateProxyURL, when set, is the proxy Argo CD uses for private
	// clusters (proxyUrl in the cluster Secret): http, https or socks5.
	PrivateProxyURL string `json:"privateProxyURL,omitempty"`

	// CATTL is how long a cluster's CA, read with listClusterUserCredential,
	// is reused before it is read again: between 80% and 100% of CATTL,
	// fixed per cluster, so that reads spread out. A Go duration; default
	// 1h.
	CATTL string `json:"caTTL,omitempty"`
	// CAErrorTTL is how long a failed CA read (e.g. 403: the identity
	// lacks listClusterUserCredential/action) is remembered before the call
	// is made again. Meanwhile the cluster keeps its expired CA, or is
	// listed as not ready when it never had one. A Go duration; default 5m.
	CAErrorTTL string `json:"caErrorTTL,omitempty"`
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

// PrivatePolicy says how private clusters are served.
type PrivatePolicy string

// The private cluster policies.
const (
	PrivateExclude    PrivatePolicy = "exclude"
	PrivateFQDN       PrivatePolicy = "privateFQDN"
	PrivatePublicFQDN PrivatePolicy = "publicFQDN"
)

const (
	defaultCATTL        = "1h"
	defaultCAErrorTTL   = "5m"
	defaultConcurrency  = 8
	maxConcurrency      = 64
	defaultNameTemplate = "{{.Name}}"
)

// AuthConfig describes the execProviderConfig of the clusters' Secrets:
// Argo CD runs `argocd-k8s-auth azure` with these environment variables.
// Every value is configuration (ids, paths, hosts); secrets such as a
// client secret or a password cannot be set here. A login method that
// needs one (spn with a secret, ropc) reads it from the environment of the
// Argo CD application controller.
type AuthConfig struct {
	// LoginMethod is AAD_LOGIN_METHOD: workloadidentity (default), msi,
	// spn, azurecli or ropc. devicecode is interactive and rejected.
	LoginMethod string `json:"loginMethod,omitempty"`
	// ClientID is AZURE_CLIENT_ID, the identity of the Argo CD controller.
	ClientID string `json:"clientID,omitempty"`
	// TenantID is AZURE_TENANT_ID.
	TenantID string `json:"tenantID,omitempty"`
	// FederatedTokenFile is AZURE_FEDERATED_TOKEN_FILE.
	FederatedTokenFile string `json:"federatedTokenFile,omitempty"`
	// AuthorityHost is AZURE_AUTHORITY_HOST.
	AuthorityHost string `json:"authorityHost,omitempty"`
	// Environment is AAD_ENVIRONMENT_NAME (e.g. AzurePublicCloud); it
	// defaults to AzureChinaCloud or AzureUSGovernmentCloud with those clouds.
	Environment string `json:"environment,omitempty"`
	// ServerApplicationID is AAD_SERVER_APPLICATION_ID.
	ServerApplicationID string `json:"serverApplicationID,omitempty"`
	// Env holds further non-secret variables, e.g.
	// AZURE_CLIENT_CERTIFICATE_PATH. The fields above win over it.
	Env map[string]string `json:"env,omitempty"`
	// Command defaults to argocd-k8s-auth.
	Command string `json:"command,omitempty"`
	// APIVersion defaults to client.authentication.k8s.io/v1beta1.
	APIVersion string `json:"apiVersion,omitempty"`
}

// Default fills every unset field with its default.
func (c *Config) Default() {
	if c.Cloud == "" {
		c.Cloud = "AzurePublic"
	}
	if c.TenantTag == "" {
		c.TenantTag = "tenant"
	}
	if c.ProjectTag == "" {
		c.ProjectTag = "project"
	}
	if c.NamespacesTag == "" {
		c.NamespacesTag = "namespaces"
	}
	if c.PrivateClusters == "" {
		c.PrivateClusters = PrivateExclude
	}
	if c.CATTL == "" {
		c.CATTL = defaultCATTL
	}
	if c.CAErrorTTL == "" {
		c.CAErrorTTL = defaultCAErrorTTL
	}
	if c.Concurrency == 0 {
		c.Concurrency = defaultConcurrency
	}
	if c.NameTemplate == "" {
		c.NameTemplate = defaultNameTemplate
	}
	if c.Auth.Environment == "" {
		c.Auth.Environment = aadEnvironments[c.Cloud]
	}
	if c.Auth.LoginMethod == "" {
		c.Auth.LoginMethod = "workloadidentity"
	}
	if c.Auth.Command == "" {
		c.Auth.Command = "argocd-k8s-auth"
	}
	if c.Auth.APIVersion == "" {
		c.Auth.APIVersion = "client.authentication.k8s.io/v1beta1"
	}
}

var (
	guidRE   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// secretEnvRE matches variable names that hold secret values.
	secretEnvRE = regexp.MustCompile(`SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|(^|_)KEY($|_)`)
)

// secretEnvAllowed are variables whose names look secret but hold a path or
// a flag.
var secretEnvAllowed = map[string]bool{
	"AZURE_FEDERATED_TOKEN_FILE": true,
	"AAD_IS_POP_TOKEN_ENABLED":   true,
	"AAD_POP_TOKEN_CLAIMS":       true,
}

var loginMethods = []string{"workloadidentity", "msi", "spn", "azurecli", "ropc"}

// clouds maps Cloud to the SDK's cloud configuration.
var clouds = map[string]cloud.Configuration{
	"AzurePublic":     cloud.AzurePublic,
	"AzureChina":      cloud.AzureChina,
	"AzureGovernment": cloud.AzureGovernment,
}

// aadEnvironments is AAD_ENVIRONMENT_NAME for the clouds where kubelogin's
// default (AzurePublicCloud) is wrong.
var aadEnvironments = map[string]string{
	"AzureChina":      "AzureChinaCloud",
	"AzureGovernment": "AzureUSGovernmentCloud",
}

// removedStateFilter explains why provisioningStates and powerStates are
// rejected.
const removedStateFilter = `was removed: every cluster is listed and its AKS state mapped to a phase (see "Cluster lifecycle" in the README)`

// Validate checks every field, assuming Default was applied, and returns
// all problems at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.TenantID != "" && !guidRE.MatchString(c.TenantID) {
		bad("tenantID", "not a GUID")
	}
	if c.ClientID != "" && !guidRE.MatchString(c.ClientID) {
		bad("clientID", "not a GUID")
	}
	if _, ok := clouds[c.Cloud]; !ok {
		bad("cloud", "%q is not one of AzurePublic, AzureChina, AzureGovernment", c.Cloud)
	}
	seen := map[string]int{}
	for i, s := range c.Subscriptions {
		if !guidRE.MatchString(s) {
			bad(fmt.Sprintf("subscriptions[%d]", i), "%q is not a subscription id (a GUID)", s)
			continue
		}
		if j, dup := seen[strings.ToLower(s)]; dup {
			bad(fmt.Sprintf("subscriptions[%d]", i), "repeats subscriptions[%d]", j)
		}
		seen[strings.ToLower(s)] = i
	}
	for i, rg := range c.ResourceGroups {
		if strings.TrimSpace(rg) == "" || strings.ContainsAny(rg, "/") {
			bad(fmt.Sprintf("resourceGroups[%d]", i), "%q is not a resource group name", rg)
		}
	}
	nonEmpty := func(field string, list []string) {
		for i, s := range list {
			if strings.TrimSpace(s) == "" {
				bad(fmt.Sprintf("%s[%d]", field, i), "empty")
			}
		}
	}
	if c.ProvisioningStates != nil {
		bad("provisioningStates", "%s", removedStateFilter)
	}
	if c.PowerStates != nil {
		bad("powerStates", "%s", removedStateFilter)
	}
	nonEmpty("labelTags", c.LabelTags)
	nonEmpty("ignoreTags", c.IgnoreTags)
	if _, ok := c.IncludeTags[""]; ok {
		bad("includeTags", "empty tag key")
	}
	if _, ok := c.ExcludeTags[""]; ok {
		bad("excludeTags", "empty tag key")
	}
	switch c.PrivateClusters {
	case PrivateExclude, PrivateFQDN, PrivatePublicFQDN:
	default:
		bad("privateClusters", "%q is not one of exclude, privateFQDN, publicFQDN", c.PrivateClusters)
	}
	if c.PrivateProxyURL != "" {
		if err := sources.ValidateProxyURL(c.PrivateProxyURL); err != nil {
			bad("privateProxyURL", "%v", err)
		}
	}
	if _, _, err := c.ttls(); err != nil {
		errs = append(errs, err)
	}
	if c.Concurrency < 1 || c.Concurrency > maxConcurrency {
		bad("concurrency", "%d is not between 1 and %d", c.Concurrency, maxConcurrency)
	}
	if strings.ContainsFunc(c.NamePrefix, isBadNameRune) {
		bad("namePrefix", "must not contain spaces or control characters")
	}
	if _, err := parseNameTemplate(c.NameTemplate); err != nil {
		bad("nameTemplate", "%v", err)
	}
	if c.ARMEndpoint != "" {
		u, err := url.Parse(c.ARMEndpoint)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
			bad("armEndpoint", "must be an https URL without user info")
		}
	}
	errs = append(errs, c.Auth.validate("auth")...)
	return errors.Join(errs...)
}

// ttls parses CATTL and CAErrorTTL.
func (c Config) ttls() (ca, caError time.Duration, err error) {
	parse := func(field, s string) time.Duration {
		d, perr := time.ParseDuration(s)
		switch {
		case perr != nil:
			err = errors.Join(err, fmt.Errorf("%s: %q is not a duration such as \"30m\" or \"1h\"", field, s))
		case d <= 0:
			err = errors.Join(err, fmt.Errorf("%s: must be positive", field))
		}
		return d
	}
	ca, caError = parse("caTTL", c.CATTL), parse("caErrorTTL", c.CAErrorTTL)
	return ca, caError, err
}

func (a AuthConfig) validate(field string) []error {
	var errs []error
	bad := func(sub, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", field, sub, fmt.Sprintf(format, args...)))
	}
	if a.LoginMethod == "devicecode" {
		bad("loginMethod", "devicecode is interactive and cannot work in the Argo CD controller")
	} else if !slices.Contains(loginMethods, a.LoginMethod) {
		bad("loginMethod", "%q is not one of %s", a.LoginMethod, strings.Join(loginMethods, ", "))
	}
	if a.ClientID != "" && !guidRE.MatchString(a.ClientID) {
		bad("clientID", "not a GUID")
	}
	if a.TenantID != "" && !guidRE.MatchString(a.TenantID) {
		bad("tenantID", "not a GUID")
	}
	if a.ServerApplicationID != "" && !guidRE.MatchString(a.ServerApplicationID) {
		bad("serverApplicationID", "not a GUID")
	}
	if a.AuthorityHost != "" {
		if u, err := url.Parse(a.AuthorityHost); err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
			bad("authorityHost", "must be an https URL without user info")
		}
	}
	if a.Command == "" || strings.ContainsFunc(a.Command, isBadNameRune) {
		bad("command", "must be a command name without spaces")
	}
	for _, k := range sortedKeys(a.Env) {
		switch {
		case !envKeyRE.MatchString(k):
			bad("env."+k, "not an environment variable name")
		case isSecretEnv(k):
			// The value is never echoed.
			bad("env."+k, "holds a secret; set it in the Argo CD controller's environment, not in cluster Secrets")
		case strings.ContainsAny(a.Env[k], "\x00\r\n"):
			bad("env."+k, "must be one line")
		}
	}
	return errs
}

func isSecretEnv(k string) bool {
	k = strings.ToUpper(k)
	return secretEnvRE.MatchString(k) && !secretEnvAllowed[k]
}

func isBadNameRune(r rune) bool {
	return r <= ' ' || r == 0x7f
}

// nameData is what NameTemplate sees.
type nameData struct {
	Name          string
	ResourceGroup string
	Subscription  string
	Location      string
	Tags          map[string]string
}

func parseNameTemplate(s string) (*template.Template, error) {
	t, err := template.New("name").Option("missingkey=zero").
		Funcs(template.FuncMap{"lower": strings.ToLower}).Parse(s)
	if err != nil {
		return nil, err
	}
	// Render once so that unknown fields fail at start-up; a missing tag
	// renders empty.
	var b bytes.Buffer
	sample := nameData{Name: "n", ResourceGroup: "rg", Subscription: "s", Location: "l", Tags: map[string]string{}}
	if err := t.Execute(&b, sample); err != nil {
		return nil, err
	}
	return t, nil
}
