package aks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// root is the path of the section in the tests, as the service names it.
var root = field.NewPath("sources").Index(0).Child("aks")

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
		PrivateEndpoints: PrivateEndpoints{Policy: PrivateExclude},
		CATTL:            sources.D(time.Hour), CAErrorTTL: sources.D(5 * time.Minute),
		Concurrency:  8,
		NameTemplate: "{{.Name}}",
		Auth: AuthConfig{
			LoginMethod: "workloadidentity", Command: "argocd-k8s-auth", APIVersion: "client.authentication.k8s.io/v1beta1",
		},
	}, c)
	require.Empty(t, c.Validate(root))
	assert.Empty(t, c.Deprecations(root))

	again := c
	again.Default()
	assert.Equal(t, c, again, "Default is idempotent")

	china := Config{Cloud: "AzureChina"}
	china.Default()
	assert.Equal(t, "AzureChinaCloud", china.Auth.Environment)
}

// TestOldScopeTagNamesAreNoLongerDefaults: a tag named project is common
// in Azure for cost allocation; the scope tags are now named as for EKS.
func TestOldScopeTagNamesAreNoLongerDefaults(t *testing.T) {
	var c Config
	c.Default()
	assert.NotEqual(t, "project", c.ProjectTag)
	assert.NotEqual(t, "namespaces", c.NamespacesTag)
	assert.Equal(t, []string{"tenant", "argocd-project", "argocd-namespaces"}, []string{c.TenantTag, c.ProjectTag, c.NamespacesTag})

	kept := Config{ProjectTag: "project", NamespacesTag: "namespaces"}
	kept.Default()
	assert.Equal(t, []string{"project", "namespaces"}, []string{kept.ProjectTag, kept.NamespacesTag}, "set explicitly, the old names work")
}

func TestParseYAMLSection(t *testing.T) {
	const section = `
tenantID: 72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80
clientID: 80faf920-1908-4b52-b5ef-a8e7bedfc67a
subscriptions: [9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41]
resourceGroups: [rg-payments-prod]
includeTags: {argocd: enabled}
excludeTags: {env: "*"}
labelTags: [env, team]
ignoreTags: [costCenter]
tenantTag: team
projectTag: argocd-project
namespacesTag: argocd-namespaces
privateEndpoints: {policy: publicFQDN, proxyUrl: "http://proxy.internal:3128"}
caTTL: 90m
caErrorTTL: 2m
concurrency: 4
namePrefix: aks-
nameTemplate: "{{.Name}}-{{.ResourceGroup | lower}}"
auth:
  loginMethod: workloadidentity
  clientID: 80faf920-1908-4b52-b5ef-a8e7bedfc67a
  tenantID: 72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80
  federatedTokenFile: /var/run/secrets/azure/tokens/azure-identity-token
  authorityHost: https://login.microsoftonline.com/
  environment: AzurePublicCloud
  serverApplicationID: 6dae42f8-4368-4678-94ff-3960e28e3630
  env: {AZURE_CLIENT_CERTIFICATE_PATH: /etc/azure/cert.pem}
`
	var c Config
	require.NoError(t, yaml.UnmarshalStrict([]byte(section), &c))
	c.Default()
	require.Empty(t, c.Validate(root))
	assert.Empty(t, c.Deprecations(root))
	assert.Equal(t, 90*time.Minute, c.CATTL.Std())
	assert.Equal(t, 2*time.Minute, c.CAErrorTTL.Std())
	assert.Equal(t, PrivateEndpoints{Policy: PrivatePublicFQDN, ProxyURL: "http://proxy.internal:3128"}, c.PrivateEndpoints)
	assert.Equal(t, map[string]string{"argocd": "enabled"}, c.IncludeTags)

	err := yaml.UnmarshalStrict([]byte("subscription: [x]\n"), &Config{})
	require.ErrorContains(t, err, `unknown field "subscription"`)
	require.NoError(t, yaml.UnmarshalStrict([]byte("caTTL: an hour\n"), &c), "reported by Validate, with its path")
	assert.Equal(t, []string{`sources[0].aks.caTTL: Invalid value: "an hour": not a duration such as "30s" or "5m"`}, errorStrings(c.Validate(root)))
}

