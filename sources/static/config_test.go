package static

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestRegistration checks what the service sees of the provider: its
// name and kind, the section NewConfig returns, SetDirectory and the
// paths Validate reports errors at.
func TestRegistration(t *testing.T) {
	var p Provider
	assert.Equal(t, sources.ProviderStatic, p.Name())
	assert.Equal(t, sources.KindFile, p.Kind())
	cfg, ok := p.NewConfig().(*Config)
	require.True(t, ok, "NewConfig must return a *Config")
	assert.Equal(t, &Config{}, cfg)

	dir := t.TempDir()
	rel := &Config{File: filepath.Join("sub", "clusters.yaml")}
	rel.SetDirectory(dir)
	assert.Equal(t, filepath.Join(dir, "sub", "clusters.yaml"), rel.File, "a relative file is made absolute against dir")
	abs := &Config{File: "/etc/clusters.yaml"}
	abs.SetDirectory(dir)
	assert.Equal(t, "/etc/clusters.yaml", abs.File, "an absolute file is left alone")
	empty := &Config{}
	empty.SetDirectory(dir)
	assert.Empty(t, empty.File, "no file stays no file")

	path := field.NewPath("sources").Index(0).Child("static")
	tests := []struct {
		name string
		cfg  Config
		want []string // the fields of the errors, in order; nil means valid
		typ  field.ErrorType
	}{
		{name: "file only", cfg: Config{File: "/etc/clusters.yaml"}},
		{name: "inline only", cfg: Config{Clusters: []Cluster{{Name: "a", Server: "https://a.example.com"}}}},
		{name: "neither file nor clusters", cfg: Config{}, want: []string{"sources[0].static"}, typ: field.ErrorTypeRequired},
		{name: "bad server", cfg: Config{Clusters: []Cluster{{Name: "a", Server: "a.example.com"}}}, want: []string{"sources[0].static.clusters[0].server"}, typ: field.ErrorTypeInvalid},
		{
			name: "duplicate name",
			cfg:  Config{Clusters: []Cluster{{Name: "a", Server: "https://a.example.com"}, {Name: "a", Server: "https://a2.example.com"}}},
			want: []string{"sources[0].static.clusters[1].name"},
			typ:  field.ErrorTypeInvalid,
		},
		{
			name: "duplicate server",
			cfg: Config{Clusters: []Cluster{
				{Name: "a", Server: "https://a.example.com"}, {Name: "b", Server: "https://b.example.com"}, {Name: "c", Server: "https://A.example.com:443/"},
			}},
			want: []string{"sources[0].static.clusters[2].server"},
			typ:  field.ErrorTypeInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.cfg.Validate(path)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
				assert.Equal(t, tt.typ, e.Type, e.Error())
			}
			assert.Equal(t, tt.want, got, errs.ToAggregate())
		})
	}
}
