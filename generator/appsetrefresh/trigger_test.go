package appsetrefresh

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const plugin = "argocd-cluster-discovery"

// fakeInventory hands out empty snapshots whose version the test bumps.
type fakeInventory struct {
	mu      sync.Mutex
	version uint64
	subs    []chan struct{}
}

func (f *fakeInventory) Snapshot() *inventory.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &inventory.Snapshot{Version: f.version}
}

func (f *fakeInventory) Subscribe() (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{}, 1)
	f.subs = append(f.subs, ch)
	return ch, func() {}
}

func (f *fakeInventory) change() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
	for _, ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func appSet(ns, name string, generators []any, annotations map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name, "namespace": ns}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet", "metadata": meta,
		"spec": map[string]any{"generators": generators},
	}}
}

func pluginGen(name string) any {
	return map[string]any{"plugin": map[string]any{"configMapRef": map[string]any{"name": name}}}
}

// world is a fake API with ApplicationSets in two namespaces.
type world struct {
	dyn  *dynamicfake.FakeDynamicClient
	kube *kubefake.Clientset
	inv  *fakeInventory
	reg  *prometheus.Registry
}

func newWorld() *world {
	objs := []runtime.Object{
		appSet("argocd", "acme", []any{pluginGen(plugin)}, nil),
		appSet("argocd", "globex-clusters", []any{map[string]any{"clusters": map[string]any{}}}, nil),
		appSet("argocd", "nested", []any{map[string]any{"matrix": map[string]any{"generators": []any{
			map[string]any{"list": map[string]any{"elements": []any{}}},
			map[string]any{"merge": map[string]any{"generators": []any{pluginGen(plugin)}}}}}}}, nil),
		appSet("argocd", "pending", []any{pluginGen(plugin)}, map[string]any{AnnotationRefresh: "true", "keep": "me"}),
		appSet("argocd", "other-plugin", []any{pluginGen("other")}, nil),
		appSet("team-a", "team-appset", []any{pluginGen(plugin)}, nil),
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ApplicationSets: "ApplicationSetList"}, objs...)
	return &world{dyn: dyn, kube: kubefake.NewClientset(), inv: &fakeInventory{version: 1}, reg: prometheus.NewRegistry()}
}

// trigger is a trigger reading informers of the fake API, as the service
// wires them: one per namespace of ApplicationSets trimmed by Transform, and
// one of the Secrets of SecretsNamespace. They stop when the test ends.
func (w *world) trigger(t *testing.T, mut ...func(*Config)) *Trigger {
	t.Helper()
	cfg := Config{PluginConfigMap: plugin, Namespaces: []string{"argocd"}, Debounce: 20 * time.Millisecond, RetryAfter: 50 * time.Millisecond}
	for _, m := range mut {
		m(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var shutdown []func()
	t.Cleanup(func() {
		cancel()
		for _, s := range shutdown {
			s()
		}
	})
	caches := Caches{ApplicationSets: map[string]cache.SharedIndexInformer{}}
	for _, ns := range cfg.InformerNamespaces() {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(w.dyn, 0, ns, nil)
		inf := f.ForResource(ApplicationSets).Informer()
		require.NoError(t, inf.SetTransform(Transform(cfg.PluginConfigMap)))
		caches.ApplicationSets[ns] = inf
		f.Start(ctx.Done())
		shutdown = append(shutdown, f.Shutdown)
	}
	if cfg.SecretsNamespace != "" {
		f := informers.NewSharedInformerFactoryWithOptions(w.kube, 0, informers.WithNamespace(cfg.SecretsNamespace),
			informers.WithTransform(clustersecret.CacheTransform)) // the reconciler's cache, as in the service
		caches.Secrets = f.Core().V1().Secrets().Informer()
		f.Start(ctx.Done())
		shutdown = append(shutdown, f.Shutdown)
	}
	tr, err := New(cfg, w.dyn, w.kube, caches, w.inv, nil, w.reg)
	require.NoError(t, err)
	tr.syncTimeout = 2 * time.Second
	return tr
}

// passes counts the trigger's passes, failed or not.
func passes(tr *Trigger) int {
	return int(testutil.ToFloat64(tr.metrics.passes.WithLabelValues("success")) + testutil.ToFloat64(tr.metrics.passes.WithLabelValues("error")))
}

// patched returns "namespace/name" of every patch request, in order.
func (w *world) patched() []string {
	var out []string
	for _, a := range w.dyn.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			out = append(out, p.GetNamespace()+"/"+p.GetName())
		}
	}
	return out
}

func (w *world) lists() int {
	n := 0
	for _, a := range w.dyn.Actions() {
		if a.GetVerb() == "list" {
			n++
		}
	}
	return n
}

