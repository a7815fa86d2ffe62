package clustersecret

import (
	"bytes"
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// informerFor starts the service's shared informer of the cluster Secrets
// of ns (NewInformerFactory) through client, waits for its sync, and stops
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
	f := NewInformerFactory(client, ns)
	inf := f.Core().V1().Secrets().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	stop := func() { cancel(); f.Shutdown() }
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
	inf := NewInformerFactory(e.client, e.ns).Core().V1().Secrets().Informer() // never started
	r, err := New(Config{Options: Options{Namespace: e.ns, OwnerID: "test-owner"}}, e.client, f.inv, nil, nil, WithInformer(inf))
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

// TestLargePassReleasesMemory: Run hands the memory of a pass that made
// many writes (a cold sync) back to the operating system, once, and not
// after a small pass.
func TestLargePassReleasesMemory(t *testing.T) {
	for _, tc := range []struct {
		name         string
		releaseAfter int
		want         int32
	}{
		{"3 creates, release after 3 writes", 3, 1},
		{"3 creates, release after 4 writes", 4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := newFleet(t, "a", "b", "c")
			r, err := New(Config{Options: Options{Namespace: e.ns, OwnerID: "test-owner"}}, e.client, f.inv, nil, nil)
			require.NoError(t, err)
			var released atomic.Int32
			r.release, r.releaseAfter, r.releaseDelay = func() { released.Add(1) }, tc.releaseAfter, 10*time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); r.Run(ctx) }()
			require.Eventually(t, func() bool { return len(e.secrets()) == 3 }, 10*time.Second, 20*time.Millisecond)
			time.Sleep(300 * time.Millisecond) // the release comes 10 ms after the pass, and no second pass runs
			cancel()
			<-done
			assert.Equal(t, tc.want, released.Load())
		})
	}
}

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

// TestOwnedDigest: a Secret in the cache compares equal to the desired
// Secret exactly when merging the desired Secret into it changes nothing.
func TestOwnedDigest(t *testing.T) {
	opts := Options{Namespace: "argocd", OwnerID: "o", Prefix: "cluster"}
	require.NoError(t, opts.Validate())
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

func TestOnFresh(t *testing.T) {
	full := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u1", ResourceVersion: "7",
		Labels: map[string]string{LabelManagedBy: ManagedByValue, "env": "prod"}, Annotations: map[string]string{AnnotationMissingSince: "t0", "note": "n"}},
		Data: map[string][]byte{"config": []byte(`{"bearerToken":"t"}`), "server": []byte("https://x")}}
	cached, _ := CacheTransform(full.DeepCopy())
	old := cached.(*Record)
	counted := countdownOf(Pending{Missed: 1, Since: time.Unix(0, 0)}, time.Unix(1, 0))
	var cleared Changes
	clearCountdown(&cleared, old)
	require.Len(t, cleared.Update, 1)
	for _, tc := range []struct {
		name      string
		countdown map[string]string
		full      func() *corev1.Secret
		want      map[string]string // annotations; nil: not written
	}{
		{"countdown, same version", counted, func() *corev1.Secret { return full }, map[string]string{"note": "n",
			AnnotationMissingSince: "1970-01-01T00:00:00Z", AnnotationMissingListings: "1", AnnotationMissingListing: "1970-01-01T00:00:01Z"}},
		{"countdown cleared", cleared.Update[0].Countdown, func() *corev1.Secret { return full }, map[string]string{"note": "n"}},
		{"changed since", counted, func() *corev1.Secret { s := full.DeepCopy(); s.ResourceVersion = "8"; return s }, nil},
		{"re-created", counted, func() *corev1.Secret { s := full.DeepCopy(); s.UID = "u2"; return s }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := full.DeepCopy()
			out := onFresh(old, tc.countdown, tc.full())
			assert.Equal(t, before, full, "the Secret read is not changed")
			if tc.want == nil {
				assert.Nil(t, out)
				return
			}
			require.NotNil(t, out)
			assert.Equal(t, full.Data, out.Data, "the full data")
			assert.Equal(t, full.Labels, out.Labels, "the full labels")
			assert.Equal(t, tc.want, out.Annotations)
		})
	}
}

