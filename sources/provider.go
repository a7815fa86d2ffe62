package sources

import (
	"fmt"
	"log/slog"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Registration is what a provider package gives the service: one value,
// listed once in the command's registry. Everything else about a provider
// (its configuration section, its validation, how its listings rank when a
// cluster is found twice) follows from it; sources/README.md has the
// checklist for adding one.
type Registration interface {
	// Name is the provider's name: the value of a source's provider key,
	// the key of its configuration section, and Cluster.Provider.
	Name() Provider
	// Kind says what the provider's upstream is to a cluster, which decides
	// the listing kept when one cluster is found through two sources.
	Kind() Kind
	// NewConfig returns an empty configuration section for the file to be
	// decoded into.
	NewConfig() ProviderConfig
}

// ProviderConfig is a provider's section of one source, decoded from the
// configuration file. The service calls Default, then SetDirectory, then
// Validate, and builds the source only when no section has an error.
type ProviderConfig interface {
	// Default fills every unset field with its default. It is the only
	// place the provider's defaults are written. A deprecated key is moved
	// to its replacement here (see Deprecations).
	Default()
	// SetDirectory makes the section's relative file paths relative to
	// dir, the configuration file's directory.
	SetDirectory(dir string)
	// Validate returns every problem of the section at once, each with its
	// full path under path (the section's own, e.g. sources[2].eks). It
	// does not change the section.
	Validate(path *field.Path) field.ErrorList
	// NewSource builds the source of a valid section.
	NewSource(opts SourceOptions) (Source, error)
}

// Schema is implemented by a registration that ships the JSON schema of
// its configuration section: the chart's values schema for a source's
// section is generated from it (cmd/chartgen), so a new provider needs no
// edit of the chart.
type Schema interface {
	// ConfigSchema returns the section's JSON schema (draft 7, the
	// dialect of the chart's values.schema.json).
	ConfigSchema() []byte
}

// Deprecations is implemented by a section that accepts old key names: it
// returns one warning per old key the file used, with its full path.
type Deprecations interface {
	Deprecations(path *field.Path) []string
}

// SourceOptions is what every source is built with.
type SourceOptions struct {
	// Name is the source instance's name (sources[].name).
	Name string
	// Logger already carries the source's name.
	Logger *slog.Logger
	// Registerer already adds the constant label source=<Name>; nil means
	// metrics are not registered.
	Registerer prometheus.Registerer
	// OwnerID identifies this deployment (secrets.ownerID), for what a
	// source creates upstream on its behalf (per-cluster tokens), so that
	// it finds them again after a restart and never touches another
	// deployment's.
	OwnerID string
	// TokenBindings finds the token Secrets operators bind to clusters
	// (see BoundToken); nil when the service has no Kubernetes API, and a
	// source that needs it then fails its listings.
	TokenBindings TokenBindings
	// Agents reads the agents' cluster Secrets (see AgentIndex); nil when
	// the service has no Kubernetes API.
	Agents Agents
}

// ThroughAgents is implemented by a provider section that can serve its
// clusters through the Argo CD agent (auth agent): the service writes no
// Secret for them, and a hub that mixes them with the Secrets it writes
// needs Argo CD 3.4 or later (see AnnotationSkipReconcile).
type ThroughAgents interface {
	// ThroughAgents reports whether the section's clusters are served
	// through agents.
	ThroughAgents() bool
}

// OwnerChosenServers is implemented by a provider section whose clusters'
// owners may choose their servers (Rancher's authorized cluster endpoint,
// an ARO cluster's custom domain): each such cluster gets a token of its
// own, so no credentials override (secrets.credentials), which would
// send one credential to every server, applies to the section.
type OwnerChosenServers interface {
	// OwnerChoosesServers reports whether a cluster's owner may choose
	// its server under the section's settings.
	OwnerChoosesServers() bool
}

// Kind is what a provider's upstream is to the clusters it lists.
type Kind string

// The kinds, in the order dedupe ranks them when inventory.prefer is cloud.
const (
	// KindCloud: the cloud the cluster runs in (EKS, AKS).
	KindCloud Kind = "cloud"
	// KindManager: a cluster manager that lists clusters running elsewhere
	// (Rancher).
	KindManager Kind = "manager"
	// KindFile: clusters written by hand (static).
	KindFile Kind = "file"
)

// Registry maps provider names to their registrations.
type Registry struct {
	byName map[Provider]Registration
}

// NewRegistry returns a registry of the given providers; it panics on a
// duplicate or empty name, a programming error of the command's one list.
func NewRegistry(regs ...Registration) *Registry {
	r := &Registry{byName: make(map[Provider]Registration, len(regs))}
	for _, reg := range regs {
		name := reg.Name()
		if name == "" {
			panic("sources: a provider registration has no name")
		}
		if _, dup := r.byName[name]; dup {
			panic(fmt.Sprintf("sources: provider %q registered twice", name))
		}
		r.byName[name] = reg
	}
	return r
}

// Lookup returns the registration of name.
func (r *Registry) Lookup(name Provider) (Registration, bool) {
	reg, ok := r.byName[name]
	return reg, ok
}

// Names returns every registered provider name, sorted.
func (r *Registry) Names() []Provider {
	names := make([]Provider, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// Has reports whether name is registered.
func (r *Registry) Has(name Provider) bool { _, ok := r.byName[name]; return ok }
