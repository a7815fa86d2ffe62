package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

const demoConfig = "../../../testdata/demo/config.yaml"

// Sections of a valid configuration, for building test documents.
const (
	okServer = `server:
  tokens:
    - env: ACD_TOKEN
`
	okSources = `sources:
  - name: one
    provider: static
    static:
      file: clusters.yaml
`
)

// joined returns the errors joined in err by Validate, or nil when err is
// not such a join.
func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return nil
}

func TestLoadDemo(t *testing.T) {
	cfg, err := Load(demoConfig)
	require.NoError(t, err)

	dir := filepath.Dir(demoConfig)
	assert.Equal(t, dir, cfg.Dir)
	assert.Equal(t, Log{Level: "info", Format: "text"}, cfg.Log)

	// Server: listen from the file, the rest defaulted.
	assert.Equal(t, "127.0.0.1:8080", cfg.Server.Listen)
	assert.Empty(t, cfg.Server.OpsListen)
	assert.Empty(t, cfg.Server.PathPrefix)
	assert.Equal(t, 10*time.Second, cfg.Server.TokenReloadInterval.Std())
	assert.Equal(t, 25*time.Second, cfg.Server.ShutdownTimeout.Std())

	// The token file is taken from the configuration's directory.
	require.Len(t, cfg.Server.Tokens, 1)
	tok := cfg.Server.Tokens[0]
	assert.Empty(t, tok.Env)
	assert.Nil(t, tok.Secret)
	assert.Equal(t, filepath.Join(dir, "token"), tok.File)
	got, err := os.Stat(tok.File)
	require.NoError(t, err, "the resolved token path must exist")
	want, err := os.Stat(filepath.Join("../../../testdata/demo", "token"))
	require.NoError(t, err)
	assert.True(t, os.SameFile(want, got))
	b, err := os.ReadFile(tok.File)
	require.NoError(t, err)
	assert.Equal(t, "demo-token", strings.TrimSpace(string(b)))

	// Inventory: interval and timeout from the file, jitter defaulted.
	assert.Equal(t, 30*time.Second, cfg.Inventory.Interval.Std())
	assert.Equal(t, 10*time.Second, cfg.Inventory.Timeout.Std())
	assert.Equal(t, 0.1, cfg.Inventory.Jitter)

	// Sources: interval set in the file, timeout inherited from inventory
	// (10s, not the 30s built-in default).
	require.Len(t, cfg.Sources, 2)
	for i, want := range []struct{ name, file string }{{"demo-aws", "clusters-aws.yaml"}, {"demo-azure", "clusters-azure.yaml"}} {
		s := cfg.Sources[i]
		assert.Equal(t, want.name, s.Name)
		assert.Equal(t, sources.ProviderStatic, s.Provider)
		assert.Equal(t, 5*time.Second, s.Interval.Std(), s.Name)
		assert.Equal(t, 10*time.Second, s.Timeout.Std(), s.Name)
		require.NotNil(t, s.Static, s.Name)
		assert.Equal(t, want.file, s.Static.File, "the static file stays relative; static.New resolves it with Dir")
		assert.Empty(t, s.Static.Clusters)
		_, err := os.Stat(filepath.Join(cfg.Dir, s.Static.File))
		assert.NoError(t, err, "the static file must exist relative to Dir")
	}
}

