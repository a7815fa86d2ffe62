package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// argoNS is where the service writes its Secrets and where the
	// ApplicationSet using its plugin lives.
	argoNS = "argocd"
	// pluginConfigMap is the plugin's configMapRef, as the chart names it.
	pluginConfigMap = "argocd-cluster-discovery"
	// clusterSecretLabel selects Argo CD cluster Secrets.
	clusterSecretLabel = "argocd.argoproj.io/secret-type=cluster"
)

var applicationSets = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applicationsets"}

// kubeEnv is a real kube-apiserver and etcd (envtest, from
// KUBEBUILDER_ASSETS) with Argo CD's CRDs, Argo CD's namespace and one
// ApplicationSet using the plugin, as the refresh trigger finds them in a
// cluster.
type kubeEnv struct {
	env  *envtest.Environment
	kube kubernetes.Interface
	dyn  dynamic.Interface
	// meta reads objects' metadata only (protobuf): the watches that time
	// the cold start cost the apiserver and loadgen as little as they can
	meta       metadata.Interface
	kubeconfig string
}

// startKube starts the control plane from assets (which also holds
// argocd-crds/, see .ci/testbin) and writes an admin kubeconfig into dir.
func startKube(ctx context.Context, assets, dir string) (*kubeEnv, error) {
	crds := filepath.Join(assets, "argocd-crds")
	// the ClusterProfile CRD the chart installs: the ledger of the
	// chart's default (ledger.kind kubernetes)
	profileCRD := filepath.Join("deploy", "helm", "argocd-cluster-discovery", "files", "clusterprofile-crd.yaml")
	for _, p := range []string{filepath.Join(assets, "kube-apiserver"), filepath.Join(assets, "etcd"), crds, profileCRD} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s: %w (run `make testbin`)", p, err)
		}
	}
	k := &kubeEnv{env: &envtest.Environment{BinaryAssetsDirectory: assets, CRDDirectoryPaths: []string{crds, profileCRD},
		ErrorIfCRDPathMissing: true, ControlPlaneStopTimeout: 30 * time.Second,
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 2 * time.Minute}}}
	cfg, err := k.env.Start()
	if err != nil {
		_ = k.env.Stop() // a start that failed after the control plane came up leaves it running
		return nil, fmt.Errorf("start kube-apiserver and etcd: %w", err)
	}
	fail := func(err error) (*kubeEnv, error) {
		k.stop()
		return nil, err
	}
	k.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(k.kubeconfig, k.env.KubeConfig, 0o600); err != nil {
		return fail(err)
	}
	if k.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return fail(err)
	}
	if k.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return fail(err)
	}
	if k.meta, err = metadata.NewForConfig(cfg); err != nil {
		return fail(err)
	}
	dyn := k.dyn
	if _, err := k.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argoNS}}, metav1.CreateOptions{}); err != nil {
		return fail(fmt.Errorf("create namespace %s: %w", argoNS, err))
	}
	appSet := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
		"metadata": map[string]any{"name": "load", "namespace": argoNS},
		"spec": map[string]any{
			"goTemplate": true,
			"generators": []any{map[string]any{"plugin": map[string]any{
				"configMapRef": map[string]any{"name": pluginConfigMap},
				"input":        map[string]any{"parameters": map[string]any{"tenant": tenantName(0)}},
			}}},
			"template": map[string]any{
				"metadata": map[string]any{"name": "load-{{ .nameNormalized }}"},
				"spec": map[string]any{
					"project":     "default",
					"source":      map[string]any{"repoURL": "https://example.invalid/repo.git", "path": "app"},
					"destination": map[string]any{"server": "{{ .server }}", "namespace": "app"},
				},
			},
		},
	}}
	if _, err := dyn.Resource(applicationSets).Namespace(argoNS).Create(ctx, appSet, metav1.CreateOptions{}); err != nil {
		return fail(fmt.Errorf("create the ApplicationSet: %w", err))
	}
	return k, nil
}

func (k *kubeEnv) stop() {
	if k != nil && k.env != nil {
		_ = k.env.Stop()
	}
}