func TestSetDirectoryLeavesTheTokenFileToArgoCD(t *testing.T) {
	c := Config{Auth: AuthConfig{FederatedTokenFile: "tokens/azure-identity-token"}}
	c.SetDirectory("/etc/discovery")
	assert.Equal(t, "tokens/azure-identity-token", c.Auth.FederatedTokenFile, "read in Argo CD's pod, not relative to our configuration")
	c.Default()
	assert.Contains(t, errorStrings(c.Validate(root)), `sources[0].aks.auth.federatedTokenFile: Invalid value: "tokens/azure-identity-token": must be absolute: argocd-k8s-auth reads it in Argo CD's pod`)
}

// duration decodes s as the configuration file does.
func duration(t *testing.T, s string) sources.Duration {
	t.Helper()
	var d sources.Duration
	require.NoError(t, d.UnmarshalJSON([]byte(`"`+s+`"`)))
	return d
}

// invalidConfigs are sections with several problems each; every problem
// is reported, in order, with its full path.
var invalidConfigs = []struct {
	name   string
	mutate func(*testing.T, *Config)
	want   []string // without the "sources[0].aks." prefix
}{
	{"bad ids", func(_ *testing.T, c *Config) {
		c.TenantID, c.ClientID = "contoso", "x"
		c.Subscriptions = []string{"9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41", "sub-1", "9B4D2F6E-1A3C-4E8B-B7D5-2C0F9E8A6D41"}
	}, []string{
		`tenantID: Invalid value: "contoso": not a GUID`,
		`clientID: Invalid value: "x": not a GUID`,
		`subscriptions[1]: Invalid value: "sub-1": not a subscription id (a GUID)`,
		`subscriptions[2]: Duplicate value: "9B4D2F6E-1A3C-4E8B-B7D5-2C0F9E8A6D41": repeats sources[0].aks.subscriptions[0]`,
	}},
	{"cloud and endpoint", func(_ *testing.T, c *Config) { c.Cloud, c.ARMEndpoint = "Mars", "http://management.example.com" }, []string{
		`cloud: Unsupported value: "Mars": supported values: "AzurePublic", "AzureChina", "AzureGovernment"`,
		`armEndpoint: Invalid value: "http://management.example.com": must be an https URL without user info`,
	}},
	{"resource groups and tags", func(_ *testing.T, c *Config) {
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
	{"private endpoints", func(_ *testing.T, c *Config) {
		c.PrivateEndpoints = PrivateEndpoints{Policy: "public", ProxyURL: "ftp://user:pw@proxy"}
	}, []string{
		`privateEndpoints.policy: Unsupported value: "public": supported values: "exclude", "privateFQDN", "publicFQDN"`,
		`privateEndpoints.proxyUrl: Invalid value: "ftp://user:xxxxx@proxy": must not carry user info (the configuration holds no secrets)`,
	}},
	{"listing", func(t *testing.T, c *Config) {
		c.CATTL, c.CAErrorTTL = duration(t, "an hour"), duration(t, "-1m")
		c.Concurrency, c.NamePrefix, c.NameTemplate = 1000, "aks ", "{{.Cluster}}"
	}, []string{
		`caTTL: Invalid value: "an hour": not a duration such as "30s" or "5m"`,
		`caErrorTTL: Invalid value: "-1m0s": must be at least 1s`,
		`concurrency: Invalid value: 1000: must be between 1 and 64`,
		`namePrefix: Invalid value: "aks ": must not contain spaces or control characters`,
		`nameTemplate: Invalid value: "{{.Cluster}}": template: name:1:2: executing "name" at <.Cluster>: can't evaluate field Cluster in type aks.nameData`,
	}},
	{"login method", func(_ *testing.T, c *Config) { c.Auth.LoginMethod = "devicecode" }, []string{
		`auth.loginMethod: Invalid value: "devicecode": interactive: it cannot work in the Argo CD controller`,
	}},
	{"auth ids and hosts", func(_ *testing.T, c *Config) {
		c.Auth.LoginMethod, c.Auth.ClientID, c.Auth.AuthorityHost, c.Auth.Command = "token", "x", "http://login", "argocd k8s auth"
		c.Auth.TenantID, c.Auth.ServerApplicationID = "y", "z"
	}, []string{
		`auth.loginMethod: Unsupported value: "token": supported values: "workloadidentity", "msi", "spn", "azurecli", "ropc"`,
		`auth.clientID: Invalid value: "x": not a GUID`,
		`auth.tenantID: Invalid value: "y": not a GUID`,
		`auth.serverApplicationID: Invalid value: "z": not a GUID`,
		`auth.authorityHost: Invalid value: "http://login": must be an https URL without user info`,
		`auth.command: Invalid value: "argocd k8s auth": must be a command name without spaces`,
	}},
	{"every group at once", func(_ *testing.T, c *Config) {
		c.Cloud, c.ResourceGroups, c.PrivateEndpoints.Policy, c.Concurrency, c.Auth.ClientID = "Mars", []string{""}, "public", -1, "x"
	}, []string{
		`cloud: Unsupported value: "Mars": supported values: "AzurePublic", "AzureChina", "AzureGovernment"`,
		`resourceGroups[0]: Invalid value: "": not a resource group name`,
		`privateEndpoints.policy: Unsupported value: "public": supported values: "exclude", "privateFQDN", "publicFQDN"`,
		`concurrency: Invalid value: -1: must be between 1 and 64`,
		`auth.clientID: Invalid value: "x": not a GUID`,
	}},
}

func TestValidate(t *testing.T) {
	for _, tt := range invalidConfigs {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			c.Default()
			tt.mutate(t, &c)
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = "sources[0].aks." + w
			}
			assert.Equal(t, want, errorStrings(c.Validate(root)))
			assert.Equal(t, want, errorStrings(c.Validate(root)), "the same again: Validate changes nothing")
		})
	}
}

