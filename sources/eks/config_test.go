package eks

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
	require.Empty(t, c.Validate(nil))
	assert.Equal(t, 30*time.Minute, c.DescribeTTL.Std())
	assert.Equal(t, defaultConcurrency, c.Concurrency)
	assert.Nil(t, c.Statuses, "no default: the key is rejected")
	assert.Equal(t, []string{"aws:*"}, c.Tags.Deny)
	assert.Equal(t, defaultSessionName, c.Accounts[1].SessionName)
	assert.Equal(t, AuthModeAWS, c.Auth.Mode)
	assert.Equal(t, defaultExecCommand, c.Auth.Command)
	assert.Equal(t, defaultMaxAttempts, c.MaxAttempts)
	assert.Equal(t, 20*time.Second, c.MaxBackoff.Std())
	assert.Equal(t, []string{"tenant", "argocd-project", "argocd-namespaces"}, []string{c.TenantTag, c.ProjectTag, c.NamespacesTag})
	assert.Equal(t, "argocd-role-arn", c.RoleTag)
	assert.Empty(t, c.RolePattern, "no default: the role tag is ignored")

	t.Run("unset durations get their defaults", func(t *testing.T) {
		c := parseSection(t, "eks: {regions: [eu-west-1]}\n")
		c.Default()
		assert.Equal(t, time.Hour, c.DescribeTTL.Std())
		assert.Equal(t, 20*time.Second, c.MaxBackoff.Std())
	})
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
	t.Run("SetDirectory changes nothing", func(t *testing.T) {
		before := c
		c.SetDirectory("/etc/argocd-cluster-discovery")
		assert.Equal(t, before, c)
	})
}

// validConfig is a valid, defaulted section.
func validConfig() Config {
	c := Config{
		Regions:  []string{"eu-west-1"},
		Accounts: []Account{{ID: "111111111111", RoleARN: "arn:aws:iam::111111111111:role/discovery"}},
	}
	c.Default()
	return c
}

// validateCase changes validConfig (yaml is parsed over it, then mutate
// runs) and lists the errors Validate must return, in order: each error's
// text contains its entry.
type validateCase struct {
	name   string
	yaml   string
	mutate func(*Config)
	want   []string
}

// checkValidate runs cases against Validate with no root path, so that
// errors name their field relative to the section.
func checkValidate(t *testing.T, cases []validateCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			if tc.yaml != "" {
				require.NoError(t, yaml.UnmarshalStrict([]byte(tc.yaml), &c))
			}
			if tc.mutate != nil {
				tc.mutate(&c)
			}
			errs := c.Validate(nil)
			got := make([]string, len(errs))
			for i, e := range errs {
				got[i] = e.Error()
			}
			require.Len(t, got, len(tc.want), "one error per problem: %q", got)
			for i, w := range tc.want {
				assert.Contains(t, got[i], w)
			}
			assert.NotContains(t, strings.Join(got, "\n"), "hunter2")
		})
	}
}

