package azurearm

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// SkipReason says why a listed cluster is left out; it is the reason
// label of the skipped-clusters metric. A provider adds its own.
type SkipReason string

// The skip reasons of Selector.Skip.
const (
	SkipResourceGroup SkipReason = "resource_group"
	SkipTags          SkipReason = "tags"
)

// Selector applies a validated Selection to the clusters a listing maps:
// the resource group and tag filters, the tags copied to labels and the
// scope tags. It holds no state between listings.
type Selector struct {
	sel        Selection
	rgs        map[string]bool
	labelTags  map[string]bool // nil: every tag
	ignoreTags map[string]bool
	log        *slog.Logger
}

// NewSelector returns the selector of sel; log gets the tags dropped
// from the labels, at debug level.
func NewSelector(sel Selection, log *slog.Logger) *Selector {
	return &Selector{
		sel: sel, log: log,
		rgs:        lowerSet(sel.ResourceGroups),
		labelTags:  lowerSet(sel.LabelTags),
		ignoreTags: lowerSet(sel.IgnoreTags),
	}
}

func lowerSet(list []string) map[string]bool {
	if len(list) == 0 {
		return nil
	}
	out := make(map[string]bool, len(list))
	for _, s := range list {
		out[strings.ToLower(strings.TrimSpace(s))] = true
	}
	return out
}

// Skip returns why the resource group and tag filters leave a cluster of
// resource group rg with these tags out, and a detail for the debug log;
// "" keeps it.
func (s *Selector) Skip(rg string, tags map[string]string) (SkipReason, string) {
	switch {
	case s.rgs != nil && !s.rgs[strings.ToLower(rg)]:
		return SkipResourceGroup, rg
	case !matchAll(tags, s.sel.IncludeTags):
		return SkipTags, "a tag of includeTags is missing"
	case matchAny(tags, s.sel.ExcludeTags):
		return SkipTags, "a tag of excludeTags is present"
	}
	return "", ""
}

// Labels turns the allowed tags into labels. A tag whose key or value
// cannot be made a valid label is dropped with a debug log naming the
// cluster (key only: tag values are not logged). Keys already valid win
// over sanitized ones.
func (s *Selector) Labels(tags map[string]string, cluster string) map[string]string {
	out := make(map[string]string, len(tags)+4)
	keys := slices.Sorted(maps.Keys(tags))
	// Two passes: valid keys first, so that a sanitized key never
	// replaces a tag that was already a valid label.
	for _, pass := range []bool{true, false} {
		for _, k := range keys {
			lk := strings.ToLower(k)
			if s.ignoreTags[lk] || (s.labelTags != nil && !s.labelTags[lk]) {
				continue
			}
			valid := len(validation.IsQualifiedName(k)) == 0
			if valid != pass {
				continue
			}
			key, ok := sanitizeLabelKey(k)
			if !ok {
				s.log.Debug("tag dropped: key cannot be a label key", "cluster", cluster, "tag", k)
				continue
			}
			if _, taken := out[key]; taken {
				s.log.Debug("tag dropped: its label key is taken by another tag", "cluster", cluster, "tag", k, "label", key)
				continue
			}
			val, ok := SanitizeLabelValue(tags[k])
			if !ok {
				s.log.Debug("tag dropped: value cannot be a label value", "cluster", cluster, "tag", k)
				continue
			}
			out[key] = val
		}
	}
	return out
}

// sanitizeLabelKey makes k a label name as the EKS source does: characters
// other than ASCII letters, digits, '-', '_' and '.' become '-', and the
// ends are trimmed to a letter or digit. Azure tag keys cannot hold '/', so
// there is never a prefix. Keys longer than 63 characters are dropped
// rather than truncated, which could make two tags one label.
func sanitizeLabelKey(k string) (string, bool) {
	s := sanitize(k)
	return s, s != "" && len(validation.IsQualifiedName(s)) == 0
}

// SanitizeLabelValue makes v a label value as sanitizeLabelKey makes a
// label name; a value may be empty. false: v cannot be one (a value with
// nothing left, or longer than 63 characters).
func SanitizeLabelValue(v string) (string, bool) {
	s := sanitize(v)
	if v != "" && s == "" {
		return "", false
	}
	return s, len(validation.IsValidLabelValue(s)) == 0
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.TrimFunc(b.String(), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
}

// Scope sets Tenant, Project and Namespaces from the scope tags and
// returns a reason when a present tag is invalid: a scope that cannot be
// read must not become "everything" (empty namespaces mean all of them).
func (s *Selector) Scope(c *sources.Cluster, tags map[string]string) string {
	var tenant, project string
	var namespaces []string
	if v, ok := TagValue(tags, s.sel.TenantTag); ok {
		tenant = strings.TrimSpace(v)
	}
	if v, ok := TagValue(tags, s.sel.ProjectTag); ok {
		project = strings.TrimSpace(v)
		if errs := validation.IsDNS1123Subdomain(project); len(errs) > 0 {
			return fmt.Sprintf("tag %s is not a valid AppProject name", s.sel.ProjectTag)
		}
	}
	if v, ok := TagValue(tags, s.sel.NamespacesTag); ok {
		fields := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' })
		if len(fields) == 0 {
			return fmt.Sprintf("tag %s names no namespace", s.sel.NamespacesTag)
		}
		for _, ns := range fields {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return fmt.Sprintf("tag %s holds %q, not a namespace name", s.sel.NamespacesTag, ns)
			}
			if !slices.Contains(namespaces, ns) {
				namespaces = append(namespaces, ns)
			}
		}
	}
	c.Tenant, c.Project, c.Namespaces = tenant, project, namespaces
	c.TenantFromOwner, c.ProjectFromOwner = tenant != "", project != ""
	return ""
}

// TagValue looks a tag up the way Azure does: keys are case-insensitive
// (an exact key first, else the first in sorted order).
func TagValue(tags map[string]string, key string) (string, bool) {
	if v, ok := tags[key]; ok {
		return v, true
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if strings.EqualFold(k, key) {
			return tags[k], true
		}
	}
	return "", false
}

func tagMatches(tags map[string]string, key, want string) bool {
	v, ok := TagValue(tags, key)
	return ok && (want == "*" || v == want)
}

func matchAll(tags, want map[string]string) bool {
	for k, v := range want {
		if !tagMatches(tags, k, v) {
			return false
		}
	}
	return true
}

func matchAny(tags, want map[string]string) bool {
	for k, v := range want {
		if tagMatches(tags, k, v) {
			return true
		}
	}
	return false
}

// DerefTags returns an ARM resource's tags as plain strings (a nil value
// is empty).
func DerefTags(in map[string]*string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = Deref(v)
	}
	return out
}

// Deref returns *p, or the zero value for nil: the SDK's models hold
// every field as a pointer.
func Deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
