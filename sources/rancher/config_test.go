package rancher

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestConfigFromYAML(t *testing.T) {
	const doc = `
url: https://rancher.example.com
token: {file: /var/run/rancher/token}
caFile: /etc/rancher/ca.pem
pageLimit: 500
includeLocal: true
labelSelector: env in (prod,staging)
excludeNameRegex: ^tmp-
dropLabelPrefixes: []
ace: true
aceLabel: example.com/ace
tenantLabel: team
projectLabel: example.com/project
namespacesAnnotation: example.com/namespaces
tenant: platform
project: default
namespaces: [apps, monitoring]
namePrefix: eu-
requestTimeout: 10s
`
	var c Config
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &c))
	c.Default()
	require.NoError(t, c.Validate())
	assert.Equal(t, Config{
		URL: "https://rancher.example.com", Token: sources.SecretRef{File: "/var/run/rancher/token"},
		CAFile: "/etc/rancher/ca.pem", PageLimit: 500, IncludeLocal: true,
		LabelSelector: "env in (prod,staging)", ExcludeNameRegex: "^tmp-",
		DropLabelPrefixes: []string{}, DropAnnotationPrefixes: DefaultDropPrefixes(),
		ACE: true, ACELabel: "example.com/ace", TenantLabel: "team", ProjectLabel: "example.com/project",
		NamespacesAnnotation: "example.com/namespaces", Tenant: "platform", Project: "default",
		Namespaces: []string{"apps", "monitoring"}, NamePrefix: "eu-", RequestTimeout: "10s",
	}, c)

	require.Error(t, yaml.UnmarshalStrict([]byte("url: x\npageSize: 3\n"), &Config{}), "unknown keys are errors")
}

// TestConfigStatesRemoved checks that a configuration written for the
// removed states filter is refused with a message that says why, rather
// than read as an unknown key or silently ignored.
func TestConfigStatesRemoved(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{name: "the old default", doc: "states: [active]"},
		{name: "several states", doc: "states: [active, updating, unavailable]"},
		{name: "an empty list", doc: "states: []"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			require.NoError(t, yaml.UnmarshalStrict([]byte("url: https://rancher.example.com\ntoken: {file: /t}\n"+tc.doc+"\n"), &c))
			c.Default()
			err := c.Validate()
			require.EqualError(t, err, `states was removed: every cluster is listed and its Rancher state mapped to a phase (see "Cluster lifecycle" in the README)`)
			_, err = New("x", c, Options{})
			require.ErrorIs(t, err, errStatesRemoved)
		})
	}
}

func TestConfigDefault(t *testing.T) {
	c := Config{}
	c.Default()
	assert.Equal(t, Config{
		PageLimit: 1000, DropLabelPrefixes: DefaultDropPrefixes(), DropAnnotationPrefixes: DefaultDropPrefixes(),
		ACELabel: DefaultACELabel, TenantLabel: "tenant", ProjectLabel: "argocd-project",
		NamespacesAnnotation: "argocd-namespaces", RequestTimeout: "30s",
	}, c)
	assert.Contains(t, c.DropLabelPrefixes, "objectset.rio.cattle.io/")
	assert.Contains(t, c.DropLabelPrefixes, "field.cattle.io/")
	assert.Contains(t, c.DropLabelPrefixes, "lifecycle.cattle.io/")
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *Config)
		want   string // the whole message; "" for valid
	}{
		{name: "valid", change: func(*Config) {}},
		{name: "plain http", change: func(c *Config) { c.URL = "http://rancher.internal:8080" }},
		{name: "env token", change: func(c *Config) { c.Token = sources.SecretRef{Env: "RANCHER_TOKEN"} }},
		{name: "no url", change: func(c *Config) { c.URL = "" }, want: "url: required"},
		{name: "url with /v3", change: func(c *Config) { c.URL = "https://rancher.example.com/v3" },
			want: "url: must be the server's base URL, without a path (no /v3)"},
		{name: "url with user info", change: func(c *Config) { c.URL = "https://admin:pw@rancher.example.com" },
			want: "url: server url must not carry user info"},
		{name: "url scheme", change: func(c *Config) { c.URL = "ftp://rancher.example.com" },
			want: "url: server url scheme must be https or http"},
		{name: "no token", change: func(c *Config) { c.Token = sources.SecretRef{} }, want: "token: required (set file or env)"},
		{name: "two tokens", change: func(c *Config) { c.Token.Env = "X" }, want: "token: set exactly one of file, env or secret (got 2)"},
		{name: "secret token", change: func(c *Config) {
			c.Token = sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "rancher", Key: "token"}}
		}, want: "token: a Kubernetes Secret reference is not supported here: set file or env"},
		{name: "page limit", change: func(c *Config) { c.PageLimit = 10001 }, want: "pageLimit: must be between 1 and 10000"},
		{name: "negative page limit", change: func(c *Config) { c.PageLimit = -1 }, want: "pageLimit: must be between 1 and 10000"},
		{name: "states", change: func(c *Config) { c.States = []string{"active"} },
			want: `states was removed: every cluster is listed and its Rancher state mapped to a phase (see "Cluster lifecycle" in the README)`},
		{name: "selector", change: func(c *Config) { c.LabelSelector = "env in (" }, want: "labelSelector: "},
		{name: "exclude selector", change: func(c *Config) { c.ExcludeLabelSelector = "!!" }, want: "excludeLabelSelector: "},
		{name: "regex", change: func(c *Config) { c.NameRegex = "(" }, want: "nameRegex: error parsing regexp: missing closing ): `(`"},
		{name: "exclude regex", change: func(c *Config) { c.ExcludeNameRegex = "[" }, want: "excludeNameRegex: "},
		{name: "ace label", change: func(c *Config) { c.ACELabel = "not a key" }, want: "aceLabel: "},
		{name: "namespaces annotation", change: func(c *Config) { c.NamespacesAnnotation = "a/b/c" }, want: "namespacesAnnotation: "},
		{name: "namespace", change: func(c *Config) { c.Namespaces = []string{"ok", "Not_OK"} },
			want: `namespaces[1]: "Not_OK" is not a namespace name`},
		{name: "timeout", change: func(c *Config) { c.RequestTimeout = "soon" }, want: `requestTimeout: time: invalid duration "soon"`},
		{name: "zero timeout", change: func(c *Config) { c.RequestTimeout = "0s" }, want: "requestTimeout: must be positive"},
		{name: "two errors", change: func(c *Config) { c.URL, c.PageLimit = "", 0 },
			want: "pageLimit: must be between 1 and 10000\nurl: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{URL: "https://rancher.example.com", Token: sources.SecretRef{File: "/token"}}
			c.Default()
			tc.change(&c)
			err := c.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			if tc.want[len(tc.want)-1] == ' ' {
				assert.Contains(t, err.Error(), tc.want)
			} else {
				assert.Equal(t, tc.want, err.Error())
			}
			_, err = New("x", c, Options{})
			require.Error(t, err, "New validates")
		})
	}
}
