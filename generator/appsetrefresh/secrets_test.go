package appsetrefresh

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
)

// TestSelectedAndChanged: the trigger reads a cluster Secret alike as a
// *corev1.Secret and as the reconciler's cache keeps it (a Record).
func TestSelectedAndChanged(t *testing.T) {
	sel, err := labels.Parse("argocd.argoproj.io/secret-type=cluster,app.kubernetes.io/managed-by=argocd-cluster-discovery")
	require.NoError(t, err)
	tr := &Trigger{owned: sel}
	edited := func(edit func(*corev1.Secret)) *corev1.Secret {
		s := clusterSecret("a", "https://a.example.com")
		edit(s)
		return s
	}
	record := func(s *corev1.Secret) any {
		r, err := clustersecret.CacheTransform(s.DeepCopy())
		require.NoError(t, err)
		require.IsType(t, &clustersecret.Record{}, r)
		return r
	}
	foreign := edited(func(s *corev1.Secret) { delete(s.Labels, "app.kubernetes.io/managed-by") })
	for _, tc := range []struct {
		name     string
		old, new *corev1.Secret
		selected bool
		changed  bool
	}{
		{"unchanged", clusterSecret("a", "https://a.example.com"), clusterSecret("a", "https://a.example.com"), true, false},
		{"server changed", clusterSecret("a", "https://a.example.com"), clusterSecret("a", "https://b.example.com"), true, true},
		{"project set", clusterSecret("a", "https://a.example.com"), edited(func(s *corev1.Secret) { s.Data["project"] = []byte("p") }), true, true},
		{"config changed only", clusterSecret("a", "https://a.example.com"), edited(func(s *corev1.Secret) { s.Data["config"] = []byte("{}") }), true, false},
		{"not ours", foreign, foreign, false, false},
	} {
		for _, as := range []struct {
			name string
			of   func(*corev1.Secret) any
		}{{"secret", func(s *corev1.Secret) any { return s }}, {"record", record}} {
			t.Run(tc.name+"/"+as.name, func(t *testing.T) {
				assert.Equal(t, tc.selected, tr.selected(as.of(tc.new)), "selected")
				assert.Equal(t, tc.changed, secretChanged(as.of(tc.old), as.of(tc.new)), "changed")
			})
		}
	}
	assert.False(t, tr.selected(cache.DeletedFinalStateUnknown{Key: "argocd/a"}))
	assert.True(t, secretChanged(cache.DeletedFinalStateUnknown{}, clusterSecret("a", "https://a.example.com")))
}
