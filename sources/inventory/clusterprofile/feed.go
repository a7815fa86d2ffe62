package clusterprofile

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Coalesce is how long the feed waits after a change for more before it
// delivers a book: a cold start writes thousands of objects, and each
// book is built from all of them.
const Coalesce = 100 * time.Millisecond

// Unsettled is what the feed tells a reader that has no book yet when the
// ledger it has read does not add up (see inventory.Book.Unsettled).
const Unsettled = "the ledger's ClusterProfiles do not add up to the counts its ConfigMap holds " +
	"(a save in progress or cut short, or a record that cannot be read: see the logs)"

// Watch implements inventory.Feed with informers on this installation's
// ClusterProfiles and on the ConfigMap of the source records: the first
// book once both have synced, then one after each burst of changes. The
// informers keep each object's record and nothing else. An object whose
// record cannot be read is logged and makes the book incomplete: no book
// is delivered (the follower keeps answering from its last one, or, with
// none yet, is told why after Options.UnsettledAfter: see Unsettled)
// until the object is readable
// again or deleted, as the leader's Load refuses it too. Current says
// whether the last book is still the ledger's. A burst that changed no
// record (the status writes after a save) delivers no book. The informer
// watches the objects' metadata only: the record is an annotation, and
// neither the spec nor the status is decoded.
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
	profiles, cms := l.informers(poke)
	profiles.Start(ctx.Done())
	cms.Start(ctx.Done())
	defer profiles.Shutdown()
	defer cms.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), profiles.HasSynced, cms.HasSynced) {
		return
	}
	var delivered uint64
	first := true
	// unsettled fires once, UnsettledAfter after the first look found no
	// complete book, if none came since
	unsettled := time.NewTimer(l.opts.UnsettledAfter)
	defer unsettled.Stop()
	for {
		// the version before the book: a change in between makes the book
		// look older than it is (Current waits), never newer
		rv := l.configMapVersion(cms.GetStore())
		if d := digestOf(profiles.GetStore(), cms.GetStore()); first || d != delivered {
			if wait := l.cur.settled(rv); wait > 0 {
				time.AfterFunc(wait, poke) // not yet (see Settle)
			} else if b, complete := l.bookOf(profiles.GetStore(), cms.GetStore(), logger); complete {
				fn(b)
				first, delivered = false, d
				unsettled.Stop()
				l.cur.book(rv)
			}
		} else {
			l.cur.book(rv) // nothing the book holds changed
		}
		select {
		case <-ctx.Done():
			return
		case <-unsettled.C:
			if first {
				fn(inventory.Book{Unsettled: Unsettled})
			}
			continue
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
		l.intern.reset()
	}
}

// bookOf builds the book of what the informers hold, and reports whether
// it is complete: the records of each source add up to the count, and
// their digests to the sum, the leader wrote after them (a save that
// changes records only keeps the counts all along). An incomplete book is a save in progress, or
// cut short, or objects whose events have not arrived yet (the two
// informers are two watches, in no order): serving it could leave
// clusters out of a 200. The records were decoded once, by the
// informer's transform (see profile).
func (l *Ledger) bookOf(profiles, cms cache.Store, logger *slog.Logger) (inventory.Book, bool) {
	items := profiles.List()
	b := inventory.Book{Sources: []inventory.SourceRecord{}}
	want, sums, srcs, ok := l.countsAndSources(cms, logger)
	counts, labelled := labelTallies(items)
	if !ok || !maps.Equal(counts, want) || sums != nil && !maps.Equal(labelled, sums) {
		return b, false // a save in progress
	}
	b.Sources = srcs
	b.Clusters = make([]inventory.Record, 0, len(items))
	for _, item := range items {
		p, ok := item.(*profile)
		if !ok {
			continue
		}
		if p.err != nil {
			logger.Error("clusterprofile record cannot be read: no new answer until it is fixed or the object deleted", "error", p.err.Error())
			continue
		}
		r := *p.record
		r.Acknowledged = p.ack
		r.Pin = p.pin
		b.Clusters = append(b.Clusters, r)
	}
	b.Sort()
	return b, maps.Equal(countsOf(b.Clusters), want)
}

