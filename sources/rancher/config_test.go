package rancher

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// section is where the tests' sections sit in a configuration file.
var section = field.NewPath("sources").Index(2).Child("rancher")

// errorStrings renders an ErrorList one error a line.
func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

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
ace: auto
aceAllowedHosts: ["*.k8s.example.com", ace.example.net]
aceLabel: example.com/ace
secretURL: https://rancher.cattle-system.svc/
clusterTokens: perCluster
tokenTTL: 2h
tokenGracePeriod: 2m
tenantLabel: team
projectLabel: example.com/project
namespacesAnnotation: example.com/namespaces
tenant: platform
project: default
namespaces: [apps, monitoring]
namePrefix: eu-
requestTimeout: 10s
events: false
`
	var c Config
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &c))
	c.Default()
	require.Empty(t, c.Validate(section))
	off := false
	assert.Equal(t, Config{
		URL: "https://rancher.example.com", Token: sources.SecretRef{File: "/var/run/rancher/token"}, Events: &off,
		CAFile: "/etc/rancher/ca.pem", PageLimit: 500, IncludeLocal: true,
		LabelSelector: "env in (prod,staging)", ExcludeNameRegex: "^tmp-",
		DropLabelPrefixes: []string{}, DropAnnotationPrefixes: defaultDropPrefixes(),
		ACE: ACEAuto, ACELabel: "example.com/ace", ACEAllowedHosts: []string{"*.k8s.example.com", "ace.example.net"}, TenantLabel: "team", ProjectLabel: "example.com/project",
		SecretURL: "https://rancher.cattle-system.svc/", ClusterTokens: ClusterTokensPerCluster, TokenTTL: sources.D(2 * time.Hour),
		TokenGracePeriod:     sources.D(2 * time.Minute),
		NamespacesAnnotation: "example.com/namespaces", Tenant: "platform", Project: "default",
		Namespaces: []string{"apps", "monitoring"}, NamePrefix: "eu-", RequestTimeout: sources.D(10 * time.Second),
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
			require.NoError(t, yaml.UnmarshalStrict([]byte("url: https://rancher.example.com\ntoken: {file: /t}\naceAllowedHosts: [\"*.example.com\"]\n"+tc.doc+"\n"), &c))
			c.Default()
			assert.Equal(t, []string{
				`sources[2].rancher.states: Forbidden: removed: every cluster is listed and its Rancher state mapped to a phase (see "Cluster lifecycle" in the README)`,
			}, errorStrings(c.Validate(section)))
			_, err := c.NewSource(sources.SourceOptions{Name: "x"})
			require.ErrorContains(t, err, "states: Forbidden: "+statesRemoved)
		})
	}
}

func TestConfigDefault(t *testing.T) {
	c := Config{}
	c.Default()
	on := true
	assert.Equal(t, Config{
		Events: &on, PageLimit: 1000, DropLabelPrefixes: defaultDropPrefixes(), DropAnnotationPrefixes: defaultDropPrefixes(),
		ACE: ACEOff, ACELabel: defaultACELabel, TenantLabel: "tenant", ProjectLabel: "argocd-project",
		NamespacesAnnotation: "argocd-namespaces", RequestTimeout: sources.D(30 * time.Second),
		ClusterTokens: ClusterTokensShared, TokenTTL: sources.D(24 * time.Hour), TokenGracePeriod: sources.D(10 * time.Minute),
	}, c)
	assert.Contains(t, c.DropLabelPrefixes, "objectset.rio.cattle.io/")
	assert.Contains(t, c.DropLabelPrefixes, "field.cattle.io/")
	assert.Contains(t, c.DropLabelPrefixes, "lifecycle.cattle.io/")

	off := false
	set := Config{Events: &off, PageLimit: 5, DropLabelPrefixes: []string{}, ACE: ACEOn, ACELabel: "a", TenantLabel: "b", ProjectLabel: "c",
		NamespacesAnnotation: "d", RequestTimeout: sources.D(time.Second), ClusterTokens: ClusterTokensPerCluster,
		TokenTTL: sources.D(time.Hour), TokenGracePeriod: sources.D(time.Minute)}
	c = set
	c.Default()
	set.DropAnnotationPrefixes = defaultDropPrefixes()
	assert.Equal(t, set, c, "a value that is set is kept")
}

// validConfig is a defaulted section with every required field.
func validConfig() Config {
	c := Config{URL: "https://rancher.example.com", Token: sources.SecretRef{File: "/token"}}
	c.Default()
	return c
}

// badConfigs change one field of validConfig each; want is every error,
// with its full path.
var badConfigs = []struct {
	name   string
	change func(c *Config)
	want   []string // nil for valid
}{
	{name: "valid", change: func(*Config) {}},
	{name: "plain http", change: func(c *Config) { c.URL = "http://rancher.internal:8080" }},
	{name: "env token", change: func(c *Config) { c.Token = sources.SecretRef{Env: "RANCHER_TOKEN"} }},
	{name: "no url", change: func(c *Config) { c.URL = "" },
		want: []string{"sources[2].rancher.url: Required value: the Rancher server's base URL"}},
	{name: "url with /v3", change: func(c *Config) { c.URL = "https://rancher.example.com/v3" },
		want: []string{"sources[2].rancher.url: Invalid value: must be the server's base URL, without a path (no /v3)"}},
	{name: "url with user info, never quoted", change: func(c *Config) { c.URL = "https://admin:pw@rancher.example.com" },
		want: []string{"sources[2].rancher.url: Invalid value: server url must not carry user info"}},
	{name: "url scheme", change: func(c *Config) { c.URL = "ftp://rancher.example.com" },
		want: []string{"sources[2].rancher.url: Invalid value: server url scheme must be https or http"}},
	{name: "no token", change: func(c *Config) { c.Token = sources.SecretRef{} },
		want: []string{"sources[2].rancher.token: Required value: set file or env"}},
	{name: "two tokens", change: func(c *Config) { c.Token.Env = "X" },
		want: []string{"sources[2].rancher.token: Invalid value: set exactly one of file, env or secret (got 2)"}},
	{name: "secret token", change: func(c *Config) {
		c.Token = sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "rancher", Key: "token"}}
	}, want: []string{"sources[2].rancher.token.secret: Forbidden: a Kubernetes Secret reference is not supported here: set file or env"}},
	{name: "page limit", change: func(c *Config) { c.PageLimit = 10001 },
		want: []string{"sources[2].rancher.pageLimit: Invalid value: 10001: must be between 1 and 10000"}},
	{name: "negative page limit", change: func(c *Config) { c.PageLimit = -1 },
		want: []string{"sources[2].rancher.pageLimit: Invalid value: -1: must be between 1 and 10000"}},
	{name: "states", change: func(c *Config) { c.States = []string{"active"} },
		want: []string{"sources[2].rancher.states: Forbidden: " + statesRemoved}},
	{name: "selector", change: func(c *Config) { c.LabelSelector = "env in (" },
		want: []string{`sources[2].rancher.labelSelector: Invalid value: "env in (": unable to parse requirement: found '', expected: ',', ')' or identifier`}},
	{name: "exclude selector", change: func(c *Config) { c.ExcludeLabelSelector = "!!" },
		want: []string{`sources[2].rancher.excludeLabelSelector: Invalid value: "!!": unable to parse requirement: found '!', expected: identifier`}},
	{name: "regex", change: func(c *Config) { c.NameRegex = "(" },
		want: []string{"sources[2].rancher.nameRegex: Invalid value: \"(\": error parsing regexp: missing closing ): `(`"}},
	{name: "exclude regex", change: func(c *Config) { c.ExcludeNameRegex = "[" },
		want: []string{"sources[2].rancher.excludeNameRegex: Invalid value: \"[\": error parsing regexp: missing closing ]: `[`"}},
	{name: "ace label", change: func(c *Config) { c.ACELabel = "not a key" },
		want: []string{`sources[2].rancher.aceLabel: Invalid value: "not a key": not a valid key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`}},
	{name: "namespaces annotation", change: func(c *Config) { c.NamespacesAnnotation = "a/b/c" },
		want: []string{`sources[2].rancher.namespacesAnnotation: Invalid value: "a/b/c": not a valid key: a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`}},
	{name: "namespace", change: func(c *Config) { c.Namespaces = []string{"ok", "Not_OK"} },
		want: []string{`sources[2].rancher.namespaces[1]: Invalid value: "Not_OK": not a namespace name`}},
	{name: "timeout", change: func(c *Config) { _ = c.RequestTimeout.UnmarshalJSON([]byte(`"soon"`)) }, want: []string{`sources[2].rancher.requestTimeout: Invalid value: "soon": not a duration such as "30s" or "5m"`}},
	{name: "zero timeout", change: func(c *Config) { _ = c.RequestTimeout.UnmarshalJSON([]byte(`"0s"`)) }, want: []string{`sources[2].rancher.requestTimeout: Invalid value: "0s": must be positive`}},
	{name: "negative timeout", change: func(c *Config) { c.RequestTimeout = sources.D(-time.Second) },
		want: []string{`sources[2].rancher.requestTimeout: Invalid value: "-1s": must be at least 0s`}},
	{name: "secret url", change: func(c *Config) { c.SecretURL = "https://rancher.cattle-system.svc:8443/" }},
	{name: "secret url, plain http as url", change: func(c *Config) { c.SecretURL = "http://rancher.cattle-system.svc" }},
	{name: "secret url with user info, never quoted", change: func(c *Config) { c.SecretURL = "https://u:pw@rancher.internal" },
		want: []string{"sources[2].rancher.secretURL: Invalid value: server url must not carry user info"}},
	{name: "secret url with a query", change: func(c *Config) { c.SecretURL = "https://rancher.internal?x=1" },
		want: []string{"sources[2].rancher.secretURL: Invalid value: server url must not have a query or fragment"}},
	{name: "secret url with a path", change: func(c *Config) { c.SecretURL = "https://rancher.internal/k8s/clusters" },
		want: []string{"sources[2].rancher.secretURL: Invalid value: must be the server's base URL, without a path (no /v3)"}},
	{name: "secret url scheme", change: func(c *Config) { c.SecretURL = "rancher.internal" },
		want: []string{"sources[2].rancher.secretURL: Invalid value: server url scheme must be https or http"}},
	{name: "blank secret url", change: func(c *Config) { c.SecretURL = " " },
		want: []string{"sources[2].rancher.secretURL: Invalid value: blank: leave secretURL out to use url"}},
	{name: "ace auto", change: func(c *Config) { c.ACE, c.ACEAllowedHosts = ACEAuto, []string{"*.k8s.example.com", "10.0.0.1"} }},
	{name: "ace without allowed hosts", change: func(c *Config) { c.ACE = ACEOn },
		want: []string{`sources[2].rancher.aceAllowedHosts: Required value: ace true sends each cluster's token to the fqdn its owner sets in Rancher: name the hosts it may be (e.g. "*.k8s.example.com")`}},
	{name: "allowed hosts", change: func(c *Config) {
		c.ACE, c.ACEAllowedHosts = ACEAuto, []string{"*.com", "https://ace.example.com", "*", "ok.example.com"}
	}, want: []string{
		`sources[2].rancher.aceAllowedHosts[0]: Invalid value: "*.com": not a host name or address, or *.<domain> (a domain of two labels at least)`,
		`sources[2].rancher.aceAllowedHosts[1]: Invalid value: "https://ace.example.com": not a host name or address, or *.<domain> (a domain of two labels at least)`,
		`sources[2].rancher.aceAllowedHosts[2]: Invalid value: "*": not a host name or address, or *.<domain> (a domain of two labels at least)`,
	}},
	{name: "ace", change: func(c *Config) { c.ACE = "always" },
		want: []string{`sources[2].rancher.ace: Unsupported value: "always": supported values: "false", "true", "auto"`}},
	{name: "ace in capitals", change: func(c *Config) { c.ACE = "Auto" },
		want: []string{`sources[2].rancher.ace: Unsupported value: "Auto": supported values: "false", "true", "auto"`}},
	{name: "per-cluster tokens", change: func(c *Config) { c.ClusterTokens = ClusterTokensPerCluster }},
	{name: "cluster tokens", change: func(c *Config) { c.ClusterTokens = "percluster" },
		want: []string{`sources[2].rancher.clusterTokens: Unsupported value: "percluster": supported values: "shared", "perCluster"`}},
	{name: "shortest token ttl", change: func(c *Config) { c.TokenTTL = sources.D(10 * time.Minute) }},
	{name: "token ttl too short", change: func(c *Config) { c.TokenTTL = sources.D(time.Minute) },
		want: []string{`sources[2].rancher.tokenTTL: Invalid value: "1m0s": must be at least 10m0s`}},
	{name: "token grace period", change: func(c *Config) { _ = c.TokenGracePeriod.UnmarshalJSON([]byte(`"0.5s"`)) },
		want: []string{`sources[2].rancher.tokenGracePeriod: Invalid value: "500ms": must be at least 1s`}},
	{name: "token ttl", change: func(c *Config) { _ = c.TokenTTL.UnmarshalJSON([]byte(`"a day"`)) },
		want: []string{`sources[2].rancher.tokenTTL: Invalid value: "a day": not a duration such as "30s" or "5m"`}},
}

// TestConfigACE checks the values the ace key takes: the policies, and
// the booleans it took before auto, with their old meaning. Any other
// value is reported by Validate at its path, with the file's other
// problems, rather than stopping the decoding.
func TestConfigACE(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want ACEPolicy
		errs []string
	}{
		{doc: "ace: true", want: ACEOn},
		{doc: "ace: false", want: ACEOff},
		{doc: `ace: "true"`, want: ACEOn},
		{doc: `ace: "false"`, want: ACEOff},
		{doc: "ace: auto", want: ACEAuto},
		{doc: "ace: null", want: ACEOff},
		{doc: "", want: ACEOff},
		{doc: "ace: 1", want: "1", errs: []string{`sources[2].rancher.ace: Unsupported value: "1": supported values: "false", "true", "auto"`}},
		{doc: "ace: [auto]", want: `["auto"]`,
			errs: []string{`sources[2].rancher.ace: Unsupported value: "[\"auto\"]": supported values: "false", "true", "auto"`}},
		{doc: "ace: sometimes", want: "sometimes",
			errs: []string{`sources[2].rancher.ace: Unsupported value: "sometimes": supported values: "false", "true", "auto"`}},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			var c Config
			require.NoError(t, yaml.UnmarshalStrict([]byte("url: https://rancher.example.com\ntoken: {file: /t}\naceAllowedHosts: [\"*.example.com\"]\n"+tc.doc+"\n"), &c))
			c.Default()
			assert.Equal(t, tc.want, c.ACE)
			assert.Equal(t, tc.errs, errorStrings(c.Validate(section)))
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range badConfigs {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.change(&c)
			assert.Equal(t, tc.want, errorStrings(c.Validate(section)))
			_, err := c.NewSource(sources.SourceOptions{Name: "x"})
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err, "NewSource refuses an invalid section")
		})
	}
}

