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
