package eks

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// parseSection reads an `eks:` section as the configuration loader does.
func parseSection(t *testing.T, doc string) Config {
	t.Helper()
	var wrapper struct {
		EKS Config `json:"eks"`
	}
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &wrapper))
	return wrapper.EKS
}

func TestConfigYAMLAndDefaults(t *testing.T) {
	c := parseSection(t, `
eks:
  regions: [eu-west-1, us-east-1]
  accounts:
    - id: "111111111111"
      roleARN: arn:aws:iam::111111111111:role/discovery
      externalID: shared-ext-id
      argocdRoleARN: arn:aws:iam::999999999999:role/argocd
    - id: "222222222222"
      regions: [ap-southeast-2]
  describeTTL: 30m
  tags: {allow: ["team", "example.com/*"]}
  privateEndpoints: {policy: proxy, proxyUrl: "http://proxy.internal:3128"}
  nameTemplate: "{{.Name}}-{{.Region}}"
`)
	c.Default()
	require.NoError(t, c.Validate())
	assert.Equal(t, "30m", c.DescribeTTL)
	assert.Equal(t, DefaultConcurrency, c.Concurrency)
	assert.Nil(t, c.Statuses, "no default: the key is rejected")
	assert.Equal(t, []string{"aws:*"}, c.Tags.Deny)
	assert.Equal(t, DefaultSessionName, c.Accounts[1].SessionName)
	assert.Equal(t, AuthModeAWS, c.Auth.Mode)
	assert.Equal(t, DefaultExecCommand, c.Auth.Command)
	assert.Equal(t, DefaultMaxAttempts, c.MaxAttempts)
	assert.Equal(t, "20s", c.MaxBackoff)
	assert.Equal(t, []string{"tenant", "argocd-project", "argocd-namespaces"}, []string{c.TenantTag, c.ProjectTag, c.NamespacesTag})

	t.Run("deny: [] turns the default off", func(t *testing.T) {
		c := parseSection(t, "eks:\n  tags: {deny: []}\n")
		c.Default()
		assert.Empty(t, c.Tags.Deny)
	})
	t.Run("unknown keys are errors", func(t *testing.T) {
		var w struct {
			EKS Config `json:"eks"`
		}
		err := yaml.UnmarshalStrict([]byte("eks:\n  region: [eu-west-1]\n"), &w)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `unknown field "region"`)
	})
}