// informers makes the feed's informers: this installation's
// ClusterProfiles (metadata only, each kept as its profile) and the
// ConfigMap of the source records. Each event pokes; a deletion and what
// the ConfigMap holds are noted for the leader's next save (see written).
func (l *Ledger) informers(poke func()) (profiles, cms *kubeclient.Informer) {
	// no index: the book is built from the whole store (a factory's
	// informer indexes every key by namespace, 10,000 keys in one set)
	profiles = &kubeclient.Informer{SharedIndexInformer: metadatainformer.NewFilteredMetadataInformer(l.meta, Resource,
		l.opts.Namespace, 0, cache.Indexers{}, func(o *metav1.ListOptions) { o.LabelSelector = l.selector() }).Informer()}
	_ = profiles.SetTransform(l.compact)
	_, _ = profiles.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(obj any) { l.written.deleted(deletedName(obj)); poke() },
	})
	cms = kubeclient.NewInformer(l.core.CoreV1().ConfigMaps(l.opts.Namespace), &corev1.ConfigMap{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", l.opts.ConfigMap).String()
		}, nil)
	sawConfigMap := func(obj any) {
		var stored []byte // deleted, or not ours
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Labels[LabelOwner] == l.opts.OwnerID {
			stored = storedSources(cm)
		}
		l.written.sawConfigMap(stored)
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			l.cur.saw(cm.ResourceVersion)
		} else {
			l.cur.saw("")
		}
		poke()
	}
	_, _ = cms.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    sawConfigMap,
		UpdateFunc: func(_, obj any) { sawConfigMap(obj) },
		DeleteFunc: func(any) { sawConfigMap(nil) },
	})
	return profiles, cms
}

// deletedName is the name of the object a delete event is about.
func deletedName(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		_, name, _ := cache.SplitMetaNamespaceKey(d.Key)
		return name
	}
	if p, ok := obj.(*profile); ok {
		return p.name
	}
	return ""
}

// digestOf sums the digests of what the informers hold: the records and
// acknowledgements of the objects (not their status) and the ConfigMap's
// source records and counts. Two equal sums are, but for a collision of
// 64-bit hashes, the same book: the status writes that follow a save
// change no record, and need no new book.
func digestOf(profiles, cms cache.Store) uint64 {
	var sum uint64
	for _, item := range profiles.List() {
		if p, ok := item.(*profile); ok {
			sum += p.digest
		}
	}
	for _, item := range cms.List() {
		if cm, ok := item.(*corev1.ConfigMap); ok {
			h := fnv.New64a()
			_, _ = h.Write([]byte(cm.Name + "\x00" + cm.Labels[LabelOwner] + "\x00" + cm.Data[SourcesKey] + "\x00" + cm.Data[CountsKey] + "\x00" + cm.Data[SumsKey]))
			sum += h.Sum64()
		}
	}
	return sum
}

// countsAndSources reads the ConfigMap: the count of each source's
// records, their sums (nil when the ConfigMap has none: an earlier
// version's) and the source records. ok is false when it cannot be read.
func (l *Ledger) countsAndSources(cms cache.Store, logger *slog.Logger) (map[string]int, map[string]uint64, []inventory.SourceRecord, bool) {
	want, srcs := map[string]int{}, []inventory.SourceRecord{}
	var sums map[string]uint64
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
		if raw, ok := cm.Data[SumsKey]; err == nil && ok {
			err = json.Unmarshal([]byte(raw), &sums)
		}
		if err != nil {
			logger.Error("source records cannot be read", "error", err.Error())
			return nil, nil, nil, false
		}
	}
	return want, sums, srcs, true
}

// labelTallies counts the objects of each source, by their source label,
// and sums their records' digests (see SumsKey).
func labelTallies(items []any) (map[string]int, map[string]uint64) {
	counts, sums := map[string]int{}, map[string]uint64{}
	for _, item := range items {
		if p, ok := item.(*profile); ok {
			counts[p.source]++
			sums[p.source] += p.sum
		}
	}
	return counts, sums
}

