package appsetrefresh

// The fake world of the trigger tests: an inventory, ApplicationSets on a
// fake API server, and the informers the trigger reads.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

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

// failOnce makes the first verb request on ApplicationSets fail with 503.
func (w *world) failOnce(verb string) {
	var once sync.Once
	w.dyn.PrependReactor(verb, "applicationsets", func(k8stesting.Action) (handled bool, _ runtime.Object, err error) {
		once.Do(func() { handled, err = true, apierrors.NewServiceUnavailable("apiserver restarting") })
		return handled, nil, err
	})
}
