package sources

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestInternMaps checks that equal maps are shared, that a map is never
// shared with one that differs from it, even where joining keys and
// values would make them look alike, and that nil stays nil and empty
// stays empty.
func TestInternMaps(t *testing.T) {
	in := NewInterner()
	tests := []struct {
		name string
		m    map[string]string
		// like is the index of the earlier map it must be shared with, -1
		// for none.
		like int
	}{
		{name: "first", m: map[string]string{"env": "prod", "tier": "gold"}, like: -1},
		{name: "equal", m: map[string]string{"tier": "gold", "env": "prod"}, like: 0},
		{name: "other value", m: map[string]string{"env": "prod", "tier": "silver"}, like: -1},
		{name: "subset", m: map[string]string{"env": "prod"}, like: -1},
		{name: "key and value joined differently", m: map[string]string{"envp": "rod", "tier": "gold"}, like: -1},
		{name: "empty", m: map[string]string{}, like: -1},
		{name: "empty again", m: map[string]string{}, like: 5},
		{name: "empty key and value", m: map[string]string{"": ""}, like: -1},
	}
	var got []map[string]string
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := in.Map(tt.m)
			got = append(got, m)
			assert.Equal(t, tt.m, m)
			assert.NotNil(t, m)
			for j := range i {
				same := reflect.ValueOf(m).UnsafePointer() == reflect.ValueOf(got[j]).UnsafePointer()
				assert.Equal(t, j == tt.like, same, "shared with map %d", j)
			}
		})
	}
	assert.Nil(t, in.Map(nil))
}

// TestInternCluster checks which fields of a cluster are shared with the
// clusters interned before it: the strings fleets have in common and the
// label and annotation sets, never the name or the server; and that after
// Reset nothing is shared with what came before, which stays intact.
func TestInternCluster(t *testing.T) {
	// mk builds a cluster with its own copy of every string, as a decoder does.
	mk := func(name, tenant string) *Cluster {
		own := func(s string) string { return string(append([]byte(nil), s...)) }
		return &Cluster{Source: own("rancher"), Name: own(name), Server: own("https://" + name), Tenant: own(tenant),
			Region: own("eu-west-1"), Project: own(tenant), KubernetesVersion: own("v1.31.4"), State: own("active"),
			Labels: map[string]string{own("env"): own("prod")}, Annotations: map[string]string{own("team"): own(tenant)},
			Auth: Auth{AWS: &AWSAuth{ClusterName: own(name), RoleARN: own("arn:aws:iam::1:role/r"), Region: own("eu-west-1")}}}
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	sameMap := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	in := NewInterner()
	a, b, c := mk("a", "acme"), mk("b", "acme"), mk("c", "globex")
	want := *mk("b", "acme")
	in.Cluster(a)
	in.Cluster(b)
	in.Cluster(c)
	assert.Equal(t, want.Labels, b.Labels, "interning changes no content")
	assert.Equal(t, want.Annotations, b.Annotations)
	assert.Equal(t, *want.Auth.AWS, *b.Auth.AWS)

	tests := []struct {
		name      string
		shared    bool
		sameField func(x, y *Cluster) bool
	}{
		{"source", true, func(x, y *Cluster) bool { return same(x.Source, y.Source) }},
		{"tenant", true, func(x, y *Cluster) bool { return same(x.Tenant, y.Tenant) }},
		{"region", true, func(x, y *Cluster) bool { return same(x.Region, y.Region) }},
		{"kubernetes version", true, func(x, y *Cluster) bool { return same(x.KubernetesVersion, y.KubernetesVersion) }},
		{"state", true, func(x, y *Cluster) bool { return same(x.State, y.State) }},
		{"labels", true, func(x, y *Cluster) bool { return sameMap(x.Labels, y.Labels) }},
		{"annotations", true, func(x, y *Cluster) bool { return sameMap(x.Annotations, y.Annotations) }},
		{"role ARN", true, func(x, y *Cluster) bool { return same(x.Auth.AWS.RoleARN, y.Auth.AWS.RoleARN) }},
		{"name", false, func(x, y *Cluster) bool { return same(x.Name, y.Name) }},
		{"server", false, func(x, y *Cluster) bool { return same(x.Server, y.Server) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.shared, tt.sameField(a, b), "a and b, equal but for their name")
		})
	}
	t.Run("a different value is not shared", func(t *testing.T) {
		assert.False(t, same(a.Tenant, c.Tenant))
		assert.False(t, sameMap(a.Annotations, c.Annotations))
		assert.True(t, sameMap(a.Labels, c.Labels), "equal labels, whatever the tenant")
	})
	t.Run("the AWS cluster name is the cluster's name", func(t *testing.T) {
		assert.True(t, same(a.Name, a.Auth.AWS.ClusterName))
	})
	t.Run("reset", func(t *testing.T) {
		assert.Positive(t, in.Len())
		in.Reset()
		assert.Zero(t, in.Len())
		d := mk("d", "acme")
		in.Cluster(d)
		assert.False(t, same(a.Tenant, d.Tenant), "nothing shared with what came before")
		assert.False(t, sameMap(a.Labels, d.Labels))
		assert.Equal(t, map[string]string{"env": "prod"}, a.Labels, "what came before is intact")
		assert.Equal(t, "acme", a.Tenant)
	})
}