func TestValidateAccountsAndRegions(t *testing.T) {
	checkValidate(t, []validateCase{
		{name: "valid"},
		{name: "regions required", mutate: func(c *Config) { c.Regions = nil }, want: []string{"regions: Required value"}},
		{name: "bad and duplicate regions", mutate: func(c *Config) { c.Regions = []string{"eu-west-1", "Europe", "eu-west-1"} },
			want: []string{`regions[1]: Invalid value: "Europe": not an AWS region`, `regions[2]: Duplicate value: "eu-west-1"`}},
		{name: "accounts of other partitions", mutate: func(c *Config) {
			c.Accounts = append(c.Accounts,
				Account{ID: "222222222222", RoleARN: "arn:aws-us-gov:iam::222222222222:role/discovery", SessionName: "s1",
					ArgocdRoleARN: "arn:aws-us-gov:iam::999999999999:role/argocd", Regions: []string{"us-gov-west-1", "us-gov-east-1"}},
				Account{ID: "333333333333", RoleARN: "arn:aws-cn:iam::333333333333:role/discovery", SessionName: "s1", Regions: []string{"cn-north-1"}},
				Account{ID: "444444444444", RoleARN: "arn:aws-eusc:iam::444444444444:role/discovery", SessionName: "s1", Regions: []string{"eusc-de-east-1"}},
			)
		}},
		{name: "regions of two partitions", mutate: func(c *Config) { c.Regions = []string{"eu-west-1", "cn-north-1", "us-east-1"} },
			want: []string{`regions[1]: Invalid value: "cn-north-1": a region of partition aws-cn, but eu-west-1 is of aws: an account's regions are all of one partition`}},
		{name: "roles of another partition than the regions", mutate: func(c *Config) {
			c.Regions = []string{"eusc-de-east-1"}
			c.Accounts[0].ArgocdRoleARN = "arn:aws-eusc:iam::999999999999:role/argocd"
			c.Accounts = append(c.Accounts, Account{ID: "222222222222", RoleARN: "arn:aws-eusc:iam::222222222222:role/discovery",
				ArgocdRoleARN: "arn:aws:iam::222222222222:role/argocd", SessionName: "s1", Regions: []string{"eu-west-1"}})
		}, want: []string{
			`accounts[0].roleARN: Invalid value: "arn:aws:iam::111111111111:role/discovery": a role of partition aws, but the account's regions are of aws-eusc`,
			`accounts[1].roleARN: Invalid value: "arn:aws-eusc:iam::222222222222:role/discovery": a role of partition aws-eusc, but the account's regions are of aws`,
		}},
		{name: "accounts required", mutate: func(c *Config) { c.Accounts = nil },
			want: []string{"accounts: Required value: at least one account is required"}},
		{name: "account checks", mutate: func(c *Config) {
			c.Accounts = append(c.Accounts,
				Account{ID: "111111111111", SessionName: "x"},
				Account{ID: "12345", RoleARN: "arn:aws:iam::222222222222:role/r", ArgocdRoleARN: "arn:aws:iam::222222222222:user/u",
					SessionName: "ok-name", ExternalID: "has space", Regions: []string{"mars-1"}},
				Account{ID: "333333333333", RoleARN: "arn:aws:s3:::bucket", SessionName: "ok-name"},
				Account{ID: "444444444444", ExternalID: "ext", SessionName: "ok-name"},
			)
		}, want: []string{
			`accounts[1].id: Duplicate value: "111111111111": already listed by accounts[0]`,
			`accounts[1].sessionName: Invalid value: "x": must be 2-64 characters`,
			`accounts[2].id: Invalid value: "12345": not a 12-digit AWS account id`,
			`accounts[2].roleARN: Invalid value: "arn:aws:iam::222222222222:role/r": a role of account 222222222222, not 12345`,
			"accounts[2].externalID: Invalid value: must be 2-1224 characters",
			`accounts[2].argocdRoleARN: Invalid value: "arn:aws:iam::222222222222:user/u": not an IAM role ARN`,
			`accounts[2].regions[0]: Invalid value: "mars-1": not an AWS region`,
			`accounts[3].roleARN: Invalid value: "arn:aws:s3:::bucket": not an IAM role ARN`,
			"accounts[4].externalID: Forbidden: only used with roleARN",
		}},
	})
}