func TestLoadAbsolutePathGivesAbsoluteTokenFile(t *testing.T) {
	abs, err := filepath.Abs(demoConfig)
	require.NoError(t, err)
	cfg, err := Load(abs)
	require.NoError(t, err)
	require.Len(t, cfg.Server.Tokens, 1)
	assert.True(t, filepath.IsAbs(cfg.Server.Tokens[0].File), cfg.Server.Tokens[0].File)
	assert.Equal(t, filepath.Join(filepath.Dir(abs), "token"), cfg.Server.Tokens[0].File)
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	invalid := filepath.Join(dir, "invalid.yaml")
	require.NoError(t, os.WriteFile(invalid, []byte("log:\n  level: loud\n"+okServer+okSources), 0o600))

	tests := []struct {
		name    string
		path    string
		wantErr []string
	}{
		{name: "missing file", path: filepath.Join(dir, "missing.yaml"), wantErr: []string{"read config", "missing.yaml"}},
		{name: "directory", path: dir, wantErr: []string{"read config"}},
		{name: "invalid content names file and field", path: invalid, wantErr: []string{"config " + invalid + ":", "log.level"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(tt.path)
			require.Error(t, err)
			assert.Nil(t, cfg)
			for _, w := range tt.wantErr {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	tests := []struct {
		name          string
		yaml          string
		wantIntervals []time.Duration
		wantTimeouts  []time.Duration
		wantInventory [2]time.Duration // interval, timeout
		wantJitter    float64
	}{
		{
			name:          "built-in defaults",
			yaml:          okServer + okSources,
			wantIntervals: []time.Duration{time.Minute},
			wantTimeouts:  []time.Duration{30 * time.Second},
			wantInventory: [2]time.Duration{time.Minute, 30 * time.Second},
			wantJitter:    0.1,
		},
		{
			name:          "inherit inventory values",
			yaml:          okServer + "inventory:\n  interval: 2m\n  timeout: 45s\n  jitter: 0.25\n" + okSources,
			wantIntervals: []time.Duration{2 * time.Minute},
			wantTimeouts:  []time.Duration{45 * time.Second},
			wantInventory: [2]time.Duration{2 * time.Minute, 45 * time.Second},
			wantJitter:    0.25,
		},
		{
			name:          "partial inventory keeps the other defaults",
			yaml:          okServer + "inventory:\n  timeout: 5s\n" + okSources,
			wantIntervals: []time.Duration{time.Minute},
			wantTimeouts:  []time.Duration{5 * time.Second},
			wantInventory: [2]time.Duration{time.Minute, 5 * time.Second},
			wantJitter:    0.1,
		},
		{
			name: "per source overrides",
			yaml: okServer + "inventory:\n  interval: 2m\n  timeout: 45s\n" + `sources:
  - name: both
    provider: static
    interval: 10s
    timeout: 3s
    static: {file: a.yaml}
  - name: interval-only
    provider: static
    interval: 20s
    static: {file: b.yaml}
  - name: timeout-only
    provider: static
    timeout: 4s
    static: {file: c.yaml}
  - name: neither
    provider: static
    static: {file: d.yaml}
`,
			wantIntervals: []time.Duration{10 * time.Second, 20 * time.Second, 2 * time.Minute, 2 * time.Minute},
			wantTimeouts:  []time.Duration{3 * time.Second, 45 * time.Second, 4 * time.Second, 45 * time.Second},
			wantInventory: [2]time.Duration{2 * time.Minute, 45 * time.Second},
			wantJitter:    0.1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "/etc/acd")
			require.NoError(t, err)
			assert.Equal(t, tt.wantInventory, [2]time.Duration{cfg.Inventory.Interval.Std(), cfg.Inventory.Timeout.Std()})
			assert.Equal(t, tt.wantJitter, cfg.Inventory.Jitter)
			var intervals, timeouts []time.Duration
			for _, s := range cfg.Sources {
				intervals = append(intervals, s.Interval.Std())
				timeouts = append(timeouts, s.Timeout.Std())
			}
			assert.Equal(t, tt.wantIntervals, intervals)
			assert.Equal(t, tt.wantTimeouts, timeouts)
			assert.Equal(t, Log{Level: "info", Format: "json"}, cfg.Log)
			assert.Equal(t, ":8080", cfg.Server.Listen)
			assert.Equal(t, "/etc/acd", cfg.Dir)
			assert.Equal(t, 25, cfg.Runtime.GCPercent)
		})
	}
}

func TestParseTokenPaths(t *testing.T) {
	tests := []struct {
		name   string
		tokens string
		want   []sources.SecretRef
	}{
		{name: "relative file", tokens: "    - file: token\n", want: []sources.SecretRef{{File: "/etc/acd/token"}}},
		{name: "relative file in a sub directory", tokens: "    - file: secrets/api/token\n", want: []sources.SecretRef{{File: "/etc/acd/secrets/api/token"}}},
		{name: "relative file going up", tokens: "    - file: ../shared/token\n", want: []sources.SecretRef{{File: "/etc/shared/token"}}},
		{name: "absolute file unchanged", tokens: "    - file: /run/secrets/token\n", want: []sources.SecretRef{{File: "/run/secrets/token"}}},
		{name: "env unchanged", tokens: "    - env: ACD_TOKEN\n", want: []sources.SecretRef{{Env: "ACD_TOKEN"}}},
		{
			name:   "rotation: two tokens",
			tokens: "    - file: old-token\n    - file: /run/new-token\n",
			want:   []sources.SecretRef{{File: "/etc/acd/old-token"}, {File: "/run/new-token"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte("server:\n  tokens:\n"+tt.tokens+okSources), "/etc/acd")
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.Server.Tokens)
		})
	}
}

// TestParseKubeconfigPath: secrets.kubeconfig is taken from the
// configuration file's directory when relative, like every other path.
func TestParseKubeconfigPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"kubeconfig", "/etc/acd/kubeconfig"},
		{"../kube/config", "/etc/kube/config"},
		{"/root/.kube/config", "/root/.kube/config"},
		{"", ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			cfg, err := Parse([]byte(okServer+okSources+"secrets:\n  kubeconfig: \""+tc.in+"\"\n"), "/etc/acd")
			require.NoError(t, err)
			assert.Equal(t, tc.want, cfg.Secrets.Kubeconfig)
		})
	}
}

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
			assert.NoError(t, cfg.Validate())
		})
	}
}