func TestSecretsCannotBeConfigured(t *testing.T) {
	const value = "super-secret-value"
	for _, k := range []string{"AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PASSWORD", "AAD_USER_PRINCIPAL_PASSWORD", "azure_client_secret", "MY_API_KEY", "AZURE_ACCESS_TOKEN"} {
		t.Run(k, func(t *testing.T) {
			var c Config
			c.Default()
			c.Auth.Env = map[string]string{k: value}
			got := errorStrings(c.Validate(root))
			assert.Equal(t, []string{"sources[0].aks.auth.env[" + k + "]: Forbidden: holds a secret; set it in the Argo CD controller's environment, not in cluster Secrets"}, got)
			assert.NotContains(t, got[0], value)
		})
	}
	for _, k := range []string{"AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_CERTIFICATE_PATH", "AAD_POP_TOKEN_CLAIMS", "AAD_IS_POP_TOKEN_ENABLED", "KEYVAULT_NAME"} {
		t.Run(k, func(t *testing.T) {
			var c Config
			c.Default()
			c.Auth.Env = map[string]string{k: "x"}
			require.Empty(t, c.Validate(root))
		})
	}
	var c Config
	c.Default()
	c.Auth.Env = map[string]string{"1BAD": "x", "MULTI": "a\n" + value}
	assert.Equal(t, []string{
		"sources[0].aks.auth.env[1BAD]: Invalid value: not an environment variable name",
		"sources[0].aks.auth.env[MULTI]: Invalid value: must be one line",
	}, errorStrings(c.Validate(root)))
}