func TestValidateSettings(t *testing.T) {
	checkValidate(t, []validateCase{
		{name: "bad durations", yaml: "describeTTL: soon\nmaxBackoff: \"-1s\"\n",
			want: []string{`describeTTL: Invalid value: "soon": not a duration`, `maxBackoff: Invalid value: "-1s": must be at least 1ns`}},
		{name: "numbers out of range", mutate: func(c *Config) { c.Concurrency, c.MaxAttempts = 1000, -1 },
			want: []string{"concurrency: Invalid value: 1000: must be between 1 and 100", "maxAttempts: Invalid value: -1: must be between 1 and 20"}},
		{name: "statuses was removed", yaml: "statuses: [ACTIVE, UPDATING]\n",
			want: []string{`statuses: Forbidden: was removed: every cluster is listed and its EKS status mapped to a phase (see "Cluster lifecycle" in the README)`}},
		{name: "statuses was removed, even empty", yaml: "statuses: []\n", want: []string{"statuses: Forbidden: was removed: "}},
		{name: "role tag opted in", mutate: func(c *Config) {
			c.RoleTag, c.RolePattern = "example.com/argocd-role", []string{"arn:aws:iam::*:role/argocd-*", "arn:aws:iam::*:role/teams/*/argocd"}
		}},
		{name: "role tag", mutate: func(c *Config) {
			c.RoleTag, c.RolePattern = "aws:role", []string{"argocd-*", "arn:[", "", "arn:aws:iam::*:role/argocd"}
		}, want: []string{
			`roleTag: Invalid value: "aws:role": the aws: prefix is reserved to AWS`,
			`rolePattern[0]: Invalid value: "argocd-*": not a path.Match pattern of role ARNs, such as arn:aws:iam::*:role/argocd-*`,
			`rolePattern[1]: Invalid value: "arn:[": not a path.Match pattern`,
			`rolePattern[2]: Invalid value: "": not a path.Match pattern`,
		}},
		{name: "role tag not a tag key", mutate: func(c *Config) { c.RoleTag = " role" },
			want: []string{`roleTag: Invalid value: " role": must be an AWS tag key: 1-128 characters, without surrounding spaces`}},
		{name: "role tag too long", mutate: func(c *Config) { c.RoleTag = strings.Repeat("r", 129) },
			want: []string{`roleTag: Invalid value: "rrrr`}},
		{name: "role tag is another tag", mutate: func(c *Config) { c.RoleTag = "tenant" },
			want: []string{`roleTag: Invalid value: "tenant": already the tenantTag, projectTag or namespacesTag`}},
		{name: "tag patterns", mutate: func(c *Config) { c.Tags.Allow = []string{"[", ""} },
			want: []string{`tags.allow[0]: Invalid value: "[": not a path.Match pattern`, `tags.allow[1]: Invalid value: "": not a path.Match pattern`}},
		{name: "auth mode", mutate: func(c *Config) { c.Auth.Mode = "token" },
			want: []string{`auth.mode: Unsupported value: "token": supported values: "awsAuthConfig", "exec"`}},
		{name: "auth command", mutate: func(c *Config) { c.Auth.Command = " argocd-k8s-auth" },
			want: []string{"auth.command: Invalid value: \" argocd-k8s-auth\": must be a command name without surrounding spaces"}},
		{name: "name template", mutate: func(c *Config) { c.NameTemplate = "{{.Cluster}}" },
			want: []string{`nameTemplate: Invalid value: "{{.Cluster}}": template: name:1:2: executing "name" at <.Cluster>: can't evaluate field Cluster`}},
		{name: "empty name", mutate: func(c *Config) { c.NameTemplate = "{{if false}}x{{end}}" },
			want: []string{`nameTemplate: Invalid value: "{{if false}}x{{end}}": renders an empty name`}},
		{name: "endpoints", mutate: func(c *Config) { c.Endpoint, c.STSEndpoint = "localhost:8080", "https://sts.example.com" },
			want: []string{"endpoint: Invalid value: must be an http(s) URL"}},
		{name: "tagging endpoint", mutate: func(c *Config) { c.TaggingEndpoint = "https://user:hunter2@tagging.example.com" },
			want: []string{"taggingEndpoint: Invalid value: must be an http(s) URL with a host and no user info"}},
		{name: "tagging endpoint, valid", mutate: func(c *Config) { c.TaggingEndpoint = "https://tagging.eu-west-1.amazonaws.com" }},
	})
}

func TestValidatePrivateEndpoints(t *testing.T) {
	checkValidate(t, []validateCase{
		{name: "proxy needs a url", mutate: func(c *Config) { c.PrivateEndpoints.Policy = PrivateProxy },
			want: []string{"privateEndpoints.proxyUrl: Required value: required with policy proxy"}},
		{name: "proxy url without credentials", mutate: func(c *Config) {
			c.PrivateEndpoints = PrivateEndpoints{Policy: PrivateProxy, ProxyURL: "http://user:hunter2@proxy:3128"}
		}, want: []string{"privateEndpoints.proxyUrl: Invalid value: must not carry user info"}},
		{name: "proxy url only with proxy", mutate: func(c *Config) { c.PrivateEndpoints.ProxyURL = "http://proxy:3128" },
			want: []string{"privateEndpoints.proxyUrl: Forbidden: only used with policy proxy"}},
		{name: "policy", mutate: func(c *Config) { c.PrivateEndpoints.Policy = "skip" },
			want: []string{`privateEndpoints.policy: Unsupported value: "skip": supported values: "include", "exclude", "proxy"`}},
	})
}

// fieldErr is the type and full path of one validation error.
type fieldErr struct {
	typ   field.ErrorType
	field string
}