// TestConfigValidateEveryError checks that one call reports every problem
// of a section, each at its full path, and that it changes nothing.
func TestConfigValidateEveryError(t *testing.T) {
	c := Config{
		Token:          sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "rancher", Key: "token"}},
		PageLimit:      20000,
		States:         []string{},
		NameRegex:      "(",
		ProjectLabel:   "-bad-",
		Namespaces:     []string{"apps", "ok", "Not OK", "x_y"},
		RequestTimeout: sources.D(-time.Second),
	}
	c.Default()
	before := c
	before.Namespaces = append([]string(nil), c.Namespaces...)
	errs := c.Validate(section)
	var got []string
	for _, e := range errs {
		got = append(got, string(e.Type)+" "+e.Field)
	}
	assert.Equal(t, []string{
		"FieldValueRequired sources[2].rancher.url",
		"FieldValueForbidden sources[2].rancher.token.secret",
		"FieldValueInvalid sources[2].rancher.pageLimit",
		"FieldValueForbidden sources[2].rancher.states",
		"FieldValueInvalid sources[2].rancher.nameRegex",
		"FieldValueInvalid sources[2].rancher.projectLabel",
		"FieldValueInvalid sources[2].rancher.namespaces[2]",
		"FieldValueInvalid sources[2].rancher.namespaces[3]",
		"FieldValueInvalid sources[2].rancher.requestTimeout",
	}, got)
	assert.Equal(t, before, c, "Validate changes nothing")

	rel := c.Validate(nil)
	require.Len(t, rel, len(errs))
	assert.Equal(t, "url", rel[0].Field, "a nil path gives paths relative to the section")
	assert.Equal(t, "namespaces[2]", rel[6].Field)
}

