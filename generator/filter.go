package generator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// InputError is a request whose input cannot be used; it becomes a 400.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

// request is the body Argo CD's plugin generator sends.
type request struct {
	ApplicationSetName string `json:"applicationSetName"`
	Input              *struct {
		Parameters map[string]json.RawMessage `json:"parameters"`
	} `json:"input"`
}

// parseRequest decodes a getparams body into a Filter (see ParseRequest,
// which also returns the ignored top-level keys). Every error is an
// *InputError.
func parseRequest(body []byte) (Filter, string, error) {
	req, err := ParseRequest(body)
	return req.Filter, req.ApplicationSetName, err
}

// ParseParameters turns input.parameters into a Filter. Unknown keys (also
// those differing only in case from a known one), values of the wrong type,
// null in a list and strings that are not valid UTF-8 or hold an escape of a
// lone UTF-16 surrogate are errors: a typo must never widen the result.
// Duplicate keys cannot be seen in a map; ParseRequest and ParseInput reject
// them before.
func ParseParameters(params map[string]json.RawMessage) (Filter, error) {
	var f Filter
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var selector, nameRegex string
	var hasSelector, hasRegex bool
	for _, k := range keys {
		raw := params[k]
		var err error
		if !utf8.Valid(raw) {
			return Filter{}, inputErrorf("input.parameters.%s: not valid UTF-8", shortKey(k))
		}
		if !validEscapes(raw) {
			return Filter{}, inputErrorf("input.parameters.%s: a string has an escape that is not valid UTF-16 (a lone surrogate such as \\ud800)", shortKey(k))
		}
		switch k {
		case ParamSource:
			f.Sources, err = stringOrList(k, raw)
		case ParamProvider:
			f.Providers, err = stringOrList(k, raw)
			for _, p := range f.Providers {
				if err == nil && !sources.Provider(p).Valid() {
					err = inputErrorf("input.parameters.%s: unknown provider %q (accepted: %s)", k, p, providerList())
				}
			}
		case ParamTenant:
			f.Tenants, err = stringOrList(k, raw)
		case ParamRegion:
			f.Regions, err = stringOrList(k, raw)
		case ParamLabelSelector:
			selector, err = stringParam(k, raw)
			hasSelector = true
			if err == nil {
				f.Selector, err = labels.Parse(selector)
				if err != nil {
					err = inputErrorf("input.parameters.%s: invalid label selector: %v", k, err)
				}
			}
		case ParamNameRegex:
			nameRegex, err = stringParam(k, raw)
			hasRegex = true
			if err == nil {
				f.NameRegex, err = regexp.Compile(nameRegex)
				if err != nil {
					err = inputErrorf("input.parameters.%s: invalid regular expression: %v", k, err)
				}
			}
		default:
			err = inputErrorf("input.parameters: unknown key %s (accepted keys: %s)", quoteKey(k), strings.Join(acceptedParams, ", "))
			for _, known := range acceptedParams {
				if strings.EqualFold(k, known) {
					err = inputErrorf("input.parameters: key %s differs from %q only in case; keys are case-sensitive", quoteKey(k), known)
				}
			}
		}
		if err != nil {
			return Filter{}, err
		}
	}
	// The key is a canonical form of the filter: equal filters written
	// differently share one cached response.
	var b strings.Builder
	for _, part := range []struct {
		name string
		vals []string
	}{{ParamSource, f.Sources}, {ParamProvider, f.Providers}, {ParamTenant, f.Tenants}, {ParamRegion, f.Regions}} {
		if part.vals != nil {
			fmt.Fprintf(&b, "%s=%q;", part.name, part.vals)
		}
	}
	if hasSelector {
		fmt.Fprintf(&b, "%s=%q;", ParamLabelSelector, f.Selector.String())
	}
	if hasRegex {
		fmt.Fprintf(&b, "%s=%q;", ParamNameRegex, nameRegex)
	}
	f.key = b.String()
	return f, nil
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

// jsonErrorText keeps decoder errors short and free of request content.
// prefix is the path of the decoded value in a body ("" for the body).
func jsonErrorText(err error, prefix string) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		field := te.Field
		if prefix != "" {
			field = prefix + "." + field
		}
		if field == "input" || field == "input.parameters" {
			return fmt.Sprintf("%s must be an object, got JSON %s", field, te.Value)
		}
		return fmt.Sprintf("field %q has the wrong type (got JSON %s)", field, te.Value)
	}
	return "invalid JSON"
}

func providerList() string {
	var ps []string
	for _, p := range sources.Providers() {
		ps = append(ps, string(p))
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
