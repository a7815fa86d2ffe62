package clustersecret

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// informerFor starts the service's shared informer of the cluster Secrets
// of ns (NewInformer) through client, waits for its sync, and stops
// it when the test ends.
func informerFor(t testing.TB, client kubernetes.Interface, ns string) cache.SharedIndexInformer {
	t.Helper()
	inf, _ := startInformer(t, client, ns)
	return inf
}

// startInformer is informerFor, and a function that stops the informer
// early, leaving its cache as it is.
func startInformer(t testing.TB, client kubernetes.Interface, ns string) (cache.SharedIndexInformer, func()) {
	t.Helper()
	inf := NewInformer(client, ns)
	ctx, cancel := context.WithCancel(context.Background())
	inf.Start(ctx.Done())
	stop := func() { cancel(); inf.Shutdown() }
	t.Cleanup(stop)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced), "the cache of cluster Secrets syncs")
	return inf, stop
}

// caughtUp waits until the reconciler's cache, if it has one, holds the
// cluster Secrets the API server holds at the same resourceVersions, so
// that what a test changed through the admin client is seen by the next
// pass, as it is a moment later in the service.
func caughtUp(t testing.TB, r *Reconciler) {
	t.Helper()
	src, ok := r.src.(*informerSource)
	if !ok {
		return
	}
	admin, err := kubernetes.NewForConfig(restConfig)
	require.NoError(t, err)
	versions := func(ss []metav1.Object) map[string]string {
		out := map[string]string{}
		for _, s := range ss {
			out[s.GetName()] = s.GetResourceVersion()
		}
		return out
	}
	require.Eventually(t, func() bool {
		l, err := admin.CoreV1().Secrets(r.cfg.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: clusterSecrets.String()})
		require.NoError(t, err)
		server := make([]metav1.Object, len(l.Items))
		for i := range l.Items {
			server[i] = &l.Items[i]
		}
		recs, _, err := src.list(context.Background())
		require.NoError(t, err)
		cached := make([]metav1.Object, len(recs))
		for i, rec := range recs {
			cached[i] = rec
		}
		return assert.ObjectsAreEqual(versions(server), versions(cached))
	}, 10*time.Second, 5*time.Millisecond, "the cache catches up with the API server")
}

// secretRequests reads kube-apiserver's own count of the requests it served
// on Secrets (apiserver_request_total), by verb: every client's, counted on
// the server's side.
func secretRequests(t testing.TB) map[string]float64 {
	t.Helper()
	admin, err := kubernetes.NewForConfig(restConfig)
	require.NoError(t, err)
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	require.NoError(t, err)
	out := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		var resource, verb string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "resource":
				resource = l.GetValue()
			case "verb":
				verb = l.GetValue()
			}
		}
		if resource == "secrets" {
			out[verb] += m.GetCounter().GetValue()
		}
	}
	return out
}

func since(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for verb, n := range after {
		if d := n - before[verb]; d != 0 {
			out[verb] = d
		}
	}
	return out
}

// TestSteadyStateMakesNoAPIServerRequests: after a cold sync, five passes
// with nothing to change make no LIST and no write of Secrets at all, as
// kube-apiserver counts them (a pass that listed would make five).
func TestSteadyStateMakesNoAPIServerRequests(t *testing.T) {
	e := newEnv(t)
	names := numbered("s%02d", 50)
	f := newFleet(t, names...)
	r := newReconciler(t, e, f)
	require.Len(t, pass(t, r).Create, len(names), "cold sync")
	caughtUp(t, r)
	require.Eventually(t, func() bool {
		r.own.mu.Lock()
		defer r.own.mu.Unlock()
		return len(r.own.m) == 0
	}, 10*time.Second, 5*time.Millisecond, "once the cache shows our creates, they are not held twice")

	before := secretRequests(t)
	require.GreaterOrEqual(t, before["POST"], float64(len(names)), "kube-apiserver counted the cold sync's creates")
	e.counter.lists.Store(0)
	e.counter.writes.Store(0)
	for range 5 {
		ch, err := r.Pass(context.Background())
		require.NoError(t, err)
		require.Zero(t, ch.Writes())
		require.Equal(t, len(names), ch.Unchanged)
	}
	requests := since(before, secretRequests(t))
	t.Logf("kube-apiserver: requests on Secrets during 5 steady-state passes: %v", requests)
	assert.Zero(t, requests["LIST"], "no LIST")
	for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE", "APPLY", "GET"} {
		assert.Zero(t, requests[verb], "no %s", verb)
	}
	assert.Zero(t, e.counter.lists.Load(), "the reconciler's client listed nothing")
	assert.Zero(t, e.counter.writes.Load(), "the reconciler's client wrote nothing")
}