func TestParseUnknownKeys(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantKey string
	}{
		{name: "top level", yaml: "colour: red\n" + okServer + okSources, wantKey: "colour"},
		{name: "log", yaml: "log:\n  levle: debug\n" + okServer + okSources, wantKey: "levle"},
		{name: "server", yaml: "server:\n  listn: :8080\n  tokens: [{env: T}]\n" + okSources, wantKey: "listn"},
		{name: "server token", yaml: "server:\n  tokens:\n    - value: s3cr3t\n" + okSources, wantKey: "value"},
		{name: "inventory", yaml: okServer + "inventory:\n  intervall: 5s\n" + okSources, wantKey: "intervall"},
		{name: "source", yaml: okServer + "sources:\n  - name: one\n    provider: static\n    intervals: 5s\n    static: {file: a.yaml}\n", wantKey: "intervals"},
		{name: "static section", yaml: okServer + "sources:\n  - name: one\n    provider: static\n    static: {files: a.yaml}\n", wantKey: "files"},
		{
			name:    "inline cluster",
			yaml:    okServer + "sources:\n  - name: one\n    provider: static\n    static:\n      clusters:\n        - name: c\n          sever: https://c.example.com\n",
			wantKey: "sever",
		},
		{
			name:    "token value written inline",
			yaml:    okServer + "sources:\n  - name: one\n    provider: static\n    static:\n      clusters:\n        - name: c\n          server: https://c.example.com\n          auth:\n            bearerToken: {token: s3cr3t}\n",
			wantKey: "token",
		},
		{name: "duplicate key", yaml: "log:\n  level: info\n  level: debug\n" + okServer + okSources, wantKey: "level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "/etc/acd")
			require.Error(t, err)
			assert.Nil(t, cfg)
			assert.Contains(t, err.Error(), `"`+tt.wantKey+`"`)
			assert.True(t, strings.HasPrefix(err.Error(), "parse: "), err.Error())
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tokens := "server:\n  tokens: [{env: T}]\n"
	src := func(body string) string { return "sources:\n  - name: one\n" + body }

	tests := []struct {
		name string
		yaml string
		// wantErr are substrings of the error; for validation errors the
		// first names the field.
		wantErr []string
		// wantCount is the number of problems reported; 0 for an error from
		// the decoder, which stops at the first.
		wantCount int
	}{
		{name: "log level", yaml: "log:\n  level: verbose\n" + okServer + okSources, wantErr: []string{"log.level: ", `"verbose"`}, wantCount: 1},
		{name: "log level upper case", yaml: "log:\n  level: INFO\n" + okServer + okSources, wantErr: []string{"log.level: "}, wantCount: 1},
		{name: "log format", yaml: "log:\n  format: xml\n" + okServer + okSources, wantErr: []string{"log.format: ", `"xml"`}, wantCount: 1},
		{name: "gc percent zero", yaml: "runtime:\n  gcPercent: 0\n" + okServer + okSources, wantErr: []string{"runtime.gcPercent: ", "between 1 and 1000"}, wantCount: 1},
		{name: "gc percent off", yaml: "runtime:\n  gcPercent: -1\n" + okServer + okSources, wantErr: []string{"runtime.gcPercent: "}, wantCount: 1},
		{name: "server listen empty", yaml: "server:\n  listen: \"\"\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.listen: required"}, wantCount: 1},
		{name: "server tokens missing", yaml: okSources, wantErr: []string{"server.tokens: "}, wantCount: 1},
		{name: "server tokens empty", yaml: "server:\n  tokens: []\n" + okSources, wantErr: []string{"server.tokens: at least one"}, wantCount: 1},
		{name: "server token with file and env", yaml: "server:\n  tokens:\n    - file: token\n      env: T\n" + okSources, wantErr: []string{"server.tokens[0]: ", "got 2"}, wantCount: 1},
		{name: "server token empty", yaml: "server:\n  tokens:\n    - {}\n" + okSources, wantErr: []string{"server.tokens[0]: ", "got 0"}, wantCount: 1},
		{
			name:      "server second token is a kubernetes secret",
			yaml:      "server:\n  tokens:\n    - env: T\n    - secret: {name: n, key: k}\n" + okSources,
			wantErr:   []string{"server.tokens[1]: use file"},
			wantCount: 1,
		},
		{name: "server path prefix with a space", yaml: "server:\n  pathPrefix: /my plugin\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.pathPrefix: "}, wantCount: 1},
		{name: "server path prefix with a query", yaml: "server:\n  pathPrefix: /plugin?x=1\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.pathPrefix: "}, wantCount: 1},
		{name: "server path prefix with a percent", yaml: "server:\n  pathPrefix: /a%20b\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.pathPrefix: "}, wantCount: 1},
		{name: "ops listen equal to listen", yaml: "server:\n  listen: :9000\n  opsListen: :9000\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.opsListen: must differ"}, wantCount: 1},
		{name: "ops listen equal to default listen", yaml: "server:\n  opsListen: :8080\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.opsListen: must differ"}, wantCount: 1},
		{name: "token reload interval too short", yaml: "server:\n  tokenReloadInterval: 500ms\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.tokenReloadInterval: "}, wantCount: 1},
		{name: "shutdown timeout zero", yaml: "server:\n  shutdownTimeout: 0s\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"server.shutdownTimeout: "}, wantCount: 1},
		{name: "jitter one", yaml: tokens + "inventory:\n  jitter: 1\n" + okSources, wantErr: []string{"inventory.jitter: "}, wantCount: 1},
		{name: "jitter above one", yaml: tokens + "inventory:\n  jitter: 1.5\n" + okSources, wantErr: []string{"inventory.jitter: "}, wantCount: 1},
		{name: "jitter negative", yaml: tokens + "inventory:\n  jitter: -0.1\n" + okSources, wantErr: []string{"inventory.jitter: "}, wantCount: 1},
		{name: "jitter not a number", yaml: tokens + "inventory:\n  jitter: lots\n" + okSources, wantErr: []string{"jitter"}},
		{name: "sources missing", yaml: tokens, wantErr: []string{"sources: at least one"}, wantCount: 1},
		{name: "sources empty", yaml: tokens + "sources: []\n", wantErr: []string{"sources: at least one"}, wantCount: 1},
		{
			name: "duplicate source name",
			yaml: tokens + `sources:
  - name: one
    provider: static
    static: {file: a.yaml}
  - name: one
    provider: static
    static: {file: b.yaml}
`,
			wantErr:   []string{`sources[1].name: "one" is already used by sources[0]`},
			wantCount: 1,
		},
		{name: "source name missing", yaml: tokens + "sources:\n  - provider: static\n    static: {file: a.yaml}\n", wantErr: []string{"sources[0].name: required"}, wantCount: 1},
		{name: "source name upper case", yaml: tokens + "sources:\n  - name: Demo\n    provider: static\n    static: {file: a.yaml}\n", wantErr: []string{"sources[0].name: ", `"Demo"`}, wantCount: 1},
		{name: "source name underscore", yaml: tokens + "sources:\n  - name: demo_aws\n    provider: static\n    static: {file: a.yaml}\n", wantErr: []string{"sources[0].name: "}, wantCount: 1},
		{name: "source name dot", yaml: tokens + "sources:\n  - name: demo.aws\n    provider: static\n    static: {file: a.yaml}\n", wantErr: []string{"sources[0].name: "}, wantCount: 1},
		{name: "source name leading dash", yaml: tokens + "sources:\n  - name: -demo\n    provider: static\n    static: {file: a.yaml}\n", wantErr: []string{"sources[0].name: "}, wantCount: 1},
		{name: "source name trailing dash", yaml: tokens + "sources:\n  - name: demo-\n    provider: static\n    static: {file: a.yaml}\n", wantErr: []string{"sources[0].name: "}, wantCount: 1},
		{name: "source name too long", yaml: tokens + "sources:\n  - name: " + strings.Repeat("a", 41) + "\n    provider: static\n    static: {file: a.yaml}\n", wantErr: []string{"sources[0].name: "}, wantCount: 1},
		{name: "provider unknown", yaml: tokens + src("    provider: gke\n"), wantErr: []string{"sources[0].provider: ", `"gke"`, "not one of"}, wantCount: 1},
		{name: "provider missing", yaml: tokens + src(""), wantErr: []string{"sources[0].provider: ", "not one of"}, wantCount: 1},
		{name: "provider wrong case", yaml: tokens + src("    provider: Static\n    static: {file: a.yaml}\n"), wantErr: []string{"sources[0].provider: ", "sources[0].static: only allowed"}, wantCount: 2},
		{name: "provider rancher without its section", yaml: tokens + src("    provider: rancher\n"), wantErr: []string{"sources[0].rancher: required for provider rancher"}, wantCount: 1},
		{name: "rancher section errors are rooted", yaml: tokens + src("    provider: rancher\n    rancher: {token: {env: T}}\n"), wantErr: []string{"sources[0].rancher.url"}},
		{name: "two rancher sources need distinct prefixes", yaml: tokens + "sources:\n" +
			"  - {name: eu, provider: rancher, rancher: {url: 'https://r1.example.com', token: {env: T}}}\n" +
			"  - {name: us, provider: rancher, rancher: {url: 'https://r2.example.com', token: {env: T}}}\n",
			wantErr: []string{"sources[1].rancher.namePrefix", "its own namePrefix"}, wantCount: 1},
		{name: "provider eks without its section", yaml: tokens + src("    provider: eks\n"), wantErr: []string{"sources[0].eks: required for provider eks"}, wantCount: 1},
		{name: "provider aks without its section", yaml: tokens + src("    provider: aks\n"), wantErr: []string{"sources[0].aks: required for provider aks"}, wantCount: 1},
		{name: "eks section errors are rooted", yaml: tokens + src("    provider: eks\n    eks: {accounts: [{id: '12'}]}\n"), wantErr: []string{"sources[0].eks.regions"}},
		{name: "aks section errors are rooted", yaml: tokens + src("    provider: aks\n    aks: {tenantID: nope}\n"), wantErr: []string{"sources[0].aks.tenantID"}},
		{name: "section of another provider", yaml: tokens + src("    provider: static\n    static: {file: x}\n    eks: {regions: [eu-west-1]}\n"), wantErr: []string{"sources[0].eks: only allowed with provider eks"}, wantCount: 1},
		{
			name:      "static section with another provider",
			yaml:      tokens + src("    provider: rancher\n    static: {file: a.yaml}\n"),
			wantErr:   []string{"sources[0].static: only allowed with provider static", "sources[0].rancher: required for provider rancher"},
			wantCount: 2,
		},
		{name: "static provider without static section", yaml: tokens + src("    provider: static\n"), wantErr: []string{"sources[0].static: required for provider static"}, wantCount: 1},
		{name: "interval below 1s", yaml: tokens + src("    provider: static\n    interval: 500ms\n    static: {file: a.yaml}\n"), wantErr: []string{"sources[0].interval: must be at least 1s"}, wantCount: 1},
		{name: "negative interval", yaml: tokens + src("    provider: static\n    interval: -1m\n    static: {file: a.yaml}\n"), wantErr: []string{"sources[0].interval: "}, wantCount: 1},
		{name: "negative timeout", yaml: tokens + src("    provider: static\n    timeout: -1s\n    static: {file: a.yaml}\n"), wantErr: []string{"sources[0].timeout: must be positive"}, wantCount: 1},
		{
			name:      "second source invalid",
			yaml:      tokens + "sources:\n  - name: one\n    provider: static\n    static: {file: a.yaml}\n  - name: two\n    provider: static\n    interval: 100ms\n    static: {file: b.yaml}\n",
			wantErr:   []string{"sources[1].interval: "},
			wantCount: 1,
		},
		// A duration that does not parse must name its field, like every
		// other problem, whether the decoder or Validate reports it.
		{name: "bad duration string", yaml: tokens + src("    provider: static\n    interval: 5 minutes\n    static: {file: a.yaml}\n"), wantErr: []string{"interval", "5 minutes"}},
		{name: "duration as a number", yaml: "server:\n  shutdownTimeout: 30\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"shutdownTimeout", "30"}},
		{name: "bad token reload interval", yaml: "server:\n  tokenReloadInterval: 10 seconds\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"tokenReloadInterval", "10 seconds"}},
		{name: "bad inventory timeout", yaml: tokens + "inventory:\n  timeout: soon\n" + okSources, wantErr: []string{"timeout", "soon"}},
		{name: "empty shutdown timeout", yaml: "server:\n  shutdownTimeout: \"\"\n  tokens: [{env: T}]\n" + okSources, wantErr: []string{"shutdownTimeout"}},
		{name: "not yaml", yaml: "log: [\n", wantErr: []string{"parse: "}},
		{name: "sources not a list", yaml: tokens + "sources: {name: one}\n", wantErr: []string{"parse: ", "sources"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "/etc/acd")
			require.Error(t, err)
			assert.Nil(t, cfg)
			for _, w := range tt.wantErr {
				assert.Contains(t, err.Error(), w)
			}
			if tt.wantCount > 0 {
				assert.Len(t, joined(err), tt.wantCount, "problems reported: %v", err)
			}
		})
	}
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
		"log.level: ",
		"log.format: ",
		"server.opsListen: ",
		"server.tokens: ",
		"inventory.jitter: ",
		"sources[0].name: ",
		"sources[0].provider: ",
		"sources[1].interval: ",
		"sources[1].static: ",
	}
	errs := joined(err)
	require.Len(t, errs, len(want), "got %v", err)
	for i, w := range want {
		assert.True(t, strings.HasPrefix(errs[i].Error(), w), "problem %d is %q, want prefix %q", i, errs[i], w)
	}
	// One problem per line, readable as printed.
	assert.Len(t, strings.Split(err.Error(), "\n"), len(want))
}