func (w *world) annotations(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	u, err := w.dyn.Resource(ApplicationSets).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return u.GetAnnotations()
}

func TestRefreshPatchesOnlyApplicationSetsUsingThePlugin(t *testing.T) {
	w := newWorld()
	tr := w.trigger(t)
	res, err := tr.Refresh(context.Background(), "test")
	require.NoError(t, err)

	assert.Equal(t, 3, res.Matched)
	assert.Equal(t, map[string]int{OutcomePatched: 2, OutcomeRepatched: 1}, res.Outcomes)
	// the pending one is patched twice: annotation removed, then set again
	assert.ElementsMatch(t, []string{"argocd/acme", "argocd/nested", "argocd/pending", "argocd/pending"}, w.patched())
	for _, name := range []string{"acme", "nested", "pending"} {
		assert.Equal(t, "true", w.annotations(t, "argocd", name)[AnnotationRefresh], name)
	}
	assert.Equal(t, "me", w.annotations(t, "argocd", "pending")["keep"], "other annotations are left alone")
	assert.Empty(t, w.annotations(t, "argocd", "globex-clusters"), "cluster generator ApplicationSets are woken by Argo CD itself")
	assert.Empty(t, w.annotations(t, "argocd", "other-plugin"))
	assert.Empty(t, w.annotations(t, "team-a", "team-appset"), "namespace not configured")

	assert.Equal(t, 2.0, testutil.ToFloat64(tr.metrics.patches.WithLabelValues(OutcomePatched)))
	assert.Equal(t, 1.0, testutil.ToFloat64(tr.metrics.patches.WithLabelValues(OutcomeRepatched)))
	assert.Equal(t, 1.0, testutil.ToFloat64(tr.metrics.passes.WithLabelValues("success")))
}

func TestRefreshSendsAMergePatchOfTheAnnotationOnly(t *testing.T) {
	w := newWorld()
	_, err := w.trigger(t).Refresh(context.Background(), "test")
	require.NoError(t, err)
	var bodies []string
	for _, a := range w.dyn.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			assert.Equal(t, types.MergePatchType, p.GetPatchType())
			bodies = append(bodies, string(p.GetPatch()))
		}
	}
	assert.Contains(t, bodies, `{"metadata":{"annotations":{"argocd.argoproj.io/application-set-refresh":"true"}}}`)
	assert.Contains(t, bodies, `{"metadata":{"annotations":{"argocd.argoproj.io/application-set-refresh":null}}}`)
}

func TestRefreshNamespaces(t *testing.T) {
	for _, tt := range []struct {
		namespaces []string
		want       []string
	}{
		{[]string{"team-a"}, []string{"team-a/team-appset"}},
		{[]string{"team-a", "argocd"}, []string{"team-a/team-appset", "argocd/acme", "argocd/nested", "argocd/pending", "argocd/pending"}},
		{[]string{AllNamespaces}, []string{"team-a/team-appset", "argocd/acme", "argocd/nested", "argocd/pending", "argocd/pending"}},
		{[]string{"empty"}, nil},
	} {
		w := newWorld()
		_, err := w.trigger(t, func(c *Config) { c.Namespaces = tt.namespaces }).Refresh(context.Background(), "test")
		require.NoError(t, err)
		assert.ElementsMatch(t, tt.want, w.patched(), "%v", tt.namespaces)
	}
}

func TestRefreshDryRunPatchesNothing(t *testing.T) {
	w := newWorld()
	tr := w.trigger(t, func(c *Config) { c.DryRun = true })
	res, err := tr.Refresh(context.Background(), "test")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{OutcomeDryRun: 3}, res.Outcomes)
	assert.Empty(t, w.patched(), "dry run writes nothing")
	assert.Empty(t, w.annotations(t, "argocd", "acme"))
}

func TestRefreshFailuresAndVanishedApplicationSets(t *testing.T) {
	w := newWorld()
	w.dyn.PrependReactor("patch", "applicationsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.(k8stesting.PatchAction).GetName() {
		case "acme":
			return true, nil, apierrors.NewInternalError(errors.New("etcd is unhappy"))
		case "nested":
			return true, nil, apierrors.NewNotFound(ApplicationSets.GroupResource(), "nested")
		}
		return false, nil, nil
	})
	tr := w.trigger(t)
	res, err := tr.Refresh(context.Background(), "test")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "patch applicationset argocd/acme")
	assert.NotContains(t, err.Error(), "nested", "deleted meanwhile is not an error")
	assert.Equal(t, map[string]int{OutcomeFailed: 1, OutcomeGone: 1, OutcomeRepatched: 1}, res.Outcomes)
	assert.Equal(t, "true", w.annotations(t, "argocd", "pending")[AnnotationRefresh], "one failure does not stop the others")
	assert.Equal(t, 1.0, testutil.ToFloat64(tr.metrics.patches.WithLabelValues(OutcomeFailed)))
	assert.Equal(t, 1.0, testutil.ToFloat64(tr.metrics.passes.WithLabelValues("error")))
}

