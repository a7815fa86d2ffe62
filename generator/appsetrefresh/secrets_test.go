package appsetrefresh

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func clusterSecret(name, server string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "argocd", Labels: map[string]string{
			"argocd.argoproj.io/secret-type": "cluster", "app.kubernetes.io/managed-by": "argocd-cluster-discovery"}},
		Data: map[string][]byte{"name": []byte(name), "server": []byte(server)},
	}
}

func TestRunWakesOnClusterSecretChanges(t *testing.T) {
	w := newWorld()
	ctx := context.Background()
	secrets := w.kube.CoreV1().Secrets("argocd")
	_, err := secrets.Create(ctx, clusterSecret("existing", "https://existing.example.com"), metav1.CreateOptions{})
	require.NoError(t, err)
	tr := w.trigger(t, func(c *Config) {
		c.SecretsNamespace = "argocd"
		c.SecretsSelector = "app.kubernetes.io/managed-by=argocd-cluster-discovery"
	})
	stop := run(tr.Run)
	defer stop()
	require.Eventually(t, func() bool { return passes(tr) == 1 }, 2*time.Second, 10*time.Millisecond, "one pass at start")
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, 1, passes(tr), "Secrets already there wake nothing")

	// a new Secret makes a destination valid
	s, err := secrets.Create(ctx, clusterSecret("new", "https://new.example.com"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return passes(tr) == 2 }, 2*time.Second, 10*time.Millisecond)

	// the prune countdown changes annotations only: nothing to wake
	s.Annotations = map[string]string{"argocd-cluster-discovery.io/missing-listings": "1"}
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, 2, passes(tr))

	// a Secret the selector does not select (not ours) wakes nothing
	foreign := clusterSecret("foreign", "https://foreign.example.com")
	foreign.Labels = map[string]string{"argocd.argoproj.io/secret-type": "cluster"}
	_, err = secrets.Create(ctx, foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, 2, passes(tr))

	// the server changes
	s.Data["server"] = []byte("https://moved.example.com")
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return passes(tr) == 3 }, 2*time.Second, 10*time.Millisecond)

	require.NoError(t, secrets.Delete(ctx, "new", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return passes(tr) == 4 }, 2*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, w.lists(), "ApplicationSets listed once, by the informer")
}
