package static

import (
	"errors"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Provider registers the static provider: clusters written by hand, so
// its listings rank after a cloud's or a manager's as the inventory's
// prefer setting says.
type Provider struct{}

// Name is static.
func (Provider) Name() sources.Provider { return sources.ProviderStatic }

// Kind is file.
func (Provider) Kind() sources.Kind { return sources.KindFile }

// NewConfig returns an empty static section.
func (Provider) NewConfig() sources.ProviderConfig { return &Config{} }

// Default does nothing: the static section has no defaults.
func (c *Config) Default() {}

// SetDirectory makes a relative File, and the relative bearerToken.file
// of an inline cluster, relative to dir. A file's clusters take theirs
// from the file's own directory.
func (c *Config) SetDirectory(dir string) {
	if c.File != "" && !filepath.IsAbs(c.File) {
		c.File = filepath.Join(dir, c.File)
	}
	for i := range c.Clusters {
		c.Clusters[i].Auth.BearerToken = inDir(c.Clusters[i].Auth.BearerToken, dir)
	}
}

// Validate checks the section and its inline clusters. The clusters of
// File are checked when the source is built, and at every listing.
func (c *Config) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.File == "" && len(c.Clusters) == 0 {
		errs = append(errs, field.Required(path, "set file or clusters"))
	}
	seen, servers := make(map[string]int, len(c.Clusters)), make(map[string]int, len(c.Clusters))
	list := path.Child("clusters")
	for i, sc := range c.Clusters {
		at := list.Index(i)
		if j, dup := seen[sc.Name]; dup && sc.Name != "" {
			errs = append(errs, field.Invalid(at.Child("name"), sc.Name, "already used by "+list.Index(j).String()))
			continue
		}
		seen[sc.Name] = i
		cl, err := toCluster(sc)
		if err != nil {
			var ce *clusterError
			if errors.As(err, &ce) {
				errs = append(errs, field.Invalid(at.Child(ce.field), field.OmitValueType{}, ce.detail))
			} else {
				errs = append(errs, field.Invalid(at, field.OmitValueType{}, err.Error()))
			}
			continue
		}
		if j, dup := servers[sources.ServerKey(cl.Server)]; dup {
			errs = append(errs, field.Invalid(at.Child("server"), cl.Server, "already the server of "+list.Index(j).String()))
			continue
		}
		servers[sources.ServerKey(cl.Server)] = i
	}
	return errs
}

// NewSource builds the source; the file, when set, is read once.
func (c *Config) NewSource(sources.SourceOptions) (sources.Source, error) { return New(*c, "") }