func TestRemovedStateFiltersAreRejected(t *testing.T) {
	const why = `Forbidden: was removed: every cluster is listed and its AKS state mapped to a phase (see "Cluster lifecycle" in the README)`
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"provisioningStates", "provisioningStates: [Succeeded]\n", []string{"sources[0].aks.provisioningStates: " + why}},
		{"powerStates", "powerStates: [\"*\"]\n", []string{"sources[0].aks.powerStates: " + why}},
		{"both, even empty", "provisioningStates: []\npowerStates: [Running]\n", []string{"sources[0].aks.provisioningStates: " + why, "sources[0].aks.powerStates: " + why}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			require.NoError(t, yaml.UnmarshalStrict([]byte(tt.yaml), &c), "the keys still parse, to be explained")
			c.Default()
			assert.Equal(t, tt.want, errorStrings(c.Validate(root)))
		})
	}
}

// TestDeprecatedPrivateKeys: privateClusters and privateProxyURL still
// work, each with a warning, and must not contradict privateEndpoints.
func TestDeprecatedPrivateKeys(t *testing.T) {
	const (
		warnPolicy = "sources[0].aks.privateClusters is deprecated: use sources[0].aks.privateEndpoints.policy"
		warnProxy  = "sources[0].aks.privateProxyURL is deprecated: use sources[0].aks.privateEndpoints.proxyUrl"
	)
	tests := []struct {
		name, yaml string
		want       PrivateEndpoints
		warnings   []string
		errs       []string
	}{
		{"new keys", "privateEndpoints: {policy: privateFQDN, proxyUrl: \"socks5://proxy:1080\"}\n",
			PrivateEndpoints{PrivateFQDN, "socks5://proxy:1080"}, nil, nil},
		{"old keys", "privateClusters: privateFQDN\nprivateProxyURL: socks5://proxy:1080\n",
			PrivateEndpoints{PrivateFQDN, "socks5://proxy:1080"}, []string{warnPolicy, warnProxy}, nil},
		{"old and new, the same", "privateClusters: publicFQDN\nprivateEndpoints: {policy: publicFQDN}\n",
			PrivateEndpoints{Policy: PrivatePublicFQDN}, []string{warnPolicy}, nil},
		{"old and new, different", "privateClusters: privateFQDN\nprivateProxyURL: http://a:1\nprivateEndpoints: {policy: exclude, proxyUrl: \"http://b:2\"}\n",
			PrivateEndpoints{PrivateExclude, "http://b:2"}, []string{warnPolicy, warnProxy}, []string{
				"sources[0].aks.privateClusters: Invalid value: conflicts with sources[0].aks.privateEndpoints.policy, which replaces it: remove it",
				"sources[0].aks.privateProxyURL: Invalid value: conflicts with sources[0].aks.privateEndpoints.proxyUrl, which replaces it: remove it",
			}},
		{"an invalid old value is reported at the old key", "privateClusters: public\nprivateProxyURL: ftp://proxy\n",
			PrivateEndpoints{"public", "ftp://proxy"}, []string{warnPolicy, warnProxy}, []string{
				`sources[0].aks.privateClusters: Unsupported value: "public": supported values: "exclude", "privateFQDN", "publicFQDN"`,
				`sources[0].aks.privateProxyURL: Invalid value: "ftp://proxy": scheme must be http, https or socks5`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			require.NoError(t, yaml.UnmarshalStrict([]byte(tt.yaml), &c))
			assert.Equal(t, tt.warnings, c.Deprecations(root), "before Default")
			c.Default()
			assert.Equal(t, tt.warnings, c.Deprecations(root), "after Default: the old keys are kept")
			assert.Equal(t, tt.want, c.PrivateEndpoints)
			assert.Equal(t, tt.errs, errorStrings(c.Validate(root)))
		})
	}
}