func TestSetDirectory(t *testing.T) {
	for _, tc := range []struct {
		name       string
		in, want   Config
		dir        string
		wantSource bool // a source can be built from the result
	}{
		{name: "relative paths", dir: "/etc/discovery",
			in:   Config{Token: sources.SecretRef{File: "rancher/token"}, CAFile: "./ca.pem"},
			want: Config{Token: sources.SecretRef{File: "/etc/discovery/rancher/token"}, CAFile: "/etc/discovery/ca.pem"}},
		{name: "absolute paths are kept", dir: "/etc/discovery",
			in:   Config{Token: sources.SecretRef{File: "/run/token"}, CAFile: "/run/ca.pem"},
			want: Config{Token: sources.SecretRef{File: "/run/token"}, CAFile: "/run/ca.pem"}},
		{name: "env token and no caFile", dir: "/etc/discovery",
			in:   Config{Token: sources.SecretRef{Env: "RANCHER_TOKEN"}},
			want: Config{Token: sources.SecretRef{Env: "RANCHER_TOKEN"}}},
		{name: "relative directory", dir: "conf",
			in:   Config{Token: sources.SecretRef{File: "token"}, CAFile: "../ca.pem"},
			want: Config{Token: sources.SecretRef{File: "conf/token"}, CAFile: "ca.pem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.in
			c.SetDirectory(tc.dir)
			assert.Equal(t, tc.want, c)
		})
	}

	// As the service does it: the files are found beside the configuration.
	dir := t.TempDir()
	writeToken(t, dir, testToken)
	c := Config{URL: "https://rancher.example.com", Token: sources.SecretRef{File: "token"}}
	c.Default()
	c.SetDirectory(dir)
	assert.Equal(t, filepath.Join(dir, "token"), c.Token.File)
	got, err := readToken(c.Token)
	require.NoError(t, err)
	assert.Equal(t, testToken, got)
}

