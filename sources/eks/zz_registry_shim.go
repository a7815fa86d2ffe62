package eks

// Temporary: the registration of this provider until its package gives one
// of its own (issue 15). Deleted when the provider's Config implements
// sources.ProviderConfig itself.

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Provider registers the eks provider.
type Provider struct{}

// Name is eks.
func (Provider) Name() sources.Provider { return sources.ProviderEKS }

// Kind is KindCloud.
func (Provider) Kind() sources.Kind { return sources.KindCloud }

// NewConfig returns an empty section.
func (Provider) NewConfig() sources.ProviderConfig { return &shimConfig{} }

type shimConfig struct {
	Config `json:",inline"`
	dir    string
}

func (c *shimConfig) Default()                { c.Config.Default() }
func (c *shimConfig) SetDirectory(dir string) { c.dir = dir }
func (c *shimConfig) Validate(path *field.Path) field.ErrorList {
	cp := c.Config
	err := cp.Validate()
	if err == nil {
		return nil
	}
	var errs field.ErrorList
	for _, line := range strings.Split(err.Error(), "\n") {
		f, msg, _ := strings.Cut(line, ":")
		errs = append(errs, field.Invalid(path.Child(f), field.OmitValueType{}, strings.TrimSpace(msg)))
	}
	return errs
}
func (c *shimConfig) NewSource(o sources.SourceOptions) (sources.Source, error) {
	return New(o.Name, c.Config, Options{Logger: o.Logger, Registerer: o.Registerer})
}
