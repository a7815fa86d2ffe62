package clustersecret

// Where a pass reads the cluster Secrets of its namespace from.
//
// Made with WithInformer, the reconciler reads them from a shared informer
// instead of listing them on every pass. Three things keep that as safe as
// a fresh LIST:
//
//   - CacheTransform keeps of each Secret a Record: what the plan reads by
//     key and the digest of the content we own. The plan compares digests,
//     and an update planned from the cache reads the full Secret from the
//     API, plans it again from that and writes it with its resourceVersion;
//   - the reconciler's own writes stand in for their cached versions until
//     the informer shows them (ownWrites), so a cache that lags them plans
//     no second create, update or delete;
//   - every write stays guarded by the API server: an update carries the
//     resourceVersion read (409: read again), a delete carries the UID and
//     resourceVersion read as preconditions, a create of a taken name is
//     refused.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// NewInformerFactory returns the shared informer factory of the cluster
// Secrets of namespace: its Secrets informer lists and watches only the
// Secrets labelled argocd.argoproj.io/secret-type=cluster there, kept as Records by
// CacheTransform. The reconciler (WithInformer) and the ApplicationSet
// refresh trigger read that one cache. There is no periodic resync of the
// informer: the reconciler's own Resync compares the cache with what it
// wants, and the informer lists again whenever its watch expires.
func NewInformerFactory(client kubernetes.Interface, namespace string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = clusterSecrets.String() }),
		informers.WithTransform(CacheTransform))
}

// Option configures a Reconciler beyond its Config.
type Option func(*Reconciler) error

// WithInformer makes the reconciler read the cluster Secrets of its
// namespace from inf, a shared informer of the Secrets labelled
// argocd.argoproj.io/secret-type=cluster in that namespace (kept as Records by
// CacheTransform, or not), instead of listing them on every pass. The
// caller starts the informer; Run waits for its sync, and a pass before it
// writes nothing.
func WithInformer(inf cache.SharedIndexInformer) Option {
	return func(r *Reconciler) error {
		src := &informerSource{inf: inf, namespace: r.cfg.Namespace}
		r.own.observed = &src.observed
		see := func(obj any, deleted bool) {
			src.observed.see(obj)
			switch o := obj.(type) {
			case *Record:
				r.own.shown(o, deleted)
			case *corev1.Secret: // an informer without CacheTransform
				r.own.shown(&Record{Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion}, deleted)
			}
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { see(obj, false) },
			UpdateFunc: func(_, obj any) { see(obj, false) },
			DeleteFunc: func(obj any) { see(obj, true) },
		}); err != nil {
			return fmt.Errorf("watch the cache of cluster secrets: %w", err)
		}
		r.src = src
		return nil
	}
}

// secretSource is where a pass reads the cluster Secrets of the namespace.
type secretSource interface {
	// synced reports whether list reflects the API server (a cache that
	// has not completed its first listing does not).
	synced() bool
	// list returns the Records of the cluster Secrets, which must not be
	// modified, and a resourceVersion that they reflect at least ("" if
	// unknown).
	list(ctx context.Context) ([]*Record, string, error)
}

var clusterSecrets = labels.SelectorFromSet(labels.Set{LabelSecretType: "cluster"})

// apiSource lists the Secrets from the API server on every pass.
type apiSource struct {
	secrets   secretsClient
	namespace string
}

func (apiSource) synced() bool { return true }

func (a apiSource) list(ctx context.Context) ([]*Record, string, error) {
	l, err := a.secrets.List(ctx, metav1.ListOptions{LabelSelector: clusterSecrets.String()})
	if err != nil {
		return nil, "", fmt.Errorf("list cluster secrets in %s: %w", a.namespace, err)
	}
	out := make([]*Record, len(l.Items))
	for i := range l.Items {
		out[i] = recordOf(&l.Items[i], true)
	}
	return out, l.ResourceVersion, nil
}

