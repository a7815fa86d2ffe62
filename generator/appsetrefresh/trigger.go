// Package appsetrefresh wakes the Argo CD ApplicationSets that use our
// plugin when what they would generate may have changed.
//
// Argo CD polls a plugin generator only every requeueAfterSeconds (30
// minutes by default), and neither our answer changing nor a cluster Secret
// appearing wakes a plugin ApplicationSet. Its ApplicationSet controller
// does reconcile an ApplicationSet at once when the annotation
// argocd.argoproj.io/application-set-refresh is added (that is what its own
// git webhook handler does), and removes the annotation at the end of a
// successful reconcile.
//
// The Trigger therefore, while it holds its leader lease, and after a
// debounce:
//
//   - on every change of the inventory snapshot (a cluster joined, left or
//     changed; a source became synced, stale or fresh again), and
//   - on every change of the cluster Secrets we write (a new Secret makes a
//     destination valid: Argo CD skips an Application whose destination
//     cluster has no Secret yet, and a Secret does not wake a plugin
//     ApplicationSet),
//
// reads the ApplicationSets of the configured namespaces from an informer's
// cache (no LIST per pass), keeps those whose generators (nested matrix and
// merge ones included) reference our plugin ConfigMap (UsesPlugin), and
// merge-patches only their metadata.annotations with the refresh
// annotation. An ApplicationSet that still carries the annotation (a refresh
// is pending, or its last reconcile failed, for example while we answered
// 503: Argo CD keeps the annotation then) gets it removed and set again,
// because setting it to the value it has would be no change and would not
// wake the controller. A cached copy older than our last patch of it counts
// as still carrying the annotation.
package appsetrefresh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// AnnotationRefresh is the annotation Argo CD's ApplicationSet controller
// reacts to (common.AnnotationApplicationSetRefresh).
const AnnotationRefresh = "argocd.argoproj.io/application-set-refresh"

// AllNamespaces is the entry of Config.Namespaces, alone, that looks for
// ApplicationSets in every namespace.
const AllNamespaces = "*"

// FieldManager is the field manager of our patches.
const FieldManager = "argocd-cluster-discovery"

// ApplicationSets is the resource the trigger lists and patches.
var ApplicationSets = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applicationsets"}

// Patch outcomes, the values of the metric's outcome label.
const (
	// OutcomePatched: the annotation was added.
	OutcomePatched = "patched"
	// OutcomeRepatched: the annotation was still there; it was removed and
	// set again.
	OutcomeRepatched = "repatched"
	// OutcomeGone: the ApplicationSet was deleted meanwhile.
	OutcomeGone = "gone"
	// OutcomeFailed: the API refused or could not be reached.
	OutcomeFailed = "failed"
	// OutcomeDryRun: it would have been patched.
	OutcomeDryRun = "dry_run"
)

// Inventory is what the trigger reads from sources/inventory.
type Inventory interface {
	Snapshot() *inventory.Snapshot
	Subscribe() (<-chan struct{}, func())
}

// Result counts the outcomes of one pass.
type Result struct {
	// Matched is the number of ApplicationSets that use our plugin.
	Matched int
	// Outcomes counts them by outcome.
	Outcomes map[string]int
}

// Caches are the shared informers the trigger reads instead of listing;
// the caller creates and starts them.
type Caches struct {
	// ApplicationSets has an informer of the ApplicationSets of each of
	// Config.InformerNamespaces, trimmed by Transform.
	ApplicationSets map[string]cache.SharedIndexInformer
	// Secrets is an informer of the cluster Secrets of SecretsNamespace
	// (it may hold more than SecretsSelector selects): the reconciler's
	// cache. Required when SecretsNamespace is set.
	Secrets cache.SharedIndexInformer
}

// defaultSyncTimeout is how long a pass waits for the ApplicationSet
// caches to sync before it fails (and is tried again after RetryAfter).
const defaultSyncTimeout = 30 * time.Second

// Trigger patches the ApplicationSets that use our plugin.
type Trigger struct {
	cfg     Config
	dyn     dynamic.Interface
	kube    kubeclient.Interface
	caches  Caches
	owned   labels.Selector // SecretsSelector
	inv     Inventory
	logger  *slog.Logger
	metrics *metrics
	leader  atomic.Bool
	// syncTimeout is defaultSyncTimeout; tests shorten it.
	syncTimeout time.Duration

	mu sync.Mutex
	// patched maps namespace/name to the resourceVersion our last patch of
	// an ApplicationSet returned, until the cache shows it.
	patched map[string]string
}

