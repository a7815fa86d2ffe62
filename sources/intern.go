package sources

import (
	"encoding/binary"
	"slices"
)

// Interner keeps one copy of each distinct string and of each distinct
// label or annotation set among the clusters it is given. A decoder gives
// every cluster its own copy of every string and its own maps, but the
// clusters of a fleet share most of them: tenants, projects, regions,
// versions, label keys and values (~3 MiB at 10,000 clusters), and label
// sets (a map of a few entries takes ~300 bytes: ~6 MiB for the labels and
// annotations of 10,000 clusters when each has its own). CAs need no
// interning: equal CAs share one bundle already (see CA).
//
// An Interner is not safe for concurrent use, and it keeps every string
// and map it was given until Reset: a long-lived one must be reset when it
// holds more than its clusters use.
type Interner struct {
	strs map[string]string
	// maps holds the shared maps by their content (see mapKey).
	maps map[string]map[string]string
	key  []byte // scratch for mapKey
}

// NewInterner returns an empty Interner.
func NewInterner() *Interner {
	in := &Interner{}
	in.Reset()
	return in
}

// Reset forgets every string and map the interner holds. What it returned
// before stays valid: the clusters holding them keep them.
func (in *Interner) Reset() {
	in.strs, in.maps = map[string]string{}, map[string]map[string]string{}
}

// Len is the number of distinct strings and maps the interner holds.
func (in *Interner) Len() int { return len(in.strs) + len(in.maps) }

// String replaces *s with the copy of its content the interner holds, or
// keeps it as that copy.
func (in *Interner) String(s *string) {
	if shared, ok := in.strs[*s]; ok {
		*s = shared
	} else {
		in.strs[*s] = *s
	}
}

// Map returns a map equal to m with shared keys and values: the one
// already returned for that content, else a new one; m itself is not
// modified. Clusters share the maps returned, which nobody modifies (see
// Source).
func (in *Interner) Map(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	in.key = mapKey(in.key[:0], m)
	if shared, ok := in.maps[string(in.key)]; ok { // no allocation for the lookup
		return shared
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		in.String(&k)
		in.String(&v)
		out[k] = v
	}
	in.maps[string(in.key)] = out
	return out
}

// mapKey appends to b an encoding of m's content that two maps share only
// when they are equal: the entries sorted by key, each string preceded by
// its length.
func mapKey(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(m[k])))
		b = append(b, m[k]...)
	}
	return b
}

// Cluster shares the strings and maps of c that clusters commonly have in
// common (not names and servers, which are unique). An AWS cluster name
// equal to the cluster's name, as it usually is, shares the name. c must
// not be shared yet: its fields are replaced in place.
func (in *Interner) Cluster(c *Cluster) {
	for _, s := range []*string{&c.Source, &c.Region, &c.Account, &c.Tenant, &c.Project, &c.KubernetesVersion, &c.State} {
		in.String(s)
	}
	c.Labels, c.Annotations = in.Map(c.Labels), in.Map(c.Annotations)
	if a := c.Auth.AWS; a != nil {
		if a.ClusterName == c.Name {
			a.ClusterName = c.Name
		}
		in.String(&a.RoleARN)
		in.String(&a.Region)
	}
}
