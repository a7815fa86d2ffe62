package aks

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestDefault(t *testing.T) {
	var c Config
	c.Default()
	assert.Equal(t, Config{
		Cloud:     "AzurePublic",
		TenantTag: "tenant", ProjectTag: "project", NamespacesTag: "namespaces",
		PrivateClusters: PrivateExclude,
		CATTL:           "1h", CAErrorTTL: "5m",
		Concurrency:  8,
		NameTemplate: "{{.Name}}",
		Auth: AuthConfig{
			LoginMethod: "workloadidentity", Command: "argocd-k8s-auth", APIVersion: "client.authentication.k8s.io/v1beta1",
		},
	}, c)
	require.NoError(t, c.Validate())

	again := c
	again.Default()
	assert.Equal(t, c, again, "Default is idempotent")

	china := Config{Cloud: "AzureChina"}
	china.Default()
	assert.Equal(t, "AzureChinaCloud", china.Auth.Environment)
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
privateClusters: publicFQDN
privateProxyURL: http://proxy.internal:3128
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
	require.NoError(t, c.Validate())
	ca, caErr, err := c.ttls()
	require.NoError(t, err)
	assert.Equal(t, 90*time.Minute, ca)
	assert.Equal(t, 2*time.Minute, caErr)
	assert.Equal(t, PrivatePublicFQDN, c.PrivateClusters)
	assert.Equal(t, map[string]string{"argocd": "enabled"}, c.IncludeTags)

	err = yaml.UnmarshalStrict([]byte("subscription: [x]\n"), &Config{})
	require.ErrorContains(t, err, `unknown field "subscription"`)
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string
	}{
		{"bad ids", func(c *Config) {
			c.TenantID, c.ClientID = "contoso", "x"
			c.Subscriptions = []string{"9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41", "sub-1", "9B4D2F6E-1A3C-4E8B-B7D5-2C0F9E8A6D41"}
		}, []string{"tenantID: not a GUID", "clientID: not a GUID", `subscriptions[1]: "sub-1" is not a subscription id`, "subscriptions[2]: repeats subscriptions[0]"}},
		{"cloud", func(c *Config) { c.Cloud = "Mars" }, []string{`cloud: "Mars" is not one of`}},
		{"resource groups", func(c *Config) { c.ResourceGroups = []string{"ok", " ", "a/b"} },
			[]string{`resourceGroups[1]: " " is not`, `resourceGroups[2]: "a/b" is not`}},
		{"tags", func(c *Config) {
			c.LabelTags = []string{""}
			c.IncludeTags = map[string]string{"": "x"}
		}, []string{"labelTags[0]: empty", "includeTags: empty tag key"}},
		{"private policy", func(c *Config) { c.PrivateClusters = "public"; c.PrivateProxyURL = "ftp://user:pw@proxy" },
			[]string{`privateClusters: "public" is not one of exclude, privateFQDN, publicFQDN`, "privateProxyURL: must not carry user info"}},
		{"durations", func(c *Config) {
			c.CATTL, c.CAErrorTTL = "an hour", "-1m"
		}, []string{`caTTL: "an hour" is not a duration`, "caErrorTTL: must be positive"}},
		{"concurrency", func(c *Config) { c.Concurrency = 1000 }, []string{"concurrency: 1000 is not between 1 and 64"}},
		{"names", func(c *Config) { c.NamePrefix = "aks "; c.NameTemplate = "{{.Cluster}}" },
			[]string{"namePrefix: must not contain spaces", "nameTemplate: template: name:1:2: executing"}},
		{"endpoint", func(c *Config) { c.ARMEndpoint = "http://management.example.com" }, []string{"armEndpoint: must be an https URL"}},
		{"login method", func(c *Config) { c.Auth.LoginMethod = "devicecode" }, []string{"auth.loginMethod: devicecode is interactive"}},
		{"auth ids and hosts", func(c *Config) {
			c.Auth.LoginMethod, c.Auth.ClientID, c.Auth.AuthorityHost, c.Auth.Command = "token", "x", "http://login", "argocd k8s auth"
		}, []string{`auth.loginMethod: "token" is not one of`, "auth.clientID: not a GUID", "auth.authorityHost: must be an https URL", "auth.command: must be a command name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			c.Default()
			tt.mutate(&c)
			err := c.Validate()
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
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
			err := c.Validate()
			require.ErrorContains(t, err, "auth.env."+k+": holds a secret")
			assert.NotContains(t, err.Error(), value)
		})
	}
	for _, k := range []string{"AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_CERTIFICATE_PATH", "AAD_POP_TOKEN_CLAIMS", "AAD_IS_POP_TOKEN_ENABLED", "KEYVAULT_NAME"} {
		t.Run(k, func(t *testing.T) {
			var c Config
			c.Default()
			c.Auth.Env = map[string]string{k: "x"}
			require.NoError(t, c.Validate())
		})
	}
	var c Config
	c.Default()
	c.Auth.Env = map[string]string{"1BAD": "x", "MULTI": "a\nb"}
	err := c.Validate()
	require.ErrorContains(t, err, "auth.env.1BAD: not an environment variable name")
	require.ErrorContains(t, err, "auth.env.MULTI: must be one line")
}

func TestRemovedStateFiltersAreRejected(t *testing.T) {
	const why = `was removed: every cluster is listed and its AKS state mapped to a phase (see "Cluster lifecycle" in the README)`
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"provisioningStates", "provisioningStates: [Succeeded]\n", []string{"provisioningStates: " + why}},
		{"powerStates", "powerStates: [\"*\"]\n", []string{"powerStates: " + why}},
		{"both, even empty", "provisioningStates: []\npowerStates: [Running]\n", []string{"provisioningStates: " + why, "powerStates: " + why}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			require.NoError(t, yaml.UnmarshalStrict([]byte(tt.yaml), &c), "the keys still parse, to be explained")
			c.Default()
			err := c.Validate()
			require.Error(t, err)
			assert.Equal(t, strings.Join(tt.want, "\n"), err.Error())
		})
	}
}