// profile is what the feed's informer keeps of a ClusterProfile: its name,
// namespace and resource version, its source label, and its record and
// acknowledgement decoded once per event (or why they could not be), with
// a digest of both. At 10,000 clusters the book is built from these after
// every burst of changes without decoding anything again. It is not an
// object but its accessor (GetObjectMeta), which is all the informer's
// store needs: the metadata the informer does not use, and a copy of the
// record the leader's memo holds already, were ~4 MiB at 10,000 clusters.
type profile struct {
	name, namespace, resourceVersion string
	source                           string
	// record is never modified: the leader's memo shares it (see written).
	record *inventory.Record
	ack    bool
	pin    bool
	err    error
	digest uint64
	// sum is the record's part of its source's sum (see SumsKey)
	sum uint64
}

// GetObjectMeta implements metav1.ObjectMetaAccessor, for the informer's
// keys and its updates' resource versions.
func (p *profile) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, ResourceVersion: p.resourceVersion}
}

// GetObjectKind implements runtime.Object.
func (p *profile) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object. A profile is never modified
// once made, so a copy shares the record.
func (p *profile) DeepCopyObject() runtime.Object {
	c := *p
	return &c
}

// compact turns a ClusterProfile's metadata into its profile. A record
// this process wrote (or loaded) is taken from what it wrote, not decoded
// again (see written). A record decoded here (a follower's) is kept
// without its rendering's CA: what the feed's books serve (the answer, the
// refresh trigger) never carries one, and the writers read the leader's
// own records; at 10,000 clusters with distinct CAs that is 8 MiB a
// follower does not hold. Its strings and label sets are shared with the
// records decoded in the same burst of events (see feedInterner).
func (l *Ledger) compact(obj any) (any, error) {
	u, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	a := u.GetAnnotations()
	p := &profile{name: u.GetName(), namespace: u.GetNamespace(), resourceVersion: u.GetResourceVersion(),
		source: u.GetLabels()[LabelSource], ack: a[AnnotationAcknowledge] == "true", pin: u.GetLabels()[LabelPin] == "true"}
	raw, ok := a[AnnotationRecord]
	digest := sha256.Sum256([]byte(raw))
	p.sum = recordSum(digest)
	if !ok {
		_, p.err = recordOf(u)
	} else if r, name, ok := l.written.get(digest); ok {
		p.record = r
		if name != u.GetName() || p.ack && !r.Departing() {
			// a second object holding a record of ours: not ours to
			// count; or an acknowledgement given while nothing departs,
			// which the next save resets (see annotationsOf) before a
			// later drop could take it as given for itself
			l.written.edited(u.GetName())
		}
	} else {
		l.written.edited(u.GetName())
		r, err := recordOf(u)
		if r.Rendering != nil {
			r.Rendering.CA = sources.CA{}
		}
		l.intern.record(&r, &p.namespace, &p.source)
		p.record, p.err = &r, err
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(u.GetName() + "\x00" + p.source + "\x00" + a[AnnotationRecord] + "\x00" + a[AnnotationAcknowledge] + "\x00" + u.GetLabels()[LabelPin]))
	p.digest = h.Sum64()
	return p, nil
}

// feedInterner shares the strings and label sets of the records the
// feed's informer decodes (a follower's 10,000 records held ~8 MiB more
// without it). It forgets them after each burst of events (reset): its
// tables would otherwise keep every string and label set ever decoded,
// and a record decoded in a later burst shares with its own burst only.
type feedInterner struct {
	mu sync.Mutex
	in *sources.Interner
}

// record shares the strings and maps of r's rendering, and the strings
// of more.
func (f *feedInterner) record(r *inventory.Record, more ...*string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.in == nil {
		f.in = sources.NewInterner()
	}
	internRecord(f.in, r)
	for _, s := range more {
		f.in.String(s)
	}
}

// internRecord shares the strings and maps of r's rendering, and its
// source, with the records in had before.
func internRecord(in *sources.Interner, r *inventory.Record) {
	in.String(&r.Source)
	if r.Rendering != nil {
		in.Cluster(r.Rendering)
	}
}

// reset forgets what was shared so far.
func (f *feedInterner) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.in = nil
}

var _ inventory.Feed = (*Ledger)(nil)
