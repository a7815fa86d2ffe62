package aro

import (
	"encoding/base64"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// root is the path of the section in the tests, as the service names it.
var root = field.NewPath("sources").Index(0).Child("aro")

// errorStrings renders a field.ErrorList, one line per error.
func errorStrings(errs field.ErrorList) []string {
	if len(errs) == 0 {
		return nil
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func TestDefault(t *testing.T) {
	var c Config
	c.Default()
	assert.Equal(t, Config{
		Cloud:     "AzurePublic",
		TenantTag: "tenant", ProjectTag: "argocd-project", NamespacesTag: "argocd-namespaces",
		PrivateEndpoints: PrivateEndpoints{Policy: PrivateInclude},
		Concurrency:      8,
		NameTemplate:     "{{.Name}}",
		Auth:             "bearerToken",
		ManagedDomains:   []string{".aroapp.io"},
	}, c)
	require.Empty(t, c.Validate(root))

	again := c
	again.Default()
	assert.Equal(t, c, again, "Default is idempotent")

	c.ManagedDomains[0] = "changed"
	var fresh Config
	fresh.Default()
	assert.Equal(t, []string{".aroapp.io"}, fresh.ManagedDomains, "the default list is not shared")

	set := Config{ManagedDomains: []string{".aroapp.azure.cn"}, Auth: "bearerToken"}
	set.Default()
	assert.Equal(t, []string{".aroapp.azure.cn"}, set.ManagedDomains, "a configured list replaces the default")
}

func TestParseYAMLSection(t *testing.T) {
	ca := base64.StdEncoding.EncodeToString(testCAPEM(t))
	section := `
tenantID: 72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80
clientID: 80faf920-1908-4b52-b5ef-a8e7bedfc67a
cloud: AzurePublic
subscriptions: [9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41]
resourceGroups: [rg-aro-payments]
includeTags: {argocd: enabled}
excludeTags: {env: "*"}
labelTags: [env, team]
ignoreTags: [costCenter]
tenantTag: team
projectTag: argocd-project
namespacesTag: argocd-namespaces
privateEndpoints: {policy: exclude, proxyUrl: "http://proxy.internal:3128"}
concurrency: 4
namePrefix: aro-
nameTemplate: "{{.Name}}-{{.ResourceGroup | lower}}"
auth: bearerToken
managedDomains: [.aroapp.io]
customDomainCA:
  ocp.contoso.com: {caData: ` + ca + `}
  ocp.fabrikam.com: {caFile: ca/fabrikam.pem}
defaultCA: {caFile: /etc/ca/default.pem}
`
	var c Config
	require.NoError(t, yaml.UnmarshalStrict([]byte(section), &c))
	c.SetDirectory("/etc/discovery")
	c.Default()
	require.Empty(t, c.Validate(root))
	assert.Equal(t, PrivateEndpoints{Policy: PrivateExclude, ProxyURL: "http://proxy.internal:3128"}, c.PrivateEndpoints)
	assert.Equal(t, map[string]CARef{
		"ocp.contoso.com":  {CAData: ca},
		"ocp.fabrikam.com": {CAFile: filepath.Join("/etc/discovery", "ca", "fabrikam.pem")},
	}, c.CustomDomainCA, "relative caFile paths are relative to the configuration file")
	assert.Equal(t, CARef{CAFile: "/etc/ca/default.pem"}, c.DefaultCA, "absolute paths stay")

	err := yaml.UnmarshalStrict([]byte("subscription: [x]\n"), &Config{})
	require.ErrorContains(t, err, `unknown field "subscription"`)
	err = yaml.UnmarshalStrict([]byte("defaultCA: {caPEM: x}\n"), &Config{})
	require.ErrorContains(t, err, `unknown field "caPEM"`)
}

// invalidConfigs are sections with several problems each; every problem
// is reported, in order, with its full path.
var invalidConfigs = []struct {
	name   string
	mutate func(*Config)
	want   []string // without the "sources[0].aro." prefix
}{
	{"bad ids", func(c *Config) {
		c.TenantID, c.ClientID = "contoso", "x"
		c.Subscriptions = []string{"9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41", "sub-1", "9B4D2F6E-1A3C-4E8B-B7D5-2C0F9E8A6D41"}
	}, []string{
		`tenantID: Invalid value: "contoso": not a GUID`,
		`clientID: Invalid value: "x": not a GUID`,
		`subscriptions[1]: Invalid value: "sub-1": not a subscription id (a GUID)`,
		`subscriptions[2]: Duplicate value: "9B4D2F6E-1A3C-4E8B-B7D5-2C0F9E8A6D41": repeats sources[0].aro.subscriptions[0]`,
	}},
	{"cloud and endpoint", func(c *Config) { c.Cloud, c.ARMEndpoint = "Mars", "http://user:pw@management.example.com" }, []string{
		`cloud: Unsupported value: "Mars": supported values: "AzurePublic", "AzureChina", "AzureGovernment"`,
		`armEndpoint: Invalid value: "http://user:xxxxx@management.example.com": must be an https URL without user info`,
	}},
	{"resource groups and tags", func(c *Config) {
		c.ResourceGroups = []string{"ok", " ", "a/b"}
		c.LabelTags, c.IgnoreTags = []string{""}, []string{"x", " "}
		c.IncludeTags, c.ExcludeTags = map[string]string{"": "x"}, map[string]string{"": "*"}
	}, []string{
		`resourceGroups[1]: Invalid value: " ": not a resource group name`,
		`resourceGroups[2]: Invalid value: "a/b": not a resource group name`,
		`labelTags[0]: Invalid value: "": empty tag key`,
		`ignoreTags[1]: Invalid value: " ": empty tag key`,
		`includeTags: Invalid value: "": empty tag key`,
		`excludeTags: Invalid value: "": empty tag key`,
	}},
	{"private endpoints", func(c *Config) {
		c.PrivateEndpoints = PrivateEndpoints{Policy: "privateFQDN", ProxyURL: "ftp://user:pw@proxy"}
	}, []string{
		`privateEndpoints.policy: Unsupported value: "privateFQDN": supported values: "include", "exclude"`,
		`privateEndpoints.proxyUrl: Invalid value: "ftp://user:xxxxx@proxy": must not carry user info (the configuration holds no secrets)`,
	}},
	{"listing", func(c *Config) {
		c.Concurrency, c.NamePrefix, c.NameTemplate = 1000, "ARO_", "{{.Cluster}}"
	}, []string{
		`concurrency: Invalid value: 1000: must be between 1 and 64`,
		`namePrefix: Invalid value: "ARO_": must be lower-case letters, digits and '-', starting with a letter or digit, at most 40 characters`,
		`nameTemplate: Invalid value: "{{.Cluster}}": template: name:1:2: executing "name" at <.Cluster>: can't evaluate field Cluster in type aro.nameData`,
	}},
	{"a prefix too long", func(c *Config) { c.NamePrefix = "a23456789-123456789-123456789-123456789-1" }, []string{
		`namePrefix: Invalid value: "a23456789-123456789-123456789-123456789-1": must be lower-case letters, digits and '-', starting with a letter or digit, at most 40 characters`,
	}},
	{"auth mode", func(c *Config) { c.Auth = "password" }, []string{
		`auth: Unsupported value: "password": supported values: "bearerToken", "agent"`,
	}},
	{"agent without agent mode", func(c *Config) { c.Agent.Tag = "agent" }, []string{
		`agent: Forbidden: only with auth: agent`,
	}},
	{"agent tag empty", func(c *Config) { c.Auth, c.Agent.Tag = AuthAgent, " " }, []string{
		`agent.tag: Invalid value: " ": empty tag key`,
	}},
	{"managed domains", func(c *Config) { c.ManagedDomains = []string{".aroapp.io", "", "not a domain"} }, []string{
		`managedDomains[1]: Invalid value: "": not a domain suffix such as ".aroapp.io"`,
		`managedDomains[2]: Invalid value: "not a domain": not a domain suffix such as ".aroapp.io"`,
	}},
	{"no managed domain", func(c *Config) { c.ManagedDomains = []string{} }, []string{
		`managedDomains: Required value: at least one suffix, e.g. ".aroapp.io"`,
	}},
	{"custom domain CAs", func(c *Config) {
		c.CustomDomainCA = map[string]CARef{
			"bad domain!":     {CAFile: "/x.pem"},
			"both.example":    {CAData: "eA==", CAFile: "/x.pem"},
			"neither.example": {},
			"notpem.example":  {CAData: "bm90IGEgY2VydGlmaWNhdGU="},
			"OCP.example":     {CAFile: "/a.pem"},
			"ocp.example.":    {CAFile: "/b.pem"},
		}
	}, []string{
		`customDomainCA[bad domain!]: Invalid value: "bad domain!": not a domain such as ocp.example.com`,
		`customDomainCA[both.example]: Invalid value: set caData or caFile, not both`,
		`customDomainCA[neither.example]: Required value: caData or caFile`,
		`customDomainCA[notpem.example].caData: Invalid value: no PEM certificate found`,
		`customDomainCA[ocp.example.]: Duplicate value: "ocp.example.": repeats sources[0].aro.customDomainCA[OCP.example] (domains compare case-insensitively)`,
	}},
	{"default CA", func(c *Config) { c.DefaultCA = CARef{CAData: "not base64!"} }, []string{
		`defaultCA.caData: Invalid value: not base64: illegal base64 data at input byte 3`,
	}},
}

func TestValidate(t *testing.T) {
	for _, tt := range invalidConfigs {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			c.Default()
			tt.mutate(&c)
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = "sources[0].aro." + w
			}
			assert.Equal(t, want, errorStrings(c.Validate(root)))
			assert.Equal(t, want, errorStrings(c.Validate(root)), "the same again: Validate changes nothing")
		})
	}
}

// TestCADataIsNeverQuoted: an invalid caData is reported without its
// value.
func TestCADataIsNeverQuoted(t *testing.T) {
	const value = "c2VjcmV0LWxvb2tpbmctdmFsdWU="
	var c Config
	c.Default()
	c.DefaultCA = CARef{CAData: value}
	got := errorStrings(c.Validate(root))
	require.Len(t, got, 1)
	assert.NotContains(t, got[0], value)
}