// TestProvider runs the registration as the service does: an empty
// section from NewConfig, decoded, defaulted, rooted, validated, then
// built.
func TestProvider(t *testing.T) {
	var p sources.Registration = Provider{}
	assert.Equal(t, sources.ProviderRancher, p.Name())
	assert.Equal(t, sources.KindManager, p.Kind())

	dir := t.TempDir()
	writeToken(t, dir, testToken)
	pc := p.NewConfig()
	require.IsType(t, &Config{}, pc)
	require.NoError(t, yaml.UnmarshalStrict([]byte("url: https://rancher.example.com\ntoken: {file: token}\nrequestTimeout: 5s\n"), pc))
	pc.Default()
	pc.SetDirectory(dir)
	require.Empty(t, pc.Validate(section))
	src, err := pc.NewSource(sources.SourceOptions{Name: "rancher-a"})
	require.NoError(t, err)
	s, ok := src.(*Source)
	require.True(t, ok)
	t.Cleanup(s.Close)
	assert.Equal(t, 5*time.Second, s.timeout)
	assert.Equal(t, filepath.Join(dir, "token"), s.cfg.Token.File)
	assert.NotSame(t, pc, &s.cfg, "the source keeps its own copy")
}

// TestREADMEDefaults checks that the README's configuration example names
// every key but the removed states, and gives each its default.
func TestREADMEDefaults(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(readme), "```yaml\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	var doc []struct {
		Name     string         `json:"name"`
		Provider string         `json:"provider"`
		Rancher  map[string]any `json:"rancher"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(block), &doc))
	require.Len(t, doc, 1)
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Config]()) {
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key != "states" {
			assert.Contains(t, doc[0].Rancher, key, "the README leaves out %s", key)
		}
	}

	var c Config
	section, err := json.Marshal(doc[0].Rancher)
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(section, &c), "every key is a key")
	if len(c.Namespaces) == 0 {
		c.Namespaces = nil // [] in the README
	}
	if len(c.ACEAllowedHosts) == 0 {
		c.ACEAllowedHosts = nil // [] in the README
	}
	want := Config{URL: c.URL, Token: c.Token}
	want.Default()
	assert.Equal(t, want, c)
}