func TestDefaultValidate(t *testing.T) {
	cfg := Default()
	err := cfg.Validate()
	require.Error(t, err)
	errs := joined(err)
	require.Len(t, errs, 2, "the defaults lack only tokens and sources: %v", err)
	assert.Contains(t, errs[0].Error(), "server.tokens: ")
	assert.Contains(t, errs[1].Error(), "sources: ")

	cfg.Server.Tokens = []sources.SecretRef{{Env: "T"}}
	cfg.Sources = []Source{{Name: "one", Provider: sources.ProviderStatic, Interval: cfg.Inventory.Interval, Timeout: cfg.Inventory.Timeout, Static: nil}}
	err = cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sources[0].static: required")
}

func TestJSONHasReferencesNotValues(t *testing.T) {
	const fileSecret = "file-token-value-7a41c9"
	const envSecret = "env-token-value-03bd2e"
	const clusterSecret = "cluster-token-value-55e1f0"
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "secrets"), 0o700))
	tokenPath := filepath.Join(dir, "secrets", "api-token")
	require.NoError(t, os.WriteFile(tokenPath, []byte(fileSecret+"\n"), 0o600))
	t.Setenv("ACD_TEST_API_TOKEN", envSecret)
	t.Setenv("ACD_TEST_CLUSTER_TOKEN", clusterSecret)

	configPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(configPath, []byte(`server:
  tokens:
    - file: secrets/api-token
    - env: ACD_TEST_API_TOKEN
sources:
  - name: inline
    provider: static
    static:
      clusters:
        - name: c1
          server: https://c1.example.com
          auth:
            bearerToken: {env: ACD_TEST_CLUSTER_TOKEN}
`), 0o600))

	cfg, err := Load(configPath)
	require.NoError(t, err)
	raw := cfg.JSON()
	require.True(t, json.Valid(raw), string(raw))
	s := string(raw)

	for _, secret := range []string{fileSecret, envSecret, clusterSecret} {
		assert.NotContains(t, s, secret)
	}

	var doc struct {
		Server struct {
			Tokens              []map[string]any `json:"tokens"`
			TokenReloadInterval string           `json:"tokenReloadInterval"`
		} `json:"server"`
		Inventory struct {
			Interval string `json:"interval"`
		} `json:"inventory"`
		Sources []map[string]any `json:"sources"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	assert.Equal(t, []map[string]any{{"file": tokenPath}, {"env": "ACD_TEST_API_TOKEN"}}, doc.Server.Tokens)
	assert.Equal(t, "10s", doc.Server.TokenReloadInterval, "durations are rendered as strings")
	assert.Equal(t, "1m0s", doc.Inventory.Interval)
	require.Len(t, doc.Sources, 1)
	assert.Contains(t, s, "ACD_TEST_CLUSTER_TOKEN", "the cluster token reference is shown")
	assert.NotContains(t, s, `"Dir"`)
	assert.NotContains(t, s, `"dir"`)
}

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		out  string
	}{
		{in: `"30s"`, want: 30 * time.Second, out: `"30s"`},
		{in: `"1m30s"`, want: 90 * time.Second, out: `"1m30s"`},
		{in: `"500ms"`, want: 500 * time.Millisecond, out: `"500ms"`},
		{in: `"0s"`, want: 0, out: `"0s"`},
		{in: `"-5s"`, want: -5 * time.Second, out: `"-5s"`},
		{in: `"2h"`, want: 2 * time.Hour, out: `"2h0m0s"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var d Duration
			require.NoError(t, json.Unmarshal([]byte(tt.in), &d))
			assert.Equal(t, tt.want, d.Std())
			out, err := json.Marshal(d)
			require.NoError(t, err)
			assert.Equal(t, tt.out, string(out))
		})
	}
}

