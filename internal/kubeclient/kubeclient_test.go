package kubeclient_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testenv"
)

// restConfig points at the real kube-apiserver + etcd of this package's tests.
var restConfig *rest.Config

func TestMain(m *testing.M) { testenv.Main(m, filepath.Join("..", ".."), &restConfig) }

// countingTransport counts the requests of every client made from one config.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func TestNewForConfig(t *testing.T) {
	ctx := context.Background()
	var requests atomic.Int64
	cfg := rest.CopyConfig(restConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &requests} })
	c, err := kubeclient.NewForConfig(cfg)
	require.NoError(t, err)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubeclient-"}}
	ns, err = c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	require.NoError(t, err, "the core client writes")
	_, err = c.CoordinationV1().Leases(ns.Name).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the coordination client reads")
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err, "the authentication client asks who we are")
	assert.NotEmpty(t, r.Status.UserInfo.Username)
	assert.EqualValues(t, 3, requests.Load(), "every group's client goes through the config's transport")

	t.Run("qps without burst", func(t *testing.T) {
		bad := rest.CopyConfig(restConfig)
		bad.QPS, bad.Burst = 10, 0
		_, err := kubeclient.NewForConfig(bad)
		require.ErrorContains(t, err, "burst")
	})
}

// TestNewInformer: the informer lists and watches what its tweak selects,
// stores what its transform makes, starts once and shuts down after its
// stop channel closes.
func TestNewInformer(t *testing.T) {
	ctx := context.Background()
	c, err := kubeclient.NewForConfig(restConfig)
	require.NoError(t, err)
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubeclient-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cms := c.CoreV1().ConfigMaps(ns.Name)
	create := func(name string, labels map[string]string) {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	create("listed", map[string]string{"pick": "yes"})
	create("ignored", nil)

	inf := kubeclient.NewInformer(cms, &corev1.ConfigMap{},
		func(o *metav1.ListOptions) { o.LabelSelector = "pick=yes" },
		func(obj any) (any, error) {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				cm.Data = nil // what a transform keeps
			}
			return obj, nil
		})
	stopCtx, stop := context.WithCancel(ctx)
	inf.Start(stopCtx.Done())
	inf.Start(stopCtx.Done()) // a second start does nothing
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))

	create("watched", map[string]string{"pick": "yes"})
	require.Eventually(t, func() bool { return len(inf.GetStore().ListKeys()) == 2 }, 10*time.Second, 20*time.Millisecond)
	assert.ElementsMatch(t, []string{ns.Name + "/listed", ns.Name + "/watched"}, inf.GetStore().ListKeys(), "the tweak's selector, listed and watched")
	for _, obj := range inf.GetStore().List() {
		assert.Nil(t, obj.(*corev1.ConfigMap).Data, "stored transformed")
	}
	assert.Empty(t, inf.GetIndexer().GetIndexers(), "no index: the store is read whole")

	stop()
	done := make(chan struct{})
	go func() { inf.Shutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after the stop channel closed")
	}
	assert.True(t, inf.IsStopped())
}