func TestConfigValidate(t *testing.T) {
	valid := func() Config {
		c := Config{
			Regions:  []string{"eu-west-1"},
			Accounts: []Account{{ID: "111111111111", RoleARN: "arn:aws:iam::111111111111:role/discovery"}},
		}
		c.Default()
		return c
	}
	for _, tc := range []struct {
		name   string
		yaml   string // parsed over valid(), when set
		mutate func(*Config)
		want   []string
	}{
		{name: "valid"},
		{name: "regions required", mutate: func(c *Config) { c.Regions = nil }, want: []string{"regions: required"}},
		{name: "bad and duplicate regions", mutate: func(c *Config) { c.Regions = []string{"eu-west-1", "Europe", "eu-west-1"} },
			want: []string{`regions[1]: "Europe" is not an AWS region`, `regions[2]: "eu-west-1" is listed twice`}},
		{name: "gov and china regions", mutate: func(c *Config) { c.Regions = []string{"us-gov-west-1", "cn-north-1", "ap-southeast-5"} }},
		{name: "accounts required", mutate: func(c *Config) { c.Accounts = nil }, want: []string{"accounts: at least one account is required"}},
		{name: "account checks", mutate: func(c *Config) {
			c.Accounts = append(c.Accounts,
				Account{ID: "111111111111", SessionName: "x"},
				Account{ID: "12345", RoleARN: "arn:aws:iam::222222222222:role/r", ArgocdRoleARN: "arn:aws:iam::222222222222:user/u",
					SessionName: "ok-name", ExternalID: "has space", Regions: []string{"mars-1"}},
				Account{ID: "333333333333", RoleARN: "arn:aws:s3:::bucket", SessionName: "ok-name"},
				Account{ID: "444444444444", ExternalID: "ext", SessionName: "ok-name"},
			)
		}, want: []string{
			"accounts[1].id: 111111111111 is already listed by accounts[0]",
			`accounts[1].sessionName: "x" must be 2-64 characters`,
			`accounts[2].id: "12345" is not a 12-digit AWS account id`,
			"accounts[2].roleARN: is a role of account 222222222222, not 12345",
			"accounts[2].externalID: must be 2-1224 characters",
			`accounts[2].argocdRoleARN: "arn:aws:iam::222222222222:user/u" is not an IAM role ARN`,
			`accounts[2].regions[0]: "mars-1" is not an AWS region`,
			`accounts[3].roleARN: "arn:aws:s3:::bucket" is not an IAM role ARN`,
			"accounts[4].externalID: only used with roleARN",
		}},
		{name: "bad durations", yaml: "describeTTL: soon\nmaxBackoff: \"-1s\"\n",
			want: []string{`describeTTL: "soon" is not a positive duration such as "1h"`, `maxBackoff: "-1s" is not a positive duration`}},
		{name: "numbers out of range", mutate: func(c *Config) { c.Concurrency, c.MaxAttempts = 1000, -1 },
			want: []string{"concurrency: 1000 must be between 1 and 100", "maxAttempts: -1 must be between 1 and 20"}},
		{name: "statuses was removed", yaml: "statuses: [ACTIVE, UPDATING]\n",
			want: []string{`statuses: was removed: every cluster is listed and its EKS status mapped to a phase (see "Cluster lifecycle" in the README)`}},
		{name: "statuses was removed, even empty", yaml: "statuses: []\n", want: []string{"statuses: was removed: "}},
		{name: "tag patterns", mutate: func(c *Config) { c.Tags.Allow = []string{"[", ""} },
			want: []string{`tags.allow[0]: "[" is not a path.Match pattern`, `tags.allow[1]: "" is not a path.Match pattern`}},
		{name: "auth mode", mutate: func(c *Config) { c.Auth.Mode = "token" }, want: []string{`auth.mode: "token" is not one of awsAuthConfig, exec`}},
		{name: "proxy needs a url", mutate: func(c *Config) { c.PrivateEndpoints.Policy = PrivateProxy },
			want: []string{"privateEndpoints.proxyUrl: required with policy proxy"}},
		{name: "proxy url without credentials", mutate: func(c *Config) {
			c.PrivateEndpoints = PrivateEndpoints{Policy: PrivateProxy, ProxyURL: "http://user:hunter2@proxy:3128"}
		}, want: []string{"privateEndpoints.proxyUrl: must not carry user info"}},
		{name: "proxy url only with proxy", mutate: func(c *Config) { c.PrivateEndpoints.ProxyURL = "http://proxy:3128" },
			want: []string{"privateEndpoints.proxyUrl: only used with policy proxy"}},
		{name: "policy", mutate: func(c *Config) { c.PrivateEndpoints.Policy = "skip" },
			want: []string{`privateEndpoints.policy: "skip" is not one of include, exclude, proxy`}},
		{name: "name template", mutate: func(c *Config) { c.NameTemplate = "{{.Cluster}}" },
			want: []string{"nameTemplate: ", "can't evaluate field Cluster"}},
		{name: "empty name", mutate: func(c *Config) { c.NameTemplate = "{{if false}}x{{end}}" },
			want: []string{"nameTemplate: renders an empty name"}},
		{name: "endpoints", mutate: func(c *Config) { c.Endpoint, c.STSEndpoint = "localhost:8080", "https://sts.example.com" },
			want: []string{"endpoint: must be an http(s) URL"}},
		{name: "tagging endpoint", mutate: func(c *Config) { c.TaggingEndpoint = "https://user@tagging.example.com" },
			want: []string{"taggingEndpoint: must be an http(s) URL with a host and no user info"}},
		{name: "tagging endpoint, valid", mutate: func(c *Config) { c.TaggingEndpoint = "https://tagging.eu-west-1.amazonaws.com" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			if tc.yaml != "" {
				require.NoError(t, yaml.UnmarshalStrict([]byte(tc.yaml), &c))
			}
			if tc.mutate != nil {
				tc.mutate(&c)
			}
			err := c.Validate()
			if len(tc.want) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			lines := strings.Split(err.Error(), "\n")
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			if !strings.HasPrefix(tc.want[0], "nameTemplate") {
				assert.Len(t, lines, len(tc.want), "one line per problem: %s", err)
			}
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}
}
