package config

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// intervalsAndTimeouts returns every source's effective interval and
// timeout, in order.
func intervalsAndTimeouts(cfg *Config) (intervals, timeouts []time.Duration) {
	for i := range cfg.Sources {
		intervals = append(intervals, cfg.EffectiveInterval(&cfg.Sources[i]))
		timeouts = append(timeouts, cfg.EffectiveTimeout(&cfg.Sources[i]))
	}
	return intervals, timeouts
}

func TestParseDefaults(t *testing.T) {
	tests := []struct {
		name          string
		yaml          string
		wantInventory [2]time.Duration // interval, timeout
		wantJitter    float64
	}{
		{name: "built-in defaults", yaml: okServer + okSources, wantInventory: [2]time.Duration{time.Minute, 30 * time.Second}, wantJitter: 0.1},
		{
			name:          "inherit inventory values",
			yaml:          okServer + "inventory:\n  interval: 2m\n  timeout: 45s\n  jitter: 0.25\n" + okSources,
			wantInventory: [2]time.Duration{2 * time.Minute, 45 * time.Second},
			wantJitter:    0.25,
		},
		{
			name:          "partial inventory keeps the other defaults",
			yaml:          okServer + "inventory:\n  timeout: 5s\n" + okSources,
			wantInventory: [2]time.Duration{time.Minute, 5 * time.Second},
			wantJitter:    0.1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "/etc/acd")
			require.NoError(t, err)
			assert.Equal(t, tt.wantInventory, [2]time.Duration{cfg.Inventory.Interval.Std(), cfg.Inventory.Timeout.Std()})
			assert.Equal(t, tt.wantJitter, cfg.Inventory.Jitter)
			intervals, timeouts := intervalsAndTimeouts(cfg)
			assert.Equal(t, []time.Duration{tt.wantInventory[0]}, intervals, "a source without its own takes the inventory's")
			assert.Equal(t, []time.Duration{tt.wantInventory[1]}, timeouts)
			assert.True(t, cfg.Sources[0].Interval.IsZero() && cfg.Sources[0].Timeout.IsZero(), "nothing is copied into the source")
			assert.Equal(t, Log{Level: "info", Format: "json"}, cfg.Log)
			assert.Equal(t, ":8080", cfg.Server.Listen)
			assert.Equal(t, "/etc/acd", cfg.Dir)
			assert.Equal(t, 25, cfg.Runtime.GCPercent)
		})
	}
}

func TestParseSourceOverrides(t *testing.T) {
	cfg, err := Parse([]byte(okServer+"inventory:\n  interval: 2m\n  timeout: 45s\n"+`sources:
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
`), "/etc/acd")
	require.NoError(t, err)
	intervals, timeouts := intervalsAndTimeouts(cfg)
	assert.Equal(t, []time.Duration{10 * time.Second, 20 * time.Second, 2 * time.Minute, 2 * time.Minute}, intervals)
	assert.Equal(t, []time.Duration{3 * time.Second, 45 * time.Second, 4 * time.Second, 45 * time.Second}, timeouts)

	// Changing the inventory's default later changes the effective value
	// of every source that has none of its own.
	cfg.Inventory.Interval = sources.D(5 * time.Minute)
	intervals, _ = intervalsAndTimeouts(cfg)
	assert.Equal(t, []time.Duration{10 * time.Second, 20 * time.Second, 5 * time.Minute, 5 * time.Minute}, intervals)
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

// TestParseStaticFilePath: the static section's file is resolved by its
// provider (SetDirectory) at Parse, so the configuration holds, and logs,
// the path that is read.
func TestParseStaticFilePath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"clusters.yaml", "/etc/acd/clusters.yaml"},
		{"../fleet/clusters.yaml", "/etc/fleet/clusters.yaml"},
		{"/srv/clusters.yaml", "/srv/clusters.yaml"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			cfg, err := Parse([]byte(okServer+"sources:\n  - {name: one, provider: static, static: {file: '"+tc.in+"'}}\n"), "/etc/acd")
			require.NoError(t, err)
			assert.Equal(t, tc.want, cfg.Sources[0].Section.(*static.Config).File)
			assert.Contains(t, string(cfg.JSON()), `"file":"`+tc.want+`"`)
		})
	}
}

func TestDefaultValidate(t *testing.T) {
	cfg := Default()
	errs := cfg.Validate()
	require.Len(t, errs, 2, "the defaults lack only tokens and sources: %v", errs)
	assert.Equal(t, "server.tokens", errs[0].Field)
	assert.Equal(t, "sources", errs[1].Field)

	cfg.Server.Tokens = []sources.SecretRef{{Env: "T"}}
	cfg.Sources = []Source{{Name: "one", Provider: sources.ProviderStatic, Section: &static.Config{File: "/etc/acd/clusters.yaml"}}}
	assert.Empty(t, cfg.Validate(), "a configuration built in code validates like a parsed one")

	for _, tc := range []struct {
		source Source
		want   string
	}{
		{Source{Name: "one", Provider: sources.ProviderStatic}, "sources[0].static: Required value: required for provider static"},
		{Source{Name: "one"}, "sources[0].provider: Required value"},
		{Source{Name: "one", Provider: "gke", Section: &static.Config{File: "/a"}}, `sources[0].provider: Unsupported value: "gke"`},
	} {
		cfg.Sources = []Source{tc.source}
		errs := cfg.Validate()
		require.Len(t, errs, 1, "%+v: %v", tc.source, errs)
		assert.Contains(t, errs[0].Error(), tc.want)
	}
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
			var d sources.Duration
			require.NoError(t, json.Unmarshal([]byte(tt.in), &d))
			assert.Equal(t, tt.want, d.Std())
			out, err := json.Marshal(d)
			require.NoError(t, err)
			assert.Equal(t, tt.out, string(out))
		})
	}
}