func TestSecretsSection(t *testing.T) {
	parse := sectionParser(t)
	cfg, err := parse("")
	require.NoError(t, err)
	assert.False(t, cfg.Secrets.Enabled, "off unless enabled")
	assert.Equal(t, "upsert-only", cfg.Secrets.Policy, "never deletes by default")
	assert.Equal(t, 3, cfg.Secrets.Prune.AfterListings)
	assert.True(t, cfg.Secrets.LeaderElection.Enabled)
	assert.Equal(t, "cloud", string(cfg.Inventory.Prefer))

	cfg, err = parse("secrets:\n  enabled: true\n  ownerID: fleet-a\n  policy: sync\n  prune: {afterListings: 5, gracePeriod: 1h}\n" +
		"  tenants: {acme: {project: acme, namespaces: [a, b]}}\n  credentials:\n    one:\n      bearerToken: {secret: {name: aro, key: token}}\n")
	require.NoError(t, err)
	rc := cfg.Secrets.Reconciler()
	assert.Equal(t, "fleet-a", rc.OwnerID)
	assert.Equal(t, time.Hour, rc.Prune.GracePeriod)
	assert.Equal(t, 5, rc.Prune.AfterListings)
	assert.Equal(t, "acme", cfg.Secrets.Tenants["acme"].Project, "the inventory applies the tenant rules (answer and Secret alike)")
	assert.Equal(t, "aro", rc.Credentials["one"].BearerToken.Secret.Name)

	for _, tc := range []struct{ doc, want string }{
		{"secrets: {enabled: true}", "ownerID: required"},
		{"secrets: {select: {tenant: [acme, null]}}", "secrets.select"},
		{"secrets: {select: {tenants: acme}}", `secrets.select: unknown key "tenants"`},
		{"departure: {afterListings: 0}", "departure.afterListings"},
		{"secrets: {client: {qps: 0}}", "secrets.client.qps"},
		{"secrets: {client: {qps: 100, burst: 10}}", "secrets.client.burst"},
		{"departure: {maxFraction: 2}", "departure.maxFraction"},
		{"departure: {gracePeriod: soon}", "departure.gracePeriod: soon is not a duration"},
		{"departure: {afterListings: 5, heldListings: 4}", "departure.heldListings"},
		{"secrets: {enabled: true, ownerID: a, policy: mirror}", `policy "mirror"`},
		{"secrets: {enabled: true, ownerID: a, resync: soon}", "secrets.resync: soon is not a duration"},
		{"secrets: {enabled: true, ownerID: a, leaderElection: {enabled: true, leaseName: l, leaseDuration: 5s, renewDeadline: 10s, retryPeriod: 1s}}", "secrets.leaderElection"},
		{"secrets: {credentials: {nope: {exec: {command: x}}}}", "secrets.credentials.nope: no source of that name"},
		{"secrets: {enabled: true, ownerID: a, prune: {maxDeletionsPercent: 200}}", "maxDeletions"},
		{"secrets: {enabled: true, ownerID: a, prune: {after: 2}}", `unknown field "after"`},
		{"inventory: {prefer: both}", `inventory.prefer: "both"`},
	} {
		_, err := parse(tc.doc + "\n")
		require.Error(t, err, tc.doc)
		assert.Contains(t, err.Error(), tc.want, tc.doc)
	}
}

