package clustersecret

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestOwnedDigest: a Secret in the cache compares equal to the desired
// Secret exactly when merging the desired Secret into it changes nothing.
func TestOwnedDigest(t *testing.T) {
	opts := Options{Namespace: "argocd", OwnerID: "o", Prefix: "cluster"}
	require.Empty(t, opts.Validate(nil))
	d, err := Build(&sources.Cluster{Name: "a", Source: "fleet", Server: "https://a.example.com", Tenant: "acme",
		Labels: map[string]string{"env": "prod", "team": "x"}, Annotations: map[string]string{"docs": "https://docs"},
		Auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: "a"}}}, &opts, nil)
	require.NoError(t, err)
	want := d.Secret
	for _, tc := range []struct {
		name string
		edit func(s *corev1.Secret)
		same bool
	}{
		{"as written", func(*corev1.Secret) {}, true},
		{"a person's label, annotation and data key", func(s *corev1.Secret) {
			s.Labels["added-by-hand"], s.Annotations["note"], s.Data["shard"] = "kept", "kept", []byte("1")
		}, true},
		{"pinned", func(s *corev1.Secret) { s.Labels[LabelPin] = "true" }, true},
		{"a propagated label edited", func(s *corev1.Secret) { s.Labels["env"] = "staging" }, false},
		{"a propagated label deleted", func(s *corev1.Secret) { delete(s.Labels, "team") }, false},
		{"a propagated annotation deleted", func(s *corev1.Secret) { delete(s.Annotations, "docs") }, false},
		{"our label edited", func(s *corev1.Secret) { s.Labels[LabelPhase] = "absent" }, false},
		{"a label propagated earlier, not now", func(s *corev1.Secret) {
			s.Labels["old"] = "x"
			s.Annotations[AnnotationLabels] += ",old"
		}, false},
		{"a state label left over", func(s *corev1.Secret) { s.Labels[LabelState] = "ACTIVE" }, false},
		{"a countdown", func(s *corev1.Secret) { s.Annotations[AnnotationMissingListings] = "1" }, false},
		{"server edited", func(s *corev1.Secret) { s.Data["server"] = []byte("https://hijacked.example.com") }, false},
		{"config edited", func(s *corev1.Secret) { s.Data["config"] = []byte(`{"bearerToken":"stolen"}`) }, false},
		{"project added", func(s *corev1.Secret) { s.Data["project"] = []byte("p") }, false},
		{"an empty value added", func(s *corev1.Secret) { s.Data["namespaces"] = nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := want.DeepCopy()
			tc.edit(cur)
			assert.Equal(t, tc.same, sameContent(cur, merge(cur, want)), "merge changes nothing")
			cached, err := CacheTransform(cur.DeepCopy())
			require.NoError(t, err)
			assert.Equal(t, tc.same, upToDate(cached.(*Record), &d), "the digests agree")
			compact := d.Compact()
			assert.Equal(t, tc.same, upToDate(recordOf(cur, true), &compact), "and without the desired Secret")
		})
	}
	t.Run("a desired key the digest does not cover", func(t *testing.T) {
		w := want.DeepCopy()
		w.Labels["unlisted"] = "x"
		cached, _ := CacheTransform(w.DeepCopy())
		dw := desiredOf(w, d.cluster, d.opts)
		assert.False(t, upToDate(cached.(*Record), &dw), "never up to date: the update compares in full")
	})
}