// informerSource reads the Secrets from a shared informer's cache.
type informerSource struct {
	inf       cache.SharedIndexInformer
	namespace string
	// observed is the newest resourceVersion our event handler was told of:
	// handlers hear of an event after the cache applied it, in order.
	observed newest
}

func (s *informerSource) synced() bool { return s.inf.HasSynced() }

// list returns the Records of the cache; an informer without
// CacheTransform holds Secrets, which are read as Secrets from the API.
func (s *informerSource) list(context.Context) ([]*Record, string, error) {
	rv := s.observed.get() // first: the cache is at least as new as rv then
	var out []*Record
	var bad any
	err := cache.ListAllByNamespace(s.inf.GetIndexer(), s.namespace, clusterSecrets, func(obj any) {
		switch o := obj.(type) {
		case *Record:
			out = append(out, o)
		case *corev1.Secret:
			out = append(out, recordOf(o, true))
		default:
			bad = obj
		}
	})
	if err == nil && bad != nil {
		err = fmt.Errorf("unexpected %T", bad)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read cluster secrets from the cache: %w", err)
	}
	return out, rv, nil
}

// newest keeps the newest resourceVersion it sees.
type newest struct {
	mu sync.Mutex
	rv string
}

func (n *newest) see(obj any) {
	o, ok := obj.(metav1.Object) // not a DeletedFinalStateUnknown: its object may be older
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.rv == "" || atLeast(o.GetResourceVersion(), n.rv) {
		n.rv = o.GetResourceVersion()
	}
}

func (n *newest) get() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rv
}

// atLeast reports whether resourceVersion a is known to be b or newer.
// Kubernetes resourceVersions of one resource compare as integers
// (KEP-5504); one that does not parse is only equal to itself.
func atLeast(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		return a == b && a != ""
	}
	return c >= 0
}

// ownWriteTTL bounds how long a write of ours stands in for the cache: a
// watch delivers its event within moments; this only guards against a
// resourceVersion we cannot compare or an event a relist skipped.
const ownWriteTTL = time.Minute

// ownWrites are the reconciler's writes its cache has not shown yet, by
// Secret name.
type ownWrites struct {
	mu sync.Mutex
	m  map[string]ownWrite
	// observed, with an informer, is its newest resourceVersion: a write
	// the informer has already shown is not recorded.
	observed *newest
}

type ownWrite struct {
	// secret is the Record of the Secret as the API returned it; nil for a
	// delete.
	secret *Record
	// uid is the deleted Secret's.
	uid types.UID
	at  time.Time
}

// wrote records a Secret as a create or an update returned it.
func (w *ownWrites) wrote(s *corev1.Secret) {
	if s == nil || s.Name == "" {
		return
	}
	rec := recordOf(s, false)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.observed != nil && atLeast(w.observed.get(), s.ResourceVersion) {
		return // the watch event came before the response (then shown saw no write)
	}
	w.put(s.Name, ownWrite{secret: rec, at: time.Now()})
}

// deleted records the delete of the Secret name of UID uid.
func (w *ownWrites) deleted(name string, uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.put(name, ownWrite{uid: uid, at: time.Now()})
}

// put records o; w.mu is held.
func (w *ownWrites) put(name string, o ownWrite) {
	if w.m == nil {
		w.m = map[string]ownWrite{}
	}
	w.m[name] = o
}

// shown forgets our write of s's name once the cache shows it: s is the
// cache's version of the Secret, or its last version if deleted. (A pass
// forgets the writes the cache shows too; this keeps the cache and our
// writes from holding the same Secrets twice until then.)
func (w *ownWrites) shown(s *Record, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.m[s.Name]
	switch {
	case !ok:
	case o.secret == nil && deleted && s.UID == o.uid, o.secret != nil && atLeast(s.ResourceVersion, o.secret.ResourceVersion), o.shownBy(s) && !deleted:
		delete(w.m, s.Name)
	}
}