// New returns a trigger that patches through dyn and reads caches. kube is
// needed only for RunLeading; it may be nil otherwise.
func New(cfg Config, dyn dynamic.Interface, kube kubeclient.Interface, caches Caches, inv Inventory, logger *slog.Logger, reg prometheus.Registerer) (*Trigger, error) {
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = 10 * time.Second
	}
	if errs := cfg.Validate(nil); len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	for _, ns := range cfg.InformerNamespaces() {
		if caches.ApplicationSets[ns] == nil {
			return nil, fmt.Errorf("no informer of the applicationsets in namespace %q", ns)
		}
	}
	owned, err := labels.Parse(cfg.SecretsSelector)
	if err != nil {
		return nil, fmt.Errorf("secrets selector: %w", err)
	}
	if cfg.SecretsNamespace != "" && caches.Secrets == nil {
		return nil, errors.New("an informer of the cluster secrets is needed to watch them")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return &Trigger{cfg: cfg, dyn: dyn, kube: kube, caches: caches, owned: owned, inv: inv, logger: logger.With("component", "appsetrefresh"),
		metrics: m, syncTimeout: defaultSyncTimeout, patched: map[string]string{}}, nil
}

// Run makes a pass now (after the debounce) if the inventory has a
// snapshot, then after every snapshot or Secret change, until ctx ends.
// Run it only while holding the leader lease. A pass that fails is tried
// again after RetryAfter.
func (t *Trigger) Run(ctx context.Context) {
	changes, cancel := t.inv.Subscribe()
	defer cancel()
	wake := make(chan struct{}, 1)
	if t.cfg.SecretsNamespace != "" {
		stop := t.watchSecrets(wake)
		defer stop()
	}
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	reason := "start"
	for {
		if !sleep(ctx, t.cfg.Debounce) {
			return
		}
		drain(changes)
		drain(wake)
		if retry != nil {
			retry.Stop()
			retry = nil
		}
		if t.inv.Snapshot().Version > 0 { // nothing was ever listed: nothing to answer yet
			if _, err := t.Refresh(ctx, reason); err != nil && ctx.Err() == nil {
				t.logger.Error("refreshing ApplicationSets failed; trying again", "error", err.Error(), "in", t.cfg.RetryAfter.String())
				retry = time.NewTimer(t.cfg.RetryAfter)
			}
		}
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C
		}
		select {
		case <-ctx.Done():
			return
		case <-changes:
			reason = "inventory changed"
		case <-wake:
			reason = "cluster Secrets changed"
		case <-retryC:
			retry, reason = nil, "retry"
		}
	}
}

// Refresh makes one pass: it patches every ApplicationSet that uses our
// plugin in the configured namespaces, as the cache shows them (it waits
// for the cache's first sync). The error joins the failures; the other
// ApplicationSets are patched all the same.
func (t *Trigger) Refresh(ctx context.Context, reason string) (Result, error) {
	res := Result{Outcomes: map[string]int{}}
	start := time.Now()
	sets, err := t.list(ctx)
	if err != nil {
		t.metrics.passes.WithLabelValues("error").Inc()
		return res, err
	}
	var errs []error
	for _, a := range sets {
		if !UsesPlugin(a.Object, t.cfg.PluginConfigMap) {
			continue
		}
		res.Matched++
		outcome, err := t.patch(ctx, a)
		res.Outcomes[outcome]++
		t.metrics.patches.WithLabelValues(outcome).Inc()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.logger.Debug("ApplicationSet refresh requested", "applicationSet", a.GetNamespace()+"/"+a.GetName(), "outcome", outcome)
	}
	err = errors.Join(errs...)
	result := "success"
	if err != nil {
		result = "error"
	}
	t.metrics.passes.WithLabelValues(result).Inc()
	log := t.logger.Info
	if res.Matched == 0 {
		log = t.logger.Debug
	}
	log("ApplicationSets refreshed", "reason", reason, "version", t.inv.Snapshot().Version, "matched", res.Matched,
		"patched", res.Outcomes[OutcomePatched]+res.Outcomes[OutcomeRepatched], "failed", res.Outcomes[OutcomeFailed],
		"dryRun", t.cfg.DryRun, "took", time.Since(start).Round(time.Millisecond).String())
	return res, err
}

