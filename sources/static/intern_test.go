package static

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestSharedStringsHeldOnce checks that the CAs and strings clusters have
// in common (tenant, label keys and values, ...) are held once: the
// decoder gives each cluster its own copy, ~0.75 KiB for the CA alone
// (an RSA CA held as DER), which at 10,000 clusters is ~7.5 MiB held for
// nothing.
func TestSharedStringsHeldOnce(t *testing.T) {
	ca, other := testCAData(t), testCAData(t)
	path := filepath.Join(t.TempDir(), "clusters.yaml")
	writeFile(t, path, fmt.Sprintf("clusters:\n"+
		"  - {name: a, server: https://a.example.com, caData: %s, tenant: acme, labels: {env: prod}}\n"+
		"  - {name: b, server: https://b.example.com, caData: %s, tenant: acme, labels: {env: prod}}\n"+
		"  - {name: c, server: https://c.example.com, caData: %s, tenant: globex, labels: {env: dev}}\n", ca, ca, other))
	src, err := New(Config{File: path}, "")
	require.NoError(t, err)
	cs, err := src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 3)
	assert.Equal(t, []string{ca, ca, other}, []string{cs[0].CA.Data(), cs[1].CA.Data(), cs[2].CA.Data()})
	assert.Equal(t, []string{"acme", "acme", "globex"}, []string{cs[0].Tenant, cs[1].Tenant, cs[2].Tenant})
	assert.Equal(t, []map[string]string{{"env": "prod"}, {"env": "prod"}, {"env": "dev"}}, []map[string]string{cs[0].Labels, cs[1].Labels, cs[2].Labels})
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	// A CA is a struct of one string, the bundle in its compact form.
	caBytes := func(ca *sources.CA) string { return *(*string)(unsafe.Pointer(ca)) }
	assert.True(t, same(caBytes(&cs[0].CA), caBytes(&cs[1].CA)), "one copy of a shared CA")
	assert.False(t, same(caBytes(&cs[0].CA), caBytes(&cs[2].CA)))
	assert.True(t, same(cs[0].Tenant, cs[1].Tenant), "one copy of a shared tenant")
	assert.True(t, same(cs[0].Labels["env"], cs[1].Labels["env"]), "one copy of a shared label value")
	sameMap := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	assert.True(t, sameMap(cs[0].Labels, cs[1].Labels), "one map for equal label sets")
	assert.False(t, sameMap(cs[0].Labels, cs[2].Labels))
}

// TestInternMaps checks that equal maps are shared, that a map is never
// shared with one that differs from it, even where joining keys and
// values would make them look alike, and that nil stays nil and empty
// stays empty.
func TestInternMaps(t *testing.T) {
	in := newInterner()
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
			m := in.strMap(tt.m)
			got = append(got, m)
			assert.Equal(t, tt.m, m)
			assert.NotNil(t, m)
			for j := range i {
				same := reflect.ValueOf(m).UnsafePointer() == reflect.ValueOf(got[j]).UnsafePointer()
				assert.Equal(t, j == tt.like, same, "shared with map %d", j)
			}
		})
	}
	assert.Nil(t, in.strMap(nil))
}
