package aro

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// labels turns the allowed tags into labels, as the aks provider does. A
// tag whose key or value cannot be made a valid label is dropped with a
// debug log (key only: tag values are not logged). Keys already valid win
// over sanitized ones.
func (m *mapper) labels(tags map[string]string, cluster string) map[string]string {
	out := make(map[string]string, len(tags)+4)
	keys := sortedKeys(tags)
	// Two passes: valid keys first, so that a sanitized key never
	// replaces a tag that was already a valid label.
	for _, pass := range []bool{true, false} {
		for _, k := range keys {
			lk := strings.ToLower(k)
			if m.ignoreTags[lk] || (m.labelTags != nil && !m.labelTags[lk]) {
				continue
			}
			valid := len(validation.IsQualifiedName(k)) == 0
			if valid != pass {
				continue
			}
			key, ok := sanitizeLabelKey(k)
			if !ok {
				m.log.Debug("tag dropped: key cannot be a label key", "cluster", cluster, "tag", k)
				continue
			}
			if _, taken := out[key]; taken {
				m.log.Debug("tag dropped: its label key is taken by another tag", "cluster", cluster, "tag", k, "label", key)
				continue
			}
			val, ok := sanitizeLabelValue(tags[k])
			if !ok {
				m.log.Debug("tag dropped: value cannot be a label value", "cluster", cluster, "tag", k)
				continue
			}
			out[key] = val
		}
	}
	return out
}

// sanitizeLabelKey makes k a label name: characters other than ASCII
// letters, digits, '-', '_' and '.' become '-', and the ends are trimmed
// to a letter or digit. Azure tag keys cannot hold '/', so there is never
// a prefix. Keys longer than 63 characters are dropped rather than
// truncated, which could make two tags one label.
func sanitizeLabelKey(k string) (string, bool) {
	s := sanitize(k)
	return s, s != "" && len(validation.IsQualifiedName(s)) == 0
}

// sanitizeLabelValue is sanitizeLabelKey for values, which may be empty.
func sanitizeLabelValue(v string) (string, bool) {
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

// scope sets Tenant, Project and Namespaces from the tags and returns a
// reason when a present tag is invalid: a scope that cannot be read must
// not become "everything" (empty namespaces mean all of them).
func (m *mapper) scope(c *sources.Cluster, tags map[string]string) string {
	var tenant, project string
	var namespaces []string
	if v, ok := tagValue(tags, m.cfg.TenantTag); ok {
		tenant = strings.TrimSpace(v)
	}
	if v, ok := tagValue(tags, m.cfg.ProjectTag); ok {
		project = strings.TrimSpace(v)
		if errs := validation.IsDNS1123Subdomain(project); len(errs) > 0 {
			return fmt.Sprintf("tag %s is not a valid AppProject name", m.cfg.ProjectTag)
		}
	}
	if v, ok := tagValue(tags, m.cfg.NamespacesTag); ok {
		fields := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' })
		if len(fields) == 0 {
			return fmt.Sprintf("tag %s names no namespace", m.cfg.NamespacesTag)
		}
		for _, ns := range fields {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return fmt.Sprintf("tag %s holds %q, not a namespace name", m.cfg.NamespacesTag, ns)
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

// tagValue looks a tag up the way Azure does: keys are case-insensitive.
func tagValue(tags map[string]string, key string) (string, bool) {
	if v, ok := tags[key]; ok {
		return v, true
	}
	for _, k := range sortedKeys(tags) {
		if strings.EqualFold(k, key) {
			return tags[k], true
		}
	}
	return "", false
}

func tagMatches(tags map[string]string, key, want string) bool {
	v, ok := tagValue(tags, key)
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
