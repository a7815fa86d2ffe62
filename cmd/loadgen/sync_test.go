package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestColdStartAtTheDefaults: the cold start's configuration leaves
// secrets.resync to the binary (what ships); only the steady state's,
// after the restart, sets it.
func TestColdStartAtTheDefaults(t *testing.T) {
	cold, steadyCfg := configSections("/k", 2*time.Second)
	assert.NotContains(t, cold, "resync")
	assert.Contains(t, steadyCfg, "  resync: 2s\n")

	dir := t.TempDir()
	path, err := writeConfig(filepath.Join(dir, "config-steady.yaml"), "127.0.0.1:1", steadyCfg)
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(b), "listen: \"127.0.0.1:1\"")
	assert.Contains(t, string(b), "{name: "+sourceNames[0]+", provider: static, static: {file: "+sourceNames[0]+".yaml}}")
	assert.Contains(t, string(b), steadyCfg)
}

// TestStatusWritten: a ClusterProfile counts as written in full once its
// metadata shows a manager of its status subresource.
func TestStatusWritten(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{name: "created only", entries: []metav1.ManagedFieldsEntry{{Manager: "argocd-cluster-discovery", Operation: metav1.ManagedFieldsOperationUpdate}}},
		{name: "status applied", want: true, entries: []metav1.ManagedFieldsEntry{
			{Manager: "argocd-cluster-discovery", Operation: metav1.ManagedFieldsOperationUpdate},
			{Manager: "argocd-cluster-discovery", Operation: metav1.ManagedFieldsOperationApply, Subresource: "status"},
		}},
		{name: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ManagedFields: tc.entries}}
			assert.Equal(t, tc.want, statusWritten(m))
		})
	}
}
