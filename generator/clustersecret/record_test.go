package clustersecret

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestCacheTransform(t *testing.T) {
	config := []byte(`{"bearerToken":"secret-token","tlsClientConfig":{"caData":"LS0t"}}`)
	secret := func(managed bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{LabelSecretType: "cluster", LabelOwner: "o", LabelSource: "fleet", LabelPhase: "ready", "env": "prod"},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"config":"secret-token"}}`, "note": "dropped",
				AnnotationCluster: "a", AnnotationClusterID: "a-id", AnnotationMissingListings: "1", AnnotationLabels: "env"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Data: map[string][]byte{"config": bytes.Clone(config), "server": []byte("https://x.example.com"), "name": []byte("a"), "shard": []byte("1")}}
		if managed {
			s.Labels[LabelManagedBy] = ManagedByValue
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		in     *corev1.Secret
		labels map[string]string
	}{
		{name: "our Secret", in: secret(true),
			labels: map[string]string{LabelSecretType: "cluster", LabelManagedBy: ManagedByValue, LabelOwner: "o", LabelSource: "fleet"}},
		{name: "a Secret we do not manage", in: secret(false),
			labels: map[string]string{LabelSecretType: "cluster", LabelOwner: "o", LabelSource: "fleet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := ownedDigest(tc.in)
			out, err := CacheTransform(tc.in)
			require.NoError(t, err)
			s := out.(*Record)
			assert.Equal(t, &Record{Name: "s", UID: "u1", ResourceVersion: "7", labels: tc.labels, cluster: "a", clusterID: "a-id",
				countdown: map[string]string{AnnotationMissingListings: "1"}, name: "a", server: "https://x.example.com",
				digest: [32]byte(sum)}, s, "no config: no credential in the cache")
			assert.Equal(t, map[string]string{AnnotationCluster: "a", AnnotationClusterID: "a-id", AnnotationMissingListings: "1"}, s.GetAnnotations())
			assert.Equal(t, "https://x.example.com", s.Value("server"))
			assert.Empty(t, s.Value("config"))

			again, err := CacheTransform(s)
			require.NoError(t, err)
			assert.Same(t, s, again, "idempotent")
		})
	}
	t.Run("label maps are shared", func(t *testing.T) {
		a, _ := CacheTransform(secret(true))
		b, _ := CacheTransform(secret(true))
		assert.Equal(t, reflect.ValueOf(a.(*Record).GetLabels()).Pointer(), reflect.ValueOf(b.(*Record).GetLabels()).Pointer())
	})
	t.Run("not a Secret", func(t *testing.T) {
		tomb := cache.DeletedFinalStateUnknown{Key: "ns/s"}
		out, err := CacheTransform(tomb)
		require.NoError(t, err)
		assert.Equal(t, tomb, out)
	})
}
