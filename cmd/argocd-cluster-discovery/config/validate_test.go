package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseValid(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{name: "jitter zero", yaml: okServer + "inventory:\n  jitter: 0\n" + okSources},
		{name: "jitter just below one", yaml: okServer + "inventory:\n  jitter: 0.99\n" + okSources},
		{name: "debug text logs", yaml: "log:\n  level: debug\n  format: text\n" + okServer + okSources},
		{name: "warn level", yaml: "log:\n  level: warn\n" + okServer + okSources},
		{name: "error level", yaml: "log:\n  level: error\n" + okServer + okSources},
		{name: "separate ops listener", yaml: "server:\n  listen: :8080\n  opsListen: :9090\n  tokens: [{env: T}]\n" + okSources},
		{name: "path prefix", yaml: "server:\n  pathPrefix: /argocd/plugin\n  tokens: [{env: T}]\n" + okSources},
		{name: "path prefix without leading slash", yaml: "server:\n  pathPrefix: plugin\n  tokens: [{env: T}]\n" + okSources},
		{name: "interval of exactly 1s", yaml: okServer + "sources:\n  - name: one\n    provider: static\n    interval: 1s\n    static: {file: a.yaml}\n"},
		{name: "source name of 40 characters", yaml: okServer + "sources:\n  - name: " + strings.Repeat("a", 40) + "\n    provider: static\n    static: {file: a.yaml}\n"},
		{name: "source name with digits and dashes", yaml: okServer + "sources:\n  - name: aws-prod-2\n    provider: static\n    static: {file: a.yaml}\n"},
		{
			name: "inline static clusters",
			yaml: okServer + `sources:
  - name: inline
    provider: static
    static:
      clusters:
        - name: c1
          server: https://c1.example.com
          auth:
            bearerToken: {env: C1_TOKEN}
`,
		},
		{name: "json is yaml", yaml: `{"server": {"tokens": [{"env": "T"}]}, "sources": [{"name": "one", "provider": "static", "static": {"file": "a.yaml"}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "/etc/acd")
			require.NoError(t, err)
			require.NotNil(t, cfg)
			assert.Empty(t, cfg.Validate())
		})
	}
}

func TestParseInvalidLogAndServer(t *testing.T) {
	checkProblems(t, []problem{
		{name: "log level", yaml: "log:\n  level: verbose\n" + okServer + okSources, wantErr: []string{`log.level: Unsupported value: "verbose"`}, wantCount: 1},
		{name: "log level upper case", yaml: "log:\n  level: INFO\n" + okServer + okSources, wantErr: []string{"log.level: "}, wantCount: 1},
		{name: "log format", yaml: "log:\n  format: xml\n" + okServer + okSources, wantErr: []string{`log.format: Unsupported value: "xml"`}, wantCount: 1},
		{name: "gc percent zero", yaml: "runtime:\n  gcPercent: 0\n" + okServer + okSources, wantErr: []string{"runtime.gcPercent: Invalid value: 0: must be between 1 and 1000"}, wantCount: 1},
		{name: "gc percent off", yaml: "runtime:\n  gcPercent: -1\n" + okServer + okSources, wantErr: []string{"runtime.gcPercent: "}, wantCount: 1},
		{name: "server listen empty", yaml: "server:\n  listen: \"\"\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.listen: Required value"}, wantCount: 1},
		{name: "server tokens missing", yaml: okSources, wantErr: []string{"server.tokens: Required value"}, wantCount: 1},
		{name: "server tokens empty", yaml: "server:\n  tokens: []\n" + okSources, wantErr: []string{"server.tokens: Required value: at least one"}, wantCount: 1},
		{name: "server token with file and env", yaml: "server:\n  tokens:\n    - file: token\n      env: T\n" + okSources, wantErr: []string{"server.tokens[0]: Invalid value: ", "got 2"}, wantCount: 1},
		{name: "server token empty", yaml: "server:\n  tokens:\n    - {}\n" + okSources, wantErr: []string{"server.tokens[0]: Invalid value: ", "got 0"}, wantCount: 1},
		{
			name:      "server second token is a kubernetes secret",
			yaml:      "server:\n  tokens:\n    - env: T\n    - secret: {name: api, key: token}\n" + okSources,
			wantErr:   []string{"server.tokens[1].secret: Forbidden: use file"},
			wantCount: 1,
		},
		{name: "server path prefix with a space", yaml: "server:\n  pathPrefix: /my plugin\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{`server.pathPrefix: Invalid value: "/my plugin"`}, wantCount: 1},
		{name: "server path prefix with a query", yaml: "server:\n  pathPrefix: /plugin?x=1\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.pathPrefix: "}, wantCount: 1},
		{name: "server path prefix with a percent", yaml: "server:\n  pathPrefix: /a%20b\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.pathPrefix: "}, wantCount: 1},
		{name: "ops listen equal to listen", yaml: "server:\n  listen: :9000\n  opsListen: :9000\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{`server.opsListen: Invalid value: ":9000": must differ`}, wantCount: 1},
		{name: "ops listen equal to default listen", yaml: "server:\n  opsListen: :8080\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.opsListen: Invalid value: \":8080\": must differ"}, wantCount: 1},
		{name: "token reload interval too short", yaml: "server:\n  tokenReloadInterval: 500ms\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{`server.tokenReloadInterval: Invalid value: "500ms": must be at least 1s`}, wantCount: 1},
		{name: "drain delay over a minute", yaml: "server:\n  drainDelay: 2m\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{`server.drainDelay: Invalid value: "2m0s": must be at most 1m0s`}, wantCount: 1},
		{name: "shutdown timeout zero", yaml: "server:\n  shutdownTimeout: 0s\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{`server.shutdownTimeout: Invalid value: "0s": must be at least 1ms`}, wantCount: 1},
	})
}

func TestParseInvalidInventoryAndSources(t *testing.T) {
	src := func(body string) string { return tokensOnly + "sources:\n  - name: one\n" + body }
	static := func(name string) string {
		return tokensOnly + "sources:\n  - name: " + name + "\n    provider: static\n    static: {file: a.yaml}\n"
	}
	checkProblems(t, []problem{
		{name: "jitter one", yaml: tokensOnly + "inventory:\n  jitter: 1\n" + okSources, wantErr: []string{"inventory.jitter: Invalid value: 1: must be in [0, 1)"}, wantCount: 1},
		{name: "jitter above one", yaml: tokensOnly + "inventory:\n  jitter: 1.5\n" + okSources, wantErr: []string{"inventory.jitter: "}, wantCount: 1},
		{name: "jitter negative", yaml: tokensOnly + "inventory:\n  jitter: -0.1\n" + okSources, wantErr: []string{"inventory.jitter: "}, wantCount: 1},
		{name: "jitter not a number", yaml: tokensOnly + "inventory:\n  jitter: lots\n" + okSources, wantErr: []string{"inventory.jitter: Invalid value: got a JSON string"}, wantCount: 1},
		{name: "sources missing", yaml: tokensOnly, wantErr: []string{"sources: Required value: at least one source"}, wantCount: 1},
		{name: "sources empty", yaml: tokensOnly + "sources: []\n", wantErr: []string{"sources: Required value: at least one source"}, wantCount: 1},
		{
			name:      "duplicate source name",
			yaml:      tokensOnly + "sources:\n  - {name: one, provider: static, static: {file: a.yaml}}\n  - {name: one, provider: static, static: {file: b.yaml}}\n",
			wantErr:   []string{`sources[1].name: Duplicate value: "one": also the name of sources[0]`},
			wantCount: 1,
		},
		{name: "source null", yaml: tokensOnly + "sources: [null]\n", wantErr: []string{"sources[0]: Required value: a source needs name, provider"}, wantCount: 1},
		{name: "source not a mapping", yaml: tokensOnly + "sources: [static]\n", wantErr: []string{"sources[0]: Invalid value: must be a mapping"}, wantCount: 1},
		{name: "source name missing", yaml: tokensOnly + "sources:\n  - provider: static\n    static: {file: a.yaml}\n", wantErr: []string{"sources[0].name: Required value"}, wantCount: 1},
		{name: "source name upper case", yaml: static("Demo"), wantErr: []string{`sources[0].name: Invalid value: "Demo"`}, wantCount: 1},
		{name: "source name underscore", yaml: static("demo_aws"), wantErr: []string{"sources[0].name: "}, wantCount: 1},
		{name: "source name dot", yaml: static("demo.aws"), wantErr: []string{"sources[0].name: "}, wantCount: 1},
		{name: "source name leading dash", yaml: static("-demo"), wantErr: []string{"sources[0].name: "}, wantCount: 1},
		{name: "source name trailing dash", yaml: static("demo-"), wantErr: []string{"sources[0].name: "}, wantCount: 1},
		{name: "source name too long", yaml: static(strings.Repeat("a", 41)), wantErr: []string{"sources[0].name: "}, wantCount: 1},
		{name: "interval below 1s", yaml: src("    provider: static\n    interval: 500ms\n    static: {file: a.yaml}\n"), wantErr: []string{`sources[0].interval: Invalid value: "500ms": must be at least 1s`}, wantCount: 1},
		{name: "negative interval", yaml: src("    provider: static\n    interval: -1m\n    static: {file: a.yaml}\n"), wantErr: []string{"sources[0].interval: "}, wantCount: 1},
		{name: "negative timeout", yaml: src("    provider: static\n    timeout: -1s\n    static: {file: a.yaml}\n"), wantErr: []string{`sources[0].timeout: Invalid value: "-1s": must be at least 1ms`}, wantCount: 1},
		{
			name:      "second source invalid",
			yaml:      tokensOnly + "sources:\n  - name: one\n    provider: static\n    static: {file: a.yaml}\n  - name: two\n    provider: static\n    interval: 100ms\n    static: {file: b.yaml}\n",
			wantErr:   []string{"sources[1].interval: "},
			wantCount: 1,
		},
	})
}

// TestParseInvalidDurations: a duration that does not parse names its
// field, like every other problem, and does not hide the others.
func TestParseInvalidDurations(t *testing.T) {
	src := func(body string) string { return tokensOnly + "sources:\n  - name: one\n" + body }
	checkProblems(t, []problem{
		{name: "bad duration string", yaml: src("    provider: static\n    interval: 5 minutes\n    static: {file: a.yaml}\n"), wantErr: []string{`sources[0].interval: Invalid value: "5 minutes": not a duration`}, wantCount: 1},
		{name: "duration as a number", yaml: "server:\n  shutdownTimeout: 30\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{`server.shutdownTimeout: Invalid value: "30": not a duration`}, wantCount: 1},
		{name: "bad token reload interval", yaml: "server:\n  tokenReloadInterval: 10 seconds\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{`server.tokenReloadInterval: Invalid value: "10 seconds"`}, wantCount: 1},
		{name: "bad inventory timeout", yaml: tokensOnly + "inventory:\n  timeout: soon\n" + okSources, wantErr: []string{`inventory.timeout: Invalid value: "soon"`}, wantCount: 1},
		{name: "empty shutdown timeout", yaml: "server:\n  shutdownTimeout: \"\"\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.shutdownTimeout: "}, wantCount: 1},
		{
			name:      "with other problems",
			yaml:      "log: {level: loud}\nserver:\n  shutdownTimeout: soon\n  tokens: []\n" + okSources,
			wantErr:   []string{"log.level: ", "server.shutdownTimeout: ", "server.tokens: "},
			wantCount: 3,
		},
	})
}

func TestParseInvalidProviders(t *testing.T) {
	src := func(body string) string { return tokensOnly + "sources:\n  - name: one\n" + body }
	checkProblems(t, []problem{
		{name: "provider unknown", yaml: src("    provider: gke\n"), wantErr: []string{`sources[0].provider: Unsupported value: "gke": supported values: "aks", "aro", "eks", "rancher", "static"`}, wantCount: 1},
		{name: "provider missing", yaml: src(""), wantErr: []string{"sources[0].provider: Required value: one of aks, aro, eks, rancher, static"}, wantCount: 1},
		{
			name:      "provider wrong case",
			yaml:      src("    provider: Static\n    static: {file: a.yaml}\n"),
			wantErr:   []string{`sources[0].provider: Unsupported value: "Static"`, "sources[0].static: Forbidden: only allowed with provider static"},
			wantCount: 2,
		},
		{name: "provider rancher without its section", yaml: src("    provider: rancher\n"), wantErr: []string{"sources[0].rancher: Required value: required for provider rancher"}, wantCount: 1},
		{name: "provider eks without its section", yaml: src("    provider: eks\n"), wantErr: []string{"sources[0].eks: Required value"}, wantCount: 1},
		{name: "provider aks without its section", yaml: src("    provider: aks\n"), wantErr: []string{"sources[0].aks: Required value"}, wantCount: 1},
		{name: "static provider without static section", yaml: src("    provider: static\n"), wantErr: []string{"sources[0].static: Required value"}, wantCount: 1},
		{name: "static section null", yaml: src("    provider: static\n    static: null\n"), wantErr: []string{"sources[0].static: Required value"}, wantCount: 1},
		{name: "rancher section errors are rooted", yaml: src("    provider: rancher\n    rancher: {token: {env: T}}\n"), wantPrefix: "sources[0].rancher."},
		{name: "eks section errors are rooted", yaml: src("    provider: eks\n    eks: {accounts: [{id: '12'}]}\n"), wantPrefix: "sources[0].eks."},
		{name: "aks section errors are rooted", yaml: src("    provider: aks\n    aks: {tenantID: nope}\n"), wantPrefix: "sources[0].aks."},
		{
			name: "two rancher sources need distinct prefixes",
			yaml: tokensOnly + "sources:\n" +
				"  - {name: eu, provider: rancher, rancher: {url: 'https://r1.example.com', token: {env: T}}}\n" +
				"  - {name: us, provider: rancher, rancher: {url: 'https://r2.example.com', token: {env: T}}}\n",
			wantErr: []string{"sources[1].rancher.namePrefix: ", "its own namePrefix"}, wantCount: 1,
		},
		{name: "section of another provider", yaml: src("    provider: static\n    static: {file: x}\n    eks: {regions: [eu-west-1]}\n"), wantErr: []string{"sources[0].eks: Forbidden: only allowed with provider eks"}, wantCount: 1},
		{
			name:      "static section with another provider",
			yaml:      src("    provider: rancher\n    static: {file: a.yaml}\n"),
			wantErr:   []string{"sources[0].static: Forbidden: only allowed with provider static", "sources[0].rancher: Required value: required for provider rancher"},
			wantCount: 2,
		},
		{name: "section of no provider", yaml: src("    provider: static\n    static: {file: x}\n    gke: {}\n"), wantErr: []string{"sources[0].gke: Forbidden: unknown key"}, wantCount: 1},
		{name: "not yaml", yaml: "log: [\n", wantErr: []string{"parse: "}},
	})
}

func TestParseReportsAllProblemsAtOnce(t *testing.T) {
	yaml := `log:
  level: loud
  format: xml
server:
  opsListen: :8080
  tokens: []
inventory:
  jitter: 2
sources:
  - name: Bad_Name
    provider: gke
  - name: ok
    provider: static
    interval: 10ms
`
	_, err := Parse([]byte(yaml), "/etc/acd")
	require.Error(t, err)
	want := []string{
		"inventory.jitter",
		"log.format",
		"log.level",
		"server.opsListen",
		"server.tokens",
		"sources[0].name",
		"sources[0].provider",
		"sources[1].interval",
		"sources[1].static",
	}
	assert.Equal(t, want, paths(err))
	// One problem per line, sorted, each starting with its path.
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, len(want))
	for i, w := range want {
		assert.True(t, strings.HasPrefix(lines[i], w+": "), "line %d is %q, want prefix %q", i, lines[i], w)
	}
}