// fieldPathCases are bad sections (parsed, then defaulted) and every error
// Validate must return for them, in order, under sources[2].eks.
var fieldPathCases = []struct {
	name string
	yaml string
	want []fieldErr
}{
	{name: "empty section", yaml: "{}", want: []fieldErr{
		{field.ErrorTypeRequired, "sources[2].eks.regions"},
		{field.ErrorTypeRequired, "sources[2].eks.accounts"},
	}},
	{name: "accounts", yaml: `
regions: [eu-west-1]
accounts:
  - {id: "111111111111"}
  - {id: "222222222222", regions: [eu-west-1, moon-1]}
  - {id: "333333333333", roleARN: "arn:aws:iam::444444444444:role/discovery", sessionName: "a b", argocdRoleARN: nope}
  - {id: "111111111111", externalID: ext}
  - {id: "555555555555", regions: [eu-west-1, cn-north-1], argocdRoleARN: "arn:aws-cn:iam::555555555555:role/argocd"}
`, want: []fieldErr{
		{field.ErrorTypeInvalid, "sources[2].eks.accounts[1].regions[1]"},
		{field.ErrorTypeInvalid, "sources[2].eks.accounts[2].roleARN"},
		{field.ErrorTypeInvalid, "sources[2].eks.accounts[2].sessionName"},
		{field.ErrorTypeInvalid, "sources[2].eks.accounts[2].argocdRoleARN"},
		{field.ErrorTypeDuplicate, "sources[2].eks.accounts[3].id"},
		{field.ErrorTypeForbidden, "sources[2].eks.accounts[3].externalID"},
		{field.ErrorTypeInvalid, "sources[2].eks.accounts[4].argocdRoleARN"},
		{field.ErrorTypeInvalid, "sources[2].eks.accounts[4].regions[1]"},
	}},
	{name: "settings", yaml: `
regions: [eu-west-1, eu-west-1]
accounts: [{id: "111111111111"}]
concurrency: 101
describeTTL: 1
statuses: [ACTIVE]
tags: {allow: ["["], deny: ["a", "["]}
roleTag: tenant
rolePattern: ["arn:aws:iam::*:role/argocd", "role/*"]
auth: {mode: token, command: " x"}
privateEndpoints: {policy: exclude, proxyUrl: "http://proxy:3128"}
nameTemplate: "{{.Nope}}"
endpoint: ftp://eks
taggingEndpoint: "://"
stsEndpoint: "https://user@sts"
maxAttempts: 21
maxBackoff: 0.5
`, want: []fieldErr{
		{field.ErrorTypeDuplicate, "sources[2].eks.regions[1]"},
		{field.ErrorTypeInvalid, "sources[2].eks.concurrency"},
		{field.ErrorTypeInvalid, "sources[2].eks.describeTTL"},
		{field.ErrorTypeForbidden, "sources[2].eks.statuses"},
		{field.ErrorTypeInvalid, "sources[2].eks.tags.allow[0]"},
		{field.ErrorTypeInvalid, "sources[2].eks.tags.deny[1]"},
		{field.ErrorTypeInvalid, "sources[2].eks.roleTag"},
		{field.ErrorTypeInvalid, "sources[2].eks.rolePattern[1]"},
		{field.ErrorTypeNotSupported, "sources[2].eks.auth.mode"},
		{field.ErrorTypeInvalid, "sources[2].eks.auth.command"},
		{field.ErrorTypeForbidden, "sources[2].eks.privateEndpoints.proxyUrl"},
		{field.ErrorTypeInvalid, "sources[2].eks.nameTemplate"},
		{field.ErrorTypeInvalid, "sources[2].eks.endpoint"},
		{field.ErrorTypeInvalid, "sources[2].eks.taggingEndpoint"},
		{field.ErrorTypeInvalid, "sources[2].eks.stsEndpoint"},
		{field.ErrorTypeInvalid, "sources[2].eks.maxAttempts"},
		{field.ErrorTypeInvalid, "sources[2].eks.maxBackoff"},
	}},
}

// TestValidateFieldPaths: bad sections report every problem at once, each
// with its full path from the root of the file and its type.
func TestValidateFieldPaths(t *testing.T) {
	root := field.NewPath("sources").Index(2).Child("eks")
	for _, tc := range fieldPathCases {
		t.Run(tc.name, func(t *testing.T) {
			parse := func() Config {
				var c Config
				require.NoError(t, yaml.UnmarshalStrict([]byte(tc.yaml), &c))
				c.Default()
				return c
			}
			c := parse()
			errs := c.Validate(root)
			got := make([]fieldErr, len(errs))
			for i, e := range errs {
				got[i] = fieldErr{e.Type, e.Field}
			}
			assert.Equal(t, tc.want, got, "%v", errs)
			assert.Equal(t, parse(), c, "Validate changes nothing")
		})
	}
}