// shownBy reports whether cached, the cache's version of the Secret,
// already shows the write.
func (o ownWrite) shownBy(cached *Record) bool {
	if o.secret == nil {
		return cached.UID != o.uid // deleted, and since re-created by someone
	}
	return atLeast(cached.ResourceVersion, o.secret.ResourceVersion)
}

// view returns the Secrets of cur (read from the cache, which is at least
// as new as observed) with our writes that the cache does not show yet in
// place of their cached versions. Writes the cache shows, or that are older
// than ownWriteTTL, are forgotten. The Records must not be modified.
func (w *ownWrites) view(cur []*Record, observed string) []*Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	out := make([]*Record, 0, len(cur)+len(w.m))
	inCache := make(map[string]bool, len(w.m))
	for _, s := range cur {
		o, ok := w.m[s.Name]
		if !ok {
			out = append(out, s)
			continue
		}
		inCache[s.Name] = true
		switch {
		case o.shownBy(s) || now.Sub(o.at) > ownWriteTTL:
			delete(w.m, s.Name)
			out = append(out, s)
		case o.secret != nil:
			out = append(out, o.secret)
		} // else: our delete, not shown yet: the Secret is gone
	}
	for name, o := range w.m {
		if inCache[name] {
			continue
		}
		// absent from the cache: a delete shown, or a write not shown yet
		// unless the cache has seen its resourceVersion (then someone
		// deleted the Secret since)
		if o.secret == nil || now.Sub(o.at) > ownWriteTTL || observed != "" && atLeast(observed, o.secret.ResourceVersion) {
			delete(w.m, name)
			continue
		}
		out = append(out, o.secret)
	}
	return out
}

// The Records of the cache.
//
// The cache keeps of each Secret only a Record: what the plan and the
// ApplicationSet refresh trigger read by key (cachedLabels,
// cachedAnnotations, cachedData) and the digest of the content we own
// (ownedDigest). The plan compares that digest with the digest of the
// desired Secret; an update planned from a Record of the cache reads the
// full Secret from the API and is computed again from it (update): a
// Record is never written.

// cachedLabels, cachedAnnotations and cachedData are the keys a Record
// keeps, when set: what Plan, Owned and the countdown read, the data of
// clash detection (server) and what the refresh trigger compares (name,
// server, project), and its selector's labels.
var (
	cachedLabels      = []string{LabelSecretType, LabelManagedBy, LabelOwner, LabelSource, LabelPin}
	cachedAnnotations = []string{AnnotationCluster, AnnotationClusterID, AnnotationMissingSince, AnnotationMissingListings, AnnotationMissingListing}
	cachedData        = []string{"name", "server", "project"}
)

// ownedLabels and ownedAnnotations are the keys we set on every Secret, or
// remove (state, the countdown), besides the propagated ones.
var (
	ownedLabels      = []string{LabelSecretType, LabelManagedBy, LabelOwner, LabelSource, LabelPhase, LabelState}
	ownedAnnotations = []string{AnnotationLabels, AnnotationAnnotations, AnnotationCluster, AnnotationClusterID,
		AnnotationMissingSince, AnnotationMissingListings, AnnotationMissingListing}
)

// CacheTransform turns a cluster Secret into its Record for an informer
// cache (a cache.TransformFunc): name, namespace, uid, resourceVersion,
// the labels, annotations and data values the reconciler and the refresh
// trigger read by key, and the digest of the content we own. The rest
// (managedFields, config with its CA data and bearer token, the labels and
// annotations propagated from the cluster, people's additions) is dropped:
// the cache holds no credential. It is idempotent; anything but a Secret
// is returned as it is.
func CacheTransform(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	return recordOf(s, false), nil
}

// keep returns the entries of m at keys (nil if none), with the keys of
// keys, which are constants: one copy of each; values are interned if
// internValues is set (those that repeat across Secrets).
func keep(m map[string]string, keys []string, internValues bool) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			if internValues {
				v = intern(v)
			}
			out[k] = v
		}
	}
	return out
}

func intern(s string) string { return unique.Make(s).Value() }

