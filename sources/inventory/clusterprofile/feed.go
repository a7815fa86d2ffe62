package clusterprofile

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Coalesce is how long the feed waits after a change for more before it
// delivers a book: a cold start writes thousands of objects, and each
// book is built from all of them.
const Coalesce = 100 * time.Millisecond

// Watch implements inventory.Feed with informers on this installation's
// ClusterProfiles and on the ConfigMap of the source records: the first
// book once both have synced, then one after each burst of changes. The
// informers keep each object's record and nothing else. An object whose
// record cannot be read is left out and logged.
func (l *Ledger) Watch(ctx context.Context, fn func(inventory.Book)) {
	l.WatchWithLogger(ctx, slog.New(slog.DiscardHandler), fn)
}

// WatchWithLogger is Watch, logging records it cannot read to logger.
func (l *Ledger) WatchWithLogger(ctx context.Context, logger *slog.Logger, fn func(inventory.Book)) {
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(l.dyn, 0, l.opts.Namespace,
		func(o *metav1.ListOptions) { o.LabelSelector = l.selector() })
	profiles := dyn.ForResource(Resource).Informer()
	_ = profiles.SetTransform(compact)
	_, _ = profiles.AddEventHandler(handler)
	core := informers.NewSharedInformerFactoryWithOptions(l.core, 0, informers.WithNamespace(l.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", l.opts.ConfigMap).String()
		}))
	cms := core.Core().V1().ConfigMaps().Informer()
	_, _ = cms.AddEventHandler(handler)
	dyn.Start(ctx.Done())
	core.Start(ctx.Done())
	defer dyn.Shutdown()
	defer core.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), profiles.HasSynced, cms.HasSynced) {
		return
	}
	for {
		if b, complete := l.bookOf(profiles.GetStore(), cms.GetStore(), logger); complete {
			fn(b)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		t := time.NewTimer(Coalesce)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		select { // changes during the wait are in the book about to be built
		case <-changed:
		default:
		}
	}
}

// bookOf builds the book of what the informers hold, and reports whether
// it is complete: the records of each source add up to the count the
// leader wrote after them. An incomplete book is a save in progress, or
// cut short, or objects whose events have not arrived yet (the two
// informers are two watches, in no order): serving it could leave
// clusters out of a 200.
func (l *Ledger) bookOf(profiles, cms cache.Store, logger *slog.Logger) (inventory.Book, bool) {
	items := profiles.List()
	b := inventory.Book{Sources: []inventory.SourceRecord{}}
	want, srcs, ok := l.countsAndSources(cms, logger)
	if !ok || !maps.Equal(labelCounts(items), want) {
		return b, false // a save in progress: not worth decoding every record
	}
	b.Sources = srcs
	b.Clusters = make([]inventory.Record, 0, len(items))
	for _, item := range items {
		obj, ok := item.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		r, err := recordOf(obj)
		if err != nil {
			logger.Error("clusterprofile left out of the answer: its record cannot be read", "error", err.Error())
			continue
		}
		b.Clusters = append(b.Clusters, r)
	}
	b.Sort()
	return b, maps.Equal(countsOf(b.Clusters), want)
}

// countsAndSources reads the ConfigMap: the count of each source's records
// and the source records. ok is false when it cannot be read.
func (l *Ledger) countsAndSources(cms cache.Store, logger *slog.Logger) (map[string]int, []inventory.SourceRecord, bool) {
	want, srcs := map[string]int{}, []inventory.SourceRecord{}
	for _, item := range cms.List() {
		cm, ok := item.(*corev1.ConfigMap)
		if !ok || cm.Name != l.opts.ConfigMap || cm.Labels[LabelOwner] != l.opts.OwnerID {
			continue
		}
		var err error
		srcs, err = decodeSources(cm)
		if err == nil && cm.Data[CountsKey] != "" {
			err = json.Unmarshal([]byte(cm.Data[CountsKey]), &want)
		}
		if err != nil {
			logger.Error("source records cannot be read", "error", err.Error())
			return nil, nil, false
		}
	}
	return want, srcs, true
}

// labelCounts counts the objects of each source by their source label,
// without decoding their records.
func labelCounts(items []any) map[string]int {
	out := map[string]int{}
	for _, item := range items {
		if obj, ok := item.(*unstructured.Unstructured); ok {
			out[obj.GetLabels()[LabelSource]]++
		}
	}
	return out
}

// compact keeps of a ClusterProfile what the feed reads: its name,
// namespace, resource version, source label, record and acknowledgement.
func compact(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetLabels(map[string]string{LabelSource: u.GetLabels()[LabelSource]})
	kept := map[string]string{}
	for _, k := range []string{AnnotationRecord, AnnotationAcknowledge} {
		if v, ok := u.GetAnnotations()[k]; ok {
			kept[k] = v
		}
	}
	out.SetAnnotations(kept)
	return out, nil
}

var _ inventory.Feed = (*Ledger)(nil)
