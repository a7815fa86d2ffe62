package generator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// The keys accepted in input.parameters.
const (
	ParamSource        = "source"
	ParamProvider      = "provider"
	ParamTenant        = "tenant"
	ParamRegion        = "region"
	ParamLabelSelector = "labelSelector"
	ParamNameRegex     = "nameRegex"
)

// acceptedParams is sorted, for error messages.
var acceptedParams = []string{ParamLabelSelector, ParamNameRegex, ParamProvider, ParamRegion, ParamSource, ParamTenant}

// Filter selects clusters. Each set field must match (AND); a list field
// matches when any of its values equals the cluster's (OR). A nil field
// matches everything. Values are compared exactly: tenant "" selects
// clusters without a tenant, it does not widen the selection.
type Filter struct {
	Sources   []string
	Providers []string
	Tenants   []string
	Regions   []string
	// Selector is a Kubernetes label selector over the cluster's labels.
	Selector labels.Selector
	// NameRegex must match the cluster name (RE2, unanchored).
	NameRegex *regexp.Regexp

	key string
}

// ParseParameters turns input.parameters into a Filter. providers are the
// known provider names, in the order the message of an unknown one lists
// them. Unknown keys (also those differing only in case from a known one),
// unknown providers, values of the wrong type, null in a list and strings
// that are not valid UTF-8 or hold an escape of a lone UTF-16 surrogate are
// errors: a typo must never widen the result. Duplicate keys cannot be seen
// in a map; ParseRequest and ParseInput reject them before.
func ParseParameters(params map[string]json.RawMessage, providers []sources.Provider) (Filter, error) {
	var f Filter
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if err := f.set(k, params[k], providers); err != nil {
			return Filter{}, err
		}
	}
	f.key = f.canonicalKey()
	return f, nil
}

// set parses raw, the value of the parameter k, into f.
func (f *Filter) set(k string, raw json.RawMessage, providers []sources.Provider) error {
	if !utf8.Valid(raw) {
		return inputErrorf("input.parameters.%s: not valid UTF-8", shortKey(k))
	}
	if !validEscapes(raw) {
		return inputErrorf("input.parameters.%s: a string has an escape that is not valid UTF-16 (a lone surrogate such as \\ud800)", shortKey(k))
	}
	var err error
	switch k {
	case ParamSource:
		f.Sources, err = stringOrList(k, raw)
	case ParamProvider:
		f.Providers, err = providerParam(k, raw, providers)
	case ParamTenant:
		f.Tenants, err = stringOrList(k, raw)
	case ParamRegion:
		f.Regions, err = stringOrList(k, raw)
	case ParamLabelSelector:
		f.Selector, err = compiledParam(k, raw, "label selector", func(s string) (labels.Selector, error) { return labels.Parse(s) })
	case ParamNameRegex:
		f.NameRegex, err = compiledParam(k, raw, "regular expression", regexp.Compile)
	default:
		err = unknownParam(k)
	}
	return err
}

// canonicalKey is a canonical form of the filter: equal filters written
// differently share one cached response.
func (f *Filter) canonicalKey() string {
	var b strings.Builder
	for _, part := range []struct {
		name string
		vals []string
	}{{ParamSource, f.Sources}, {ParamProvider, f.Providers}, {ParamTenant, f.Tenants}, {ParamRegion, f.Regions}} {
		if part.vals != nil {
			fmt.Fprintf(&b, "%s=%q;", part.name, part.vals)
		}
	}
	if f.Selector != nil {
		fmt.Fprintf(&b, "%s=%q;", ParamLabelSelector, f.Selector.String())
	}
	if f.NameRegex != nil {
		fmt.Fprintf(&b, "%s=%q;", ParamNameRegex, f.NameRegex.String())
	}
	return b.String()
}

// providerParam is stringOrList for provider names: each must be one of
// providers.
func providerParam(k string, raw json.RawMessage, providers []sources.Provider) ([]string, error) {
	list, err := stringOrList(k, raw)
	if err != nil {
		return nil, err
	}
	for _, p := range list {
		if !slices.Contains(providers, sources.Provider(p)) {
			return nil, inputErrorf("input.parameters.%s: unknown provider %q (accepted: %s)", k, p, joinProviders(providers))
		}
	}
	return list, nil
}

// compiledParam reads the string parameter k and compiles it; what names
// the kind of string in the error.
func compiledParam[T any](k string, raw json.RawMessage, what string, compile func(string) (T, error)) (T, error) {
	var zero T
	s, err := stringParam(k, raw)
	if err != nil {
		return zero, err
	}
	v, err := compile(s)
	if err != nil {
		return zero, inputErrorf("input.parameters.%s: invalid %s: %v", k, what, err)
	}
	return v, nil
}

func unknownParam(k string) error {
	for _, known := range acceptedParams {
		if strings.EqualFold(k, known) {
			return inputErrorf("input.parameters: key %s differs from %q only in case; keys are case-sensitive", quoteKey(k), known)
		}
	}
	return inputErrorf("input.parameters: unknown key %s (accepted keys: %s)", quoteKey(k), strings.Join(acceptedParams, ", "))
}

func stringParam(k string, raw json.RawMessage) (string, error) {
	var s string
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) || json.Unmarshal(raw, &s) != nil {
		return "", inputErrorf("input.parameters.%s: must be a string, got %s", k, jsonKind(raw))
	}
	return s, nil
}

// stringOrList accepts "a" or ["a", "b"] and returns the sorted, deduplicated
// values.
func stringOrList(k string, raw json.RawMessage) ([]string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return []string{s}, nil
	}
	var items []*string
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) && json.Unmarshal(raw, &items) == nil {
		if len(items) == 0 {
			return nil, inputErrorf("input.parameters.%s: empty list would match nothing; remove the key to match everything", k)
		}
		list := make([]string, len(items))
		for i, item := range items {
			if item == nil {
				return nil, inputErrorf("input.parameters.%s[%d]: null is not allowed in a list", k, i)
			}
			list[i] = *item
		}
		sort.Strings(list)
		return slices.Compact(list), nil
	}
	return nil, inputErrorf("input.parameters.%s: must be a string or a list of strings, got %s", k, jsonKind(raw))
}

func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list with non-string values"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func joinProviders(providers []sources.Provider) string {
	ps := make([]string, len(providers))
	for i, p := range providers {
		ps[i] = string(p)
	}
	return strings.Join(ps, ", ")
}

// Key is a canonical string for the filter; equal filters have equal keys.
func (f *Filter) Key() string { return f.key }

// Match reports whether the cluster passes every set field.
func (f *Filter) Match(c *sources.Cluster) bool {
	return in(f.Sources, c.Source) && in(f.Providers, string(c.Provider)) &&
		in(f.Tenants, c.Tenant) && in(f.Regions, c.Region) &&
		(f.Selector == nil || f.Selector.Matches(labels.Set(c.Labels))) &&
		(f.NameRegex == nil || f.NameRegex.MatchString(c.Name))
}

// MaySelect reports whether a cluster of the named source could pass the
// filter; used to decide which sources must have synced before answering.
func (f *Filter) MaySelect(source string, provider sources.Provider) bool {
	return in(f.Sources, source) && in(f.Providers, string(provider))
}

func in(list []string, v string) bool {
	if list == nil {
		return true
	}
	_, found := slices.BinarySearch(list, v)
	return found
}