// list returns the ApplicationSets of the configured namespaces from the
// caches, once they have synced. They must not be modified.
func (t *Trigger) list(ctx context.Context) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, ns := range t.cfg.InformerNamespaces() {
		inf := t.caches.ApplicationSets[ns]
		if !inf.HasSynced() {
			sctx, cancel := context.WithTimeout(ctx, t.syncTimeout)
			synced := cache.WaitForCacheSync(sctx.Done(), inf.HasSynced)
			cancel()
			if !synced {
				where := "namespace " + ns
				if ns == metav1.NamespaceAll {
					where = "all namespaces"
				}
				if ctx.Err() != nil {
					return nil, fmt.Errorf("list applicationsets in %s: %w", where, ctx.Err())
				}
				return nil, fmt.Errorf("list applicationsets in %s: not synced after %s (is Argo CD's ApplicationSet CRD installed? may we list and watch ApplicationSets?)",
					where, t.syncTimeout)
			}
		}
		for _, o := range inf.GetStore().List() {
			if a, ok := o.(*unstructured.Unstructured); ok {
				out = append(out, a)
			}
		}
	}
	t.forgetShownPatches(out)
	return out, nil
}

var (
	setPatch    = []byte(`{"metadata":{"annotations":{"` + AnnotationRefresh + `":"true"}}}`)
	removePatch = []byte(`{"metadata":{"annotations":{"` + AnnotationRefresh + `":null}}}`)
)

// patch adds the refresh annotation to a, removing it first when it is
// already there, or may be: a cached copy older than our last patch.
func (t *Trigger) patch(ctx context.Context, a *unstructured.Unstructured) (string, error) {
	if t.cfg.DryRun {
		t.logger.Info("dry run: would request a refresh", "applicationSet", a.GetNamespace()+"/"+a.GetName())
		return OutcomeDryRun, nil
	}
	client := t.dyn.Resource(ApplicationSets).Namespace(a.GetNamespace())
	opts := metav1.PatchOptions{FieldManager: FieldManager}
	outcome := OutcomePatched
	if _, pending := a.GetAnnotations()[AnnotationRefresh]; pending || t.patchNotShown(a) {
		outcome = OutcomeRepatched
		if err := lease.Check(ctx); err != nil {
			return OutcomeFailed, err
		}
		if _, err := client.Patch(ctx, a.GetName(), types.MergePatchType, removePatch, opts); err != nil {
			return t.failed(a, err)
		}
	}
	// right before each write: a leader frozen past its lease must not
	// patch when it wakes up (see lease.Check)
	if err := lease.Check(ctx); err != nil {
		return OutcomeFailed, err
	}
	patched, err := client.Patch(ctx, a.GetName(), types.MergePatchType, setPatch, opts)
	if err != nil {
		return t.failed(a, err)
	}
	if rv := patched.GetResourceVersion(); rv != "" {
		t.mu.Lock()
		t.patched[a.GetNamespace()+"/"+a.GetName()] = rv
		t.mu.Unlock()
	}
	return outcome, nil
}

// patchNotShown reports whether our last patch of a is newer than a, the
// cached copy: the annotation may then still be set.
func (t *Trigger) patchNotShown(a *unstructured.Unstructured) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	rv, ok := t.patched[a.GetNamespace()+"/"+a.GetName()]
	return ok && !atLeast(a.GetResourceVersion(), rv)
}

// forgetShownPatches forgets our patches of the ApplicationSets that the
// cache shows (at their resourceVersion or later) or no longer holds.
func (t *Trigger) forgetShownPatches(sets []*unstructured.Unstructured) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cached := make(map[string]string, len(sets))
	for _, a := range sets {
		cached[a.GetNamespace()+"/"+a.GetName()] = a.GetResourceVersion()
	}
	for key, rv := range t.patched {
		if c, ok := cached[key]; !ok || atLeast(c, rv) {
			delete(t.patched, key)
		}
	}
}

// atLeast reports whether resourceVersion a is known to be b or newer
// (they compare as integers, KEP-5504; otherwise only equal ones do).
func atLeast(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		return a == b && a != ""
	}
	return c >= 0
}

func (t *Trigger) failed(a *unstructured.Unstructured, err error) (string, error) {
	if apierrors.IsNotFound(err) {
		return OutcomeGone, nil
	}
	return OutcomeFailed, fmt.Errorf("patch applicationset %s/%s: %w", a.GetNamespace(), a.GetName(), err)
}

// sleep waits d and reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}