// TestResyncRepairsDriftFromTheCache: a person edits the data of one of our
// Secrets, the labels and annotations of another, and deletes a third; the
// next resync pass, which reads the cache (trimmed: no config, no
// propagated labels), restores all three without listing, and keeps what
// the person added.
func TestResyncRepairsDriftFromTheCache(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a", "b", "c")
	r := newReconciler(t, e, f, func(c *Config) { c.Resync = time.Second })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.RunWithoutElection(ctx) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return len(e.secrets()) == 3 }, 10*time.Second, 10*time.Millisecond)
	want := e.get(sn("a"))

	e.counter.lists.Store(0)
	e.edit(sn("a"), func(s *corev1.Secret) {
		s.Data["server"] = []byte("https://hijacked.example.com")
		s.Data["config"] = []byte(`{"bearerToken":"stolen"}`)
	})
	wantC := e.get(sn("c"))
	e.edit(sn("c"), func(s *corev1.Secret) {
		s.Labels["env"] = "staging" // propagated: ours
		delete(s.Labels, "tenant")  // propagated: ours
		delete(s.Annotations, AnnotationClusterID)
		s.Labels["added-by-hand"] = "kept" // a person's
		s.Data["shard"] = []byte("1")      // a person's
	})
	require.NoError(t, e.admin.CoreV1().Secrets(e.ns).Delete(ctx, sn("b"), metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		a, c := e.get(sn("a")), e.get(sn("c"))
		return string(a.Data["server"]) == "https://a.example.com" && c.Labels["env"] == "prod" && len(e.secrets()) == 3
	}, 10*time.Second, 20*time.Millisecond, "the resync pass repairs the edits and re-creates the deleted Secret")
	assert.Equal(t, string(want.Data["config"]), string(e.get(sn("a")).Data["config"]), "the full config is written back, not a digest")
	c := e.get(sn("c"))
	assert.Equal(t, wantC.Annotations, c.Annotations, "our annotations restored")
	wantC.Labels["added-by-hand"] = "kept"
	assert.Equal(t, wantC.Labels, c.Labels, "our labels restored, the person's kept")
	assert.Equal(t, "1", string(c.Data["shard"]), "the person's data key kept")
	assert.Equal(t, string(wantC.Data["config"]), string(c.Data["config"]))
	assert.Zero(t, e.counter.lists.Load(), "repaired from the cache, without a LIST")
}

// TestCacheThatLagsOurWrites: with a cache that never shows our writes (its
// informer stopped after the first listing), a pass after a create, an
// update or a delete does not repeat it, and a prune countdown computed
// from the cache (which holds no config) writes the full config.
func TestCacheThatLagsOurWrites(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a", "b", "c")
	ctx := context.Background()
	frozen := func(mut ...func(*Config)) *Reconciler {
		inf, stop := startInformer(t, e.client, e.ns)
		cfg := testConfig(e, append(mut, func(c *Config) { c.Prune.MaxDeletionsPercent = 100 })...)
		r, err := New(cfg, e.client, f.inv, nil, nil, WithInformer(inf))
		require.NoError(t, err)
		stop() // the cache stays as it is now
		return r
	}
	again := func(r *Reconciler) Changes {
		t.Helper()
		e.counter.writes.Store(0)
		ch, err := r.Pass(ctx)
		require.NoError(t, err)
		assert.Zero(t, e.counter.writes.Load(), "nothing written again")
		return ch
	}
	r := frozen()

	ch, err := r.Pass(ctx)
	require.NoError(t, err)
	require.Len(t, ch.Create, 3)
	cached, _, err := r.src.(*informerSource).list(ctx)
	require.NoError(t, err)
	require.Empty(t, cached, "the cache does not show our creates")
	assert.Equal(t, 3, again(r).Unchanged, "our creates stand in for the cache")

	f.write("a", "b") // c leaves: marked absent (an update), deleted once its departure is confirmed
	require.NoError(t, f.refresh())
	ch, err = r.Pass(ctx)
	require.NoError(t, err)
	require.Len(t, ch.Update, 1)
	assert.Equal(t, "absent", e.get(sn("c")).Labels[LabelPhase])
	assert.Empty(t, again(r).Update)
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, f.refresh())
	ch, err = r.Pass(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{sn("c")}, names(ch.Delete))
	assert.Equal(t, []string{sn("a"), sn("b")}, e.secretNames())
	ch = again(r)
	assert.Empty(t, ch.Delete, "the delete is not repeated")
	assert.Empty(t, ch.Create, "nor the Secret re-created")

	// b leaves the selection: a countdown, from a cache of trimmed Secrets
	config := string(e.get(sn("b")).Data["config"])
	r = frozen(func(c *Config) {
		c.Select = func(c *sources.Cluster) bool { return c.Name != "b" }
		c.Prune.AfterListings = 3
	})
	ch, err = r.Pass(ctx)
	require.NoError(t, err)
	require.Len(t, ch.Update, 1)
	require.Equal(t, "countdown", ch.Update[0].Reason)
	require.Nil(t, ch.Update[0].Old.Full(), "planned from the cache")
	got := e.get(sn("b"))
	assert.Contains(t, got.Annotations, AnnotationMissingSince, "the countdown is written")
	assert.Equal(t, config, string(got.Data["config"]), "with the full config, not the cache's digest")
	assert.Empty(t, again(r).Update, "the countdown is not written again")
}

// TestUnsyncedCacheWritesNothing: a pass before the informer has listed
// writes nothing, and says why.
func TestUnsyncedCacheWritesNothing(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a")
	inf := NewInformer(e.client, e.ns) // never started
	r, err := New(defaulted(Config{Options: Options{Namespace: e.ns, OwnerID: "test-owner"}}), e.client, f.inv, nil, nil, WithInformer(inf))
	require.NoError(t, err)
	_, err = r.Pass(context.Background())
	require.ErrorContains(t, err, "has not synced")
	assert.Zero(t, e.counter.writes.Load())
	assert.Empty(t, e.secrets())

	last := r.Status().LastPass
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r.Run(ctx) // waits for the sync, which never comes
	assert.Equal(t, last, r.Status().LastPass, "Run made no pass")
	assert.Empty(t, e.secrets())
}
