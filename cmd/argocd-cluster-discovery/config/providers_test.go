package config

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// toy is a provider written in a few lines, as a new provider's package
// would: a registration and a section type.
type toy struct{}

func (toy) Name() sources.Provider            { return "toy" }
func (toy) Kind() sources.Kind                { return sources.KindCloud }
func (toy) NewConfig() sources.ProviderConfig { return &toyConfig{} }

// toyConfig has a required key (region), a duration with a default
// (every) and a deprecated key (zone, the old name of region).
type toyConfig struct {
	Region string           `json:"region"`
	Every  sources.Duration `json:"every"`
	Zone   string           `json:"zone,omitempty"`

	dir string // what SetDirectory was given
}

func (c *toyConfig) Default() {
	if c.Every.IsZero() {
		c.Every = sources.D(time.Hour)
	}
	if c.Region == "" {
		c.Region = c.Zone
	}
}

func (c *toyConfig) SetDirectory(dir string) { c.dir = dir }

func (c *toyConfig) Validate(at *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Region == "" {
		errs = append(errs, field.Required(at.Child("region"), ""))
	}
	if e := c.Every.Validate(at.Child("every"), time.Minute, 0); e != nil {
		errs = append(errs, e)
	}
	return errs
}

func (c *toyConfig) Deprecations(at *field.Path) []string {
	if c.Zone == "" {
		return nil
	}
	return []string{at.Child("zone").String() + " is deprecated: use " + at.Child("region").String()}
}

func (c *toyConfig) NewSource(o sources.SourceOptions) (sources.Source, error) {
	return toySource{name: o.Name + "-" + c.Region}, nil
}

type toySource struct{ name string }

func (s toySource) Clusters(context.Context) ([]sources.Cluster, error) {
	return []sources.Cluster{{Provider: "toy", Name: s.name, Server: "https://" + s.name + ".example.com"}}, nil
}

func parseToy(t *testing.T, src string) (*Config, error) {
	t.Helper()
	return ParseWith([]byte(tokensOnly+"sources:\n"+src), "/etc/acd", sources.NewRegistry(static.Provider{}, toy{}))
}

func TestToyProvider(t *testing.T) {
	cfg, err := parseToy(t, "  - {name: play, provider: toy, toy: {region: north}}\n")
	require.NoError(t, err)
	require.Len(t, cfg.Sources, 1)
	s := &cfg.Sources[0]
	tc, ok := s.Section.(*toyConfig)
	require.True(t, ok, "the section is decoded by the provider's own type, got %T", s.Section)
	assert.Equal(t, "north", tc.Region)
	assert.Equal(t, time.Hour, tc.Every.Std(), "the provider's Default ran")
	assert.Equal(t, "/etc/acd", tc.dir, "SetDirectory got the file's directory")
	assert.Empty(t, cfg.Warnings)
	assert.JSONEq(t, `{"name": "play", "provider": "toy", "toy": {"region": "north", "every": "1h0m0s"}}`, mustJSON(t, s))

	src, err := s.Section.NewSource(sources.SourceOptions{Name: s.Name})
	require.NoError(t, err)
	clusters, err := src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, clusters, 1)
	assert.Equal(t, "play-north", clusters[0].Name)

	reg, ok := cfg.Registry().Lookup("toy")
	require.True(t, ok, "the configuration keeps the registry it was parsed with")
	assert.Equal(t, sources.KindCloud, reg.Kind())
}

func TestToyProviderErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{name: "required key", src: "  - {name: play, provider: toy, toy: {}}\n", want: []string{"sources[0].toy.region: Required value"}},
		{name: "short duration", src: "  - {name: play, provider: toy, toy: {region: north, every: 1s}}\n", want: []string{`sources[0].toy.every: Invalid value: "1s": must be at least 1m0s`}},
		{name: "bad duration", src: "  - {name: play, provider: toy, toy: {region: north, every: soon}}\n", want: []string{`sources[0].toy.every: Invalid value: "soon": not a duration`}},
		{name: "unknown key", src: "  - {name: play, provider: toy, toy: {region: north, regoin: s}}\n", want: []string{"sources[0].toy.regoin: Forbidden: unknown key"}},
		{
			name: "every problem of every section",
			src:  "  - {name: a, provider: toy, toy: {every: 1s, colour: red}}\n  - {name: b, provider: static, static: {file: x}, toy: {}}\n",
			want: []string{"sources[0].toy.colour: Forbidden: unknown key", "sources[0].toy.every: Invalid value", "sources[0].toy.region: Required value",
				"sources[1].toy: Forbidden: only allowed with provider toy"},
		},
		{name: "only the registered providers", src: "  - {name: a, provider: eks, eks: {}}\n", want: []string{`sources[0].provider: Unsupported value: "eks": supported values: "static", "toy"`, "sources[0].eks: Forbidden: unknown key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseToy(t, tt.src)
			require.Error(t, err)
			assert.Nil(t, cfg)
			assert.Len(t, Errors(err), len(tt.want), "got %v", err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestDeprecationWarnings(t *testing.T) {
	cfg, err := parseToy(t, "  - {name: a, provider: toy, toy: {region: east}}\n  - {name: b, provider: toy, toy: {zone: west}}\n")
	require.NoError(t, err)
	assert.Equal(t, []string{"sources[1].toy.zone is deprecated: use sources[1].toy.region"}, cfg.Warnings)
	assert.Equal(t, "west", cfg.Sources[1].Section.(*toyConfig).Region, "the old key's value is used")

	_, err = parseToy(t, "  - {name: b, provider: toy, toy: {zone: west, every: 1s}}\n")
	require.Error(t, err, "a deprecated key does not hide a problem")
	assert.Equal(t, []string{"sources[0].toy.every"}, paths(err))
}

func mustJSON(t *testing.T, s *Source) string {
	t.Helper()
	b, err := s.MarshalJSON()
	require.NoError(t, err)
	return string(b)
}