// requestCounts reads the apiserver's own count of the requests it served
// (apiserver_request_total) for Secrets, ApplicationSets, ClusterProfiles
// and ConfigMaps (the ledger), by "VERB resource". Counted on the server's side, so it includes every client:
// during a steady-state window the service is the only one writing or
// listing (loadgen's own watch is one WATCH, counted when it ends).
func (k *kubeEnv) requestCounts(ctx context.Context) (map[string]float64, error) {
	raw, err := k.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scrape the apiserver's /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse the apiserver's /metrics: %w", err)
	}
	fam, ok := families["apiserver_request_total"]
	if !ok {
		return nil, fmt.Errorf("the apiserver's /metrics has no apiserver_request_total")
	}
	out := map[string]float64{}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch labels["resource"] {
		case "secrets", "applicationsets", "clusterprofiles", "configmaps":
			out[labels["verb"]+" "+labels["resource"]] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

// seenWatch records when each object of a watch opened before the
// service starts was first seen in the state it waits for.
type seenWatch struct {
	mu    sync.Mutex
	what  string
	first map[string]time.Time
	last  time.Time
	w     *watchtools.RetryWatcher
}

// watchSeen watches what lw lists from resourceVersion rv and records,
// for each object, when seen first reports it (by name).
func watchSeen(ctx context.Context, what, rv string, lw cache.WatcherWithContext, seen func(watch.Event) (string, bool)) (*seenWatch, error) {
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", what, err)
	}
	sw := &seenWatch{what: what, first: map[string]time.Time{}, w: rw}
	go func() {
		for ev := range rw.ResultChan() {
			name, ok := seen(ev)
			if !ok {
				continue
			}
			now := time.Now()
			sw.mu.Lock()
			if _, done := sw.first[name]; !done {
				sw.first[name], sw.last = now, now
			}
			sw.mu.Unlock()
		}
	}()
	return sw, nil
}

// watchSecrets records when each cluster Secret was first seen.
func (k *kubeEnv) watchSecrets(ctx context.Context) (*seenWatch, error) {
	secrets := k.meta.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(argoNS)
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: clusterSecretLabel})
	if err != nil {
		return nil, fmt.Errorf("list cluster Secrets: %w", err)
	}
	return watchSeen(ctx, "cluster Secrets", list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = clusterSecretLabel
			return secrets.Watch(ctx, o)
		},
	}, func(ev watch.Event) (string, bool) {
		m, ok := ev.Object.(*metav1.PartialObjectMetadata)
		if !ok {
			return "", false
		}
		return m.GetName(), ev.Type == watch.Added
	})
}

// clusterProfiles is the resource of the service's ledger.
var clusterProfiles = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Resource: "clusterprofiles"}

// watchLedger records when each ClusterProfile was first seen with its
// status written (a managed fields entry of the status subresource): the
// ledger is written in full once every cluster's is.
func (k *kubeEnv) watchLedger(ctx context.Context) (*seenWatch, error) {
	profiles := k.meta.Resource(clusterProfiles).Namespace(argoNS)
	list, err := profiles.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list clusterprofiles: %w", err)
	}
	return watchSeen(ctx, "ClusterProfiles with a status", list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return profiles.Watch(ctx, o)
		},
	}, func(ev watch.Event) (string, bool) {
		m, ok := ev.Object.(*metav1.PartialObjectMetadata)
		if !ok || ev.Type == watch.Deleted {
			return "", false
		}
		return m.GetName(), statusWritten(m)
	})
}

// statusWritten says whether m's status was written: the apiserver keeps
// a managed fields entry for each manager of the status subresource.
func statusWritten(m metav1.Object) bool {
	for _, f := range m.GetManagedFields() {
		if f.Subresource == "status" {
			return true
		}
	}
	return false
}

// waitFor returns the time the n-th object was seen, once n have been.
func (sw *seenWatch) waitFor(n int, timeout time.Duration, exited <-chan struct{}) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		sw.mu.Lock()
		got, last := len(sw.first), sw.last
		sw.mu.Unlock()
		if got >= n {
			return last, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%d of %d %s after %s", got, n, sw.what, timeout)
		}
		select {
		case <-exited:
			return time.Time{}, fmt.Errorf("the service exited with %d of %d %s", got, n, sw.what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (sw *seenWatch) stop() { sw.w.Stop() }

// kubeConfigSection is the service configuration's secrets,
// applicationSetRefresh and ledger sections, as the chart deploys them:
// both on, the ledger in ClusterProfiles, every other setting left to the
// binary's defaults (the chart's), except resync when given.
func kubeConfigSection(kubeconfig string, resync time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "secrets:\n  enabled: true\n  namespace: %s\n  ownerID: loadgen\n  kubeconfig: %q\n", argoNS, kubeconfig)
	if resync > 0 {
		fmt.Fprintf(&b, "  resync: %s\n", resync)
	}
	fmt.Fprintf(&b, "applicationSetRefresh:\n  enabled: true\n  pluginConfigMap: %s\n  namespaces: [%s]\n", pluginConfigMap, argoNS)
	fmt.Fprintf(&b, "ledger:\n  kind: kubernetes\n  namespace: %s\n", argoNS)
	return b.String()
}

// sumCounts is after minus before, without the zero differences.
func sumCounts(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// serviceCounter reads one counter (summed over its labels matching
// match) from the service's /metrics.
func (s *service) serviceCounter(name string, match map[string]string) (float64, error) {
	families, err := s.metrics()
	if err != nil {
		return 0, err
	}
	var sum float64
next:
	for _, m := range families[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if want, ok := match[l.GetName()]; ok && want != l.GetValue() {
				continue next
			}
		}
		sum += m.GetCounter().GetValue()
	}
	return sum, nil
}