func TestRefreshListErrorNamesTheNamespace(t *testing.T) {
	w := newWorld()
	w.dyn.PrependReactor("list", "applicationsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(ApplicationSets.GroupResource(), "")
	})
	tr := w.trigger(t)
	tr.syncTimeout = 200 * time.Millisecond
	_, err := tr.Refresh(context.Background(), "test")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "list applicationsets in namespace argocd")
	assert.Contains(t, err.Error(), "CRD installed?")
	assert.Empty(t, w.patched(), "an unsynced cache patches nothing")
}

func TestConfigValidate(t *testing.T) {
	ok := Config{PluginConfigMap: plugin, Namespaces: []string{"argocd"}, Debounce: time.Second}
	require.NoError(t, ok.Validate())
	for want, mut := range map[string]func(*Config){
		"pluginConfigMap: required":        func(c *Config) { c.PluginConfigMap = "" },
		"namespaces: at least one":         func(c *Config) { c.Namespaces = nil },
		`"*" must be the only entry`:       func(c *Config) { c.Namespaces = []string{"argocd", "*"} },
		"debounce: must be positive":       func(c *Config) { c.Debounce = 0 },
		"retryAfter: must not be negative": func(c *Config) { c.RetryAfter = -1 },
	} {
		c := ok
		mut(&c)
		err := c.Validate()
		require.Error(t, err, want)
		assert.Contains(t, err.Error(), want)
	}
}

// run starts fn (tr.Run, tr.RunLeading) and returns a function that
// cancels it and waits for it to return.
func run(fn func(ctx context.Context)) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

func TestRunWaitsForAListingThenDebounces(t *testing.T) {
	w := newWorld()
	w.inv.version = 0 // nothing listed yet: Argo CD would get a 503, nothing to refresh
	tr := w.trigger(t, func(c *Config) { c.Debounce = 100 * time.Millisecond })
	stop := run(tr.Run)
	defer stop()

	time.Sleep(300 * time.Millisecond)
	assert.Zero(t, passes(tr), "no pass before the first snapshot")

	for range 5 { // a burst of changes
		w.inv.change()
		time.Sleep(10 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return passes(tr) == 1 }, 2*time.Second, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, 1, passes(tr), "a burst makes one pass")

	for i := 2; i <= 4; i++ {
		w.inv.change()
		require.Eventually(t, func() bool { return passes(tr) == i }, 2*time.Second, 10*time.Millisecond)
	}
	assert.Equal(t, 1, w.lists(), "the informer listed ApplicationSets once; the passes read its cache")
}

// failOnce makes the first verb request on ApplicationSets fail with 503.
func (w *world) failOnce(verb string) {
	var once sync.Once
	w.dyn.PrependReactor(verb, "applicationsets", func(k8stesting.Action) (handled bool, _ runtime.Object, err error) {
		once.Do(func() { handled, err = true, apierrors.NewServiceUnavailable("apiserver restarting") })
		return handled, nil, err
	})
}

func TestRunRetriesAFailedPass(t *testing.T) {
	w := newWorld()
	w.failOnce("patch")
	tr := w.trigger(t)
	stop := run(tr.Run)
	defer stop()
	require.Eventually(t, func() bool { return testutil.ToFloat64(tr.metrics.passes.WithLabelValues("success")) == 1 }, 2*time.Second, 10*time.Millisecond,
		"the pass at start failed and was tried again without any change")
	assert.Equal(t, 1.0, testutil.ToFloat64(tr.metrics.passes.WithLabelValues("error")))
}

func TestRunWaitsForTheCache(t *testing.T) {
	w := newWorld()
	w.failOnce("list")
	tr := w.trigger(t)
	tr.syncTimeout = 10 * time.Second
	stop := run(tr.Run)
	defer stop()
	require.Eventually(t, func() bool { return len(w.patched()) == 4 }, 10*time.Second, 10*time.Millisecond,
		"the pass at start waits for the informer's listing, which is tried again")
	assert.Equal(t, 1, passes(tr), "one pass, once the cache synced")
}

