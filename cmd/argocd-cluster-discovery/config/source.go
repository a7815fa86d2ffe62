package config

import (
	"bytes"
	"encoding/json"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Source is one source instance: a name, a provider, and that provider's
// section under the key named after it (static:, eks:, ...).
type Source struct {
	Name     string           `json:"name"`
	Provider sources.Provider `json:"provider"`
	// Interval and Timeout override the inventory defaults; zero means
	// the default (see EffectiveInterval).
	Interval sources.Duration `json:"interval,omitzero"`
	Timeout  sources.Duration `json:"timeout,omitzero"`
	// Trust is empty, or TrustClusterLabels: the tenant and project that
	// the clusters' owners write in labels or tags are taken as written.
	// Without it only a tenant rule that admits a cluster (secrets.tenants,
	// its sources, accounts, resource groups, fleet workspaces or names)
	// makes them count.
	Trust string `json:"trust,omitempty"`
	// Section is the provider's section, decoded by the provider's own
	// configuration type; nil when the provider is unknown or the section
	// is missing.
	Section sources.ProviderConfig `json:"-"`

	// raw is the source as written, decoded in a second pass once the
	// provider is known.
	raw json.RawMessage
	// undecoded: raw is null or not a mapping, which decode reported; Validate
	// has nothing more to say about it.
	undecoded bool
}

// TrustClusterLabels is the value of a source's trust that takes the
// tenant and project its clusters' owners write as written.
const TrustClusterLabels = "clusterLabels"

// UnmarshalJSON keeps the source as written: the first pass of decoding
// does not know the provider yet (see decodeSources).
func (s *Source) UnmarshalJSON(b []byte) error {
	s.raw = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON writes the source as the file does, its section under the
// provider's key.
func (s Source) MarshalJSON() ([]byte, error) {
	m := map[string]any{"name": s.Name, "provider": s.Provider}
	if !s.Interval.IsZero() {
		m["interval"] = s.Interval
	}
	if !s.Timeout.IsZero() {
		m["timeout"] = s.Timeout
	}
	if s.Trust != "" {
		m["trust"] = s.Trust
	}
	if s.Section != nil && s.Provider != "" {
		m[string(s.Provider)] = s.Section
	}
	return json.Marshal(m)
}

// decodeSources decodes each source's keys, then its provider's section
// with the provider's own type. Every problem of the keys is returned,
// each with its full path: unknown keys, a section of another provider,
// and those of the section. A missing or unknown provider and a missing
// section are Validate's.
func (c *Config) decodeSources(reg *sources.Registry) field.ErrorList {
	var errs field.ErrorList
	for i := range c.Sources {
		errs = append(errs, c.Sources[i].decode(field.NewPath("sources").Index(i), reg)...)
	}
	return errs
}

// keepWrittenZeros decodes again, over the defaulted section, the zeros
// its file wrote (see writtenZeros).
func (s *Source) keepWrittenZeros() {
	var keys map[string]json.RawMessage
	if json.Unmarshal(s.raw, &keys) != nil {
		return
	}
	if z, ok := writtenZeros(keys[string(s.Provider)]); ok {
		_ = kjson.UnmarshalCaseSensitivePreserveInts(z, s.Section) // a part of what decoded already
	}
}

func (s *Source) decode(at *field.Path, reg *sources.Registry) field.ErrorList {
	if len(s.raw) == 0 || bytes.Equal(s.raw, []byte("null")) {
		s.undecoded = true
		return field.ErrorList{field.Required(at, "a source needs name, provider and the provider's section")}
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(s.raw, &keys); err != nil {
		s.undecoded = true
		return field.ErrorList{field.Invalid(at, field.OmitValueType{}, "must be a mapping of name, provider and the provider's section")}
	}
	var head struct {
		Name     string           `json:"name"`
		Provider sources.Provider `json:"provider"`
		Interval sources.Duration `json:"interval"`
		Timeout  sources.Duration `json:"timeout"`
		Trust    string           `json:"trust"`
	}
	errs := decodeInto(at, s.raw, &head, false)
	s.Name, s.Provider, s.Interval, s.Timeout, s.Trust = head.Name, head.Provider, head.Interval, head.Timeout, head.Trust
	reg0, known := reg.Lookup(s.Provider)
	for _, k := range sortedKeys(keys) {
		switch {
		case k == "name", k == "provider", k == "interval", k == "timeout", k == "trust", known && k == string(s.Provider):
		case reg.Has(sources.Provider(k)):
			errs = append(errs, field.Forbidden(at.Child(k), "only allowed with provider "+k))
		default:
			errs = append(errs, unknownKey(at.Child(k)))
		}
	}
	if !known {
		return errs
	}
	raw, ok := keys[string(s.Provider)]
	if !ok || bytes.Equal(raw, []byte("null")) {
		return errs // Validate: the section is required
	}
	s.Section = reg0.NewConfig()
	return append(errs, decodeInto(at.Child(string(s.Provider)), raw, s.Section, true)...)
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func providerNames(reg *sources.Registry) string {
	var b bytes.Buffer
	for i, n := range reg.Names() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(n))
	}
	return b.String()
}