func TestOwnWritesView(t *testing.T) {
	secret := func(name, rv string, uid types.UID) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, UID: uid}}
	}
	rec := func(name, rv string, uid types.UID) *Record { return recordOf(secret(name, rv, uid), false) }
	for _, tc := range []struct {
		name     string
		record   func(w *ownWrites)
		cache    []*Record
		observed string
		want     map[string]string // name → resourceVersion seen by the plan
		kept     int               // writes still remembered
	}{
		{name: "create not shown yet", record: func(w *ownWrites) { w.wrote(secret("a", "10", "u")) },
			observed: "9", want: map[string]string{"a": "10"}, kept: 1},
		{name: "create shown", record: func(w *ownWrites) { w.wrote(secret("a", "10", "u")) },
			cache: []*Record{rec("a", "10", "u")}, observed: "10", want: map[string]string{"a": "10"}},
		{name: "create shown, then deleted by someone", record: func(w *ownWrites) { w.wrote(secret("a", "10", "u")) },
			observed: "11", want: map[string]string{}},
		{name: "update not shown yet", record: func(w *ownWrites) { w.wrote(secret("a", "10", "u")) },
			cache: []*Record{rec("a", "5", "u")}, observed: "9", want: map[string]string{"a": "10"}, kept: 1},
		{name: "update shown, then changed by someone", record: func(w *ownWrites) { w.wrote(secret("a", "10", "u")) },
			cache: []*Record{rec("a", "12", "u")}, observed: "12", want: map[string]string{"a": "12"}},
		{name: "delete not shown yet", record: func(w *ownWrites) { w.deleted("a", "u") },
			cache: []*Record{rec("a", "5", "u"), rec("b", "6", "v")}, observed: "9", want: map[string]string{"b": "6"}, kept: 1},
		{name: "delete shown", record: func(w *ownWrites) { w.deleted("a", "u") },
			observed: "9", want: map[string]string{}},
		{name: "deleted, then re-created by someone", record: func(w *ownWrites) { w.deleted("a", "u") },
			cache: []*Record{rec("a", "15", "u2")}, observed: "15", want: map[string]string{"a": "15"}},
		{name: "versions that do not compare: equal only", record: func(w *ownWrites) { w.wrote(secret("a", "x10", "u")) },
			cache: []*Record{rec("a", "x9", "u")}, observed: "x9", want: map[string]string{"a": "x10"}, kept: 1},
		{name: "expired", record: func(w *ownWrites) {
			w.wrote(secret("a", "10", "u"))
			o := w.m["a"]
			o.at = time.Now().Add(-2 * ownWriteTTL)
			w.m["a"] = o
		}, cache: []*Record{rec("a", "5", "u")}, want: map[string]string{"a": "5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w ownWrites
			tc.record(&w)
			got := map[string]string{}
			for _, s := range w.view(tc.cache, tc.observed) {
				got[s.Name] = s.ResourceVersion
			}
			assert.Equal(t, tc.want, got)
			assert.Len(t, w.m, tc.kept)
		})
	}
}

func TestOwnWritesShown(t *testing.T) {
	secret := func(rv string, uid types.UID) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: rv, UID: uid}}
	}
	wrote := func(w *ownWrites) { w.wrote(secret("10", "u")) }
	rec := func(rv string, uid types.UID) *Record { return recordOf(secret(rv, uid), false) }
	deleted := func(w *ownWrites) { w.deleted("a", "u") }
	for _, tc := range []struct {
		name      string
		record    func(w *ownWrites)
		event     *Record
		deleted   bool
		forgotten bool
	}{
		{"an older version of the written Secret", wrote, rec("9", "u"), false, false},
		{"the written version", wrote, rec("10", "u"), false, true},
		{"a later version", wrote, rec("11", "u"), false, true},
		{"the written Secret deleted since", wrote, rec("12", "u"), true, true},
		{"the deleted Secret, before the delete", deleted, rec("9", "u"), false, false},
		{"the delete", deleted, rec("9", "u"), true, true},
		{"re-created by someone", deleted, rec("15", "u2"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w ownWrites
			tc.record(&w)
			w.shown(tc.event, tc.deleted)
			assert.Equal(t, tc.forgotten, len(w.m) == 0)
		})
	}
}