// labelSets shares the label maps of Records: thousands of our
// Secrets carry the same few (secret-type, managed-by, owner, source).
var labelSets = sharedMaps{max: 4096}

// sharedMaps hands out one map per content, up to max contents.
type sharedMaps struct {
	mu  sync.Mutex
	m   map[string]map[string]string
	max int
}

// get returns the shared map of m's content, or m.
func (s *sharedMaps) get(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = appendField(appendField(b, k), m[k])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if shared, ok := s.m[string(b)]; ok {
		return shared
	}
	if len(s.m) < s.max {
		if s.m == nil {
			s.m = map[string]map[string]string{}
		}
		s.m[string(b)] = m
	}
	return m
}

// ownedDigest is the SHA-256 of the content of s that a content update
// sets (see merge): the values of the data keys we own, the labels and
// annotations we own (ownedLabels, ownedAnnotations) and those s lists as
// propagated, each present or absent. Two Secrets with equal digests need
// the same update, and a Secret whose digest equals the desired Secret's
// (which lists its propagated keys, and has no countdown) needs none: it
// carries the desired propagated lists, so every key the update sets or
// removes is one the digest covers. Labels, annotations and data keys
// people added are not covered: an update keeps them.
func ownedDigest(s *corev1.Secret) []byte {
	h := sha256.New()
	var b []byte
	for _, k := range ownedDataKeys {
		v, ok := s.Data[k]
		b = appendEntry(b[:0], 'd', k, string(v), ok)
		h.Write(b)
	}
	for _, kind := range []struct {
		tag   byte
		m     map[string]string
		fixed []string
		list  string
	}{
		{'l', s.Labels, ownedLabels, s.Annotations[AnnotationLabels]},
		{'a', s.Annotations, ownedAnnotations, s.Annotations[AnnotationAnnotations]},
	} {
		for _, k := range coveredKeys(kind.fixed, kind.list) {
			v, ok := kind.m[k]
			b = appendEntry(b[:0], kind.tag, k, v, ok)
			h.Write(b)
		}
	}
	return h.Sum(nil)
}

// coveredKeys are fixed and the keys of the comma-separated list, sorted,
// once each.
func coveredKeys(fixed []string, list string) []string {
	keys := slices.Clone(fixed)
	for k := range strings.SplitSeq(list, ",") {
		if k != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// covers reports whether the digest of want covers every label and
// annotation of want (the desired Secrets of Build list what they
// propagate): if not, the digest cannot tell whether a Secret is up to date.
func covers(want *corev1.Secret) bool {
	for _, kind := range []struct {
		m     map[string]string
		fixed []string
		list  string
	}{
		{want.Labels, ownedLabels, want.Annotations[AnnotationLabels]},
		{want.Annotations, ownedAnnotations, want.Annotations[AnnotationAnnotations]},
	} {
		keys := coveredKeys(kind.fixed, kind.list)
		for k := range kind.m {
			if _, ok := slices.BinarySearch(keys, k); !ok {
				return false
			}
		}
	}
	return true
}

// appendEntry appends an unambiguous encoding of one key of a kind.
func appendEntry(b []byte, kind byte, k, v string, present bool) []byte {
	b = appendField(append(b, kind), k)
	if !present {
		return append(b, 0)
	}
	return appendField(append(b, 1), v)
}

// appendField appends s with its length.
func appendField(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// onFresh returns fresh, the Secret as read from the API, with the prune
// countdown annotations set to countdown (none: cleared), if fresh is still
// the version old was read from; nil otherwise (it changed since the plan,
// and the next pass decides).
func onFresh(old *Record, countdown map[string]string, fresh *corev1.Secret) *corev1.Secret {
	if fresh.UID != old.UID || fresh.ResourceVersion != old.ResourceVersion {
		return nil
	}
	out := fresh.DeepCopy()
	for _, k := range countdownAnnotations {
		delete(out.Annotations, k)
	}
	if len(countdown) > 0 && out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	maps.Copy(out.Annotations, countdown)
	return out
}