func TestAppSetRefreshSection(t *testing.T) {
	parse := sectionParser(t)
	cfg, err := parse("")
	require.NoError(t, err)
	r := cfg.ApplicationSetRefresh
	assert.False(t, r.Enabled, "off unless enabled")
	assert.Equal(t, "argocd-cluster-discovery", r.PluginConfigMap)
	assert.Empty(t, r.Namespaces, "Argo CD's namespace (secrets.namespace)")
	assert.Equal(t, 2*time.Second, r.Debounce.Std())

	cfg, err = parse("applicationSetRefresh: {enabled: true, pluginConfigMap: discovery-eu, namespaces: ['*'], debounce: 500ms}\n")
	require.NoError(t, err, "valid without the secrets section: it takes secrets' namespace and leader election defaults")
	assert.Equal(t, []string{"*"}, cfg.ApplicationSetRefresh.Namespaces)
	assert.Equal(t, 500*time.Millisecond, cfg.ApplicationSetRefresh.Debounce.Std())

	for _, tc := range []struct{ doc, want string }{
		{"applicationSetRefresh: {debounce: soon}", "applicationSetRefresh.debounce: soon is not a duration"},
		{"applicationSetRefresh: {debounce: 1ms}", "applicationSetRefresh.debounce: must be between 100ms and 10m"},
		{"applicationSetRefresh: {enabled: true, pluginConfigMap: ''}", `applicationSetRefresh.pluginConfigMap: "" is not a ConfigMap name`},
		{"applicationSetRefresh: {enabled: true, namespaces: [argocd, '*']}", `applicationSetRefresh.namespaces[1]: "*" (every namespace) must be the only entry`},
		{"applicationSetRefresh: {enabled: true, namespaces: [Team_A]}", `applicationSetRefresh.namespaces[0]: "Team_A" is not a namespace name`},
		{"applicationSetRefresh: {enabled: true}\nsecrets: {namespace: ''}", `secrets.namespace: "" is not a namespace name (applicationSetRefresh`},
		{"applicationSetRefresh: {enabled: true}\nsecrets: {leaderElection: {renewDeadline: 1m}}", "secrets.leaderElection: needs a leaseName"},
		{"applicationSetRefresh: {enabled: true, namespace: argocd}", `unknown field "namespace"`},
	} {
		_, err := parse(tc.doc + "\n")
		require.Error(t, err, tc.doc)
		assert.Contains(t, err.Error(), tc.want, tc.doc)
	}
}

func TestRootedSectionErrorsAreClean(t *testing.T) {
	_, err := Parse([]byte("server: {tokens: [{env: T}]}\nsources:\n  - {name: one, provider: eks, eks: {accounts: [{id: '111111111111'}]}}\n"), t.TempDir())
	require.Error(t, err)
	for _, line := range strings.Split(err.Error(), "\n") {
		assert.True(t, strings.HasPrefix(line, "sources[0].eks."), line)
		assert.False(t, strings.HasSuffix(line, ":"), "no stray colon: %q", line)
	}
}

// sectionParser returns a Parse of a valid server and static source plus
// the given extra YAML, as section tests need.
func sectionParser(t *testing.T) func(extra string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "clusters.yaml"), []byte("clusters: []\n"), 0o600))
	return func(extra string) (*Config, error) {
		return Parse([]byte(okServer+okSources+extra), dir)
	}
}