// TestRefreshFromACacheThatLagsOurPatch: a cached copy older than our last
// patch may still carry the annotation (Argo CD has not reconciled the
// ApplicationSet yet): the next pass removes and sets it again, as for a
// copy that shows it. Once the cache shows that version or a later one, or
// no longer holds the ApplicationSet, the patch is forgotten.
func TestRefreshFromACacheThatLagsOurPatch(t *testing.T) {
	version := func(rv string) *unstructured.Unstructured {
		u := appSet("argocd", "acme", []any{pluginGen(plugin)}, nil)
		u.SetResourceVersion(rv)
		return u
	}
	for _, tc := range []struct {
		name    string
		cached  []*unstructured.Unstructured
		outcome string
	}{
		{name: "the cache does not show our patch", cached: []*unstructured.Unstructured{version("9")}, outcome: OutcomeRepatched},
		{name: "the cache shows it", cached: []*unstructured.Unstructured{version("10")}, outcome: OutcomePatched},
		{name: "the cache shows a later version", cached: []*unstructured.Unstructured{version("11")}, outcome: OutcomePatched},
		{name: "deleted since", outcome: OutcomePatched},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.dyn.PrependReactor("patch", "applicationsets", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, version("10"), nil // the version our patch made
			})
			tr := w.trigger(t)
			ctx := context.Background()
			outcome, err := tr.patch(ctx, version("9"))
			require.NoError(t, err)
			require.Equal(t, OutcomePatched, outcome)
			require.Equal(t, map[string]string{"argocd/acme": "10"}, tr.patched)

			tr.forgetShownPatches(tc.cached)
			a := version("9")
			if len(tc.cached) > 0 {
				a = tc.cached[0]
			}
			outcome, err = tr.patch(ctx, a)
			require.NoError(t, err)
			assert.Equal(t, tc.outcome, outcome)
		})
	}
}

func TestTransform(t *testing.T) {
	full := func(generators []any, annotations map[string]any) *unstructured.Unstructured {
		u := appSet("argocd", "a", generators, annotations)
		u.SetUID("u1")
		u.SetResourceVersion("42")
		u.SetLabels(map[string]string{"team": "a"})
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
		_ = unstructured.SetNestedField(u.Object, map[string]any{"metadata": map[string]any{"name": "{{.name}}"}}, "spec", "template")
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "app-1"}}, "status", "resources")
		return u
	}
	for _, tc := range []struct {
		name    string
		in      *unstructured.Unstructured
		uses    bool
		pending bool
	}{
		{name: "plugin, nested", in: full([]any{map[string]any{"matrix": map[string]any{"generators": []any{pluginGen(plugin)}}}}, nil), uses: true},
		{name: "plugin, refresh pending", in: full([]any{pluginGen(plugin)}, map[string]any{AnnotationRefresh: "true", "other": "x"}), uses: true, pending: true},
		{name: "another plugin", in: full([]any{pluginGen("other")}, nil)},
		{name: "no generator", in: full(nil, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Transform(plugin)(tc.in.DeepCopy())
			require.NoError(t, err)
			u := out.(*unstructured.Unstructured)
			assert.Equal(t, tc.uses, UsesPlugin(u.Object, plugin), "UsesPlugin reads the trimmed copy as the full one")
			assert.Equal(t, "a", u.GetName())
			assert.Equal(t, "argocd", u.GetNamespace())
			assert.Equal(t, "42", u.GetResourceVersion())
			assert.EqualValues(t, "u1", u.GetUID())
			_, pending := u.GetAnnotations()[AnnotationRefresh]
			assert.Equal(t, tc.pending, pending)
			assert.NotContains(t, u.GetAnnotations(), "other")
			assert.Empty(t, u.GetLabels())
			assert.Empty(t, u.GetManagedFields())
			assert.NotContains(t, u.Object, "status")
			assert.NotContains(t, u.Object["spec"], "template")
			again, err := Transform(plugin)(u.DeepCopy())
			require.NoError(t, err)
			assert.Equal(t, u, again, "idempotent")
		})
	}
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

func TestRunLeading(t *testing.T) {
	w := newWorld()
	tr := w.trigger(t)
	le := LeaderElection{Namespace: "argocd", LeaseName: "test-refresh", Identity: "me",
		LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
	stop := run(func(ctx context.Context) { assert.NoError(t, tr.RunLeading(ctx, le)) })
	require.Eventually(t, func() bool { return tr.Leader() && len(w.patched()) == 4 }, 5*time.Second, 10*time.Millisecond,
		"leads and makes the pass at start")
	assert.Equal(t, 1.0, testutil.ToFloat64(tr.metrics.leader))
	lease, err := w.kube.CoordinationV1().Leases("argocd").Get(context.Background(), "test-refresh", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "me", *lease.Spec.HolderIdentity)
	stop()
	assert.False(t, tr.Leader())
	assert.Equal(t, 0.0, testutil.ToFloat64(tr.metrics.leader))
}
