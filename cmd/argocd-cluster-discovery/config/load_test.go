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
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

func TestLoadDemo(t *testing.T) {
	cfg, err := Load(demoConfig)
	require.NoError(t, err)

	dir := filepath.Dir(demoConfig)
	assert.Equal(t, dir, cfg.Dir)
	assert.Equal(t, Log{Level: "info", Format: "text"}, cfg.Log)
	assert.Empty(t, cfg.Warnings)

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
	assert.Equal(t, "demo-token-change-me", strings.TrimSpace(string(b)))

	// Inventory: interval and timeout from the file, jitter defaulted.
	assert.Equal(t, 30*time.Second, cfg.Inventory.Interval.Std())
	assert.Equal(t, 10*time.Second, cfg.Inventory.Timeout.Std())
	assert.Equal(t, 0.1, cfg.Inventory.Jitter)

	// Sources: interval set in the file; timeout unset, so the inventory's
	// (10s, not the 30s built-in default) is the effective one.
	require.Len(t, cfg.Sources, 2)
	for i, want := range []struct{ name, file string }{{"demo-aws", "clusters-aws.yaml"}, {"demo-azure", "clusters-azure.yaml"}} {
		s := &cfg.Sources[i]
		assert.Equal(t, want.name, s.Name)
		assert.Equal(t, sources.ProviderStatic, s.Provider)
		assert.Equal(t, 5*time.Second, s.Interval.Std(), s.Name)
		assert.True(t, s.Timeout.IsZero(), "an unset timeout stays unset: %s", s.Name)
		assert.Equal(t, 5*time.Second, cfg.EffectiveInterval(s), s.Name)
		assert.Equal(t, 10*time.Second, cfg.EffectiveTimeout(s), s.Name)
		sc, ok := s.Section.(*static.Config)
		require.True(t, ok, "%s: section is %T", s.Name, s.Section)
		assert.Equal(t, filepath.Join(dir, want.file), sc.File, "the static file is taken from the configuration's directory")
		assert.Empty(t, sc.Clusters)
		_, err := os.Stat(sc.File)
		assert.NoError(t, err, "the resolved static file must exist")
	}
}

func TestLoadAbsolutePathGivesAbsolutePaths(t *testing.T) {
	abs, err := filepath.Abs(demoConfig)
	require.NoError(t, err)
	cfg, err := Load(abs)
	require.NoError(t, err)
	require.Len(t, cfg.Server.Tokens, 1)
	assert.True(t, filepath.IsAbs(cfg.Server.Tokens[0].File), cfg.Server.Tokens[0].File)
	assert.Equal(t, filepath.Join(filepath.Dir(abs), "token"), cfg.Server.Tokens[0].File)
	for _, s := range cfg.Sources {
		assert.Equal(t, filepath.Join(filepath.Dir(abs), "clusters-"+strings.TrimPrefix(s.Name, "demo-")+".yaml"), s.Section.(*static.Config).File)
	}
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
		{name: "invalid content names file and field", path: invalid, wantErr: []string{"config " + invalid + ":\n", `log.level: Unsupported value: "loud"`}},
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
	_, err := Load(invalid)
	assert.Equal(t, []string{"log.level"}, paths(err), "Errors sees through Load's wrapping")
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
		Sources []map[string]json.RawMessage `json:"sources"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	assert.Equal(t, []map[string]any{{"file": tokenPath}, {"env": "ACD_TEST_API_TOKEN"}}, doc.Server.Tokens)
	assert.Equal(t, "10s", doc.Server.TokenReloadInterval, "durations are rendered as strings")
	assert.Equal(t, "1m0s", doc.Inventory.Interval)
	require.Len(t, doc.Sources, 1)
	assert.Contains(t, string(doc.Sources[0]["static"]), "ACD_TEST_CLUSTER_TOKEN", "the section is under its provider's key, with the cluster token reference")
	assert.NotContains(t, s, `"Dir"`)
	assert.NotContains(t, s, `"dir"`)
}
