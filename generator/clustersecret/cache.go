package clustersecret

// Where a pass reads the cluster Secrets of its namespace from.
//
// Made with WithInformer, the reconciler reads them from a shared informer
// instead of listing them on every pass. Three things keep that as safe as
// a fresh LIST:
//
//   - CacheTransform drops managedFields and replaces each Secret's config
//     (CA data, bearer token) by its digest: the plan compares digests, a
//     content update writes the full desired data, and an update that keeps
//     the data (a prune countdown) reads the full Secret from the API first;
//   - the reconciler's own writes stand in for their cached versions until
//     the informer shows them (ownWrites), so a cache that lags them plans
//     no second create, update or delete;
//   - every write stays guarded by the API server: an update carries the
//     resourceVersion read (409: read again), a delete carries the UID and
//     resourceVersion read as preconditions, a create of a taken name is
//     refused.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
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
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// NewInformerFactory returns the shared informer factory of the cluster
// Secrets of namespace: its Secrets informer lists and watches only the
// Secrets labelled argocd.argoproj.io/secret-type=cluster there, trimmed by
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
// argocd.argoproj.io/secret-type=cluster in that namespace (trimmed by
// CacheTransform, or not), instead of listing them on every pass. The
// caller starts the informer; Run waits for its sync, and a pass before it
// writes nothing.
func WithInformer(inf cache.SharedIndexInformer) Option {
	return func(r *Reconciler) error {
		src := &informerSource{inf: inf, lister: corev1listers.NewSecretLister(inf.GetIndexer()).Secrets(r.cfg.Namespace)}
		r.own.observed = &src.observed
		see := func(obj any, deleted bool) {
			src.observed.see(obj)
			if s, ok := obj.(*corev1.Secret); ok {
				r.own.shown(s, deleted)
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
	// list returns the cluster Secrets, which must not be modified, and a
	// resourceVersion that they reflect at least ("" if unknown).
	list(ctx context.Context) ([]*corev1.Secret, string, error)
}

var clusterSecrets = labels.SelectorFromSet(labels.Set{LabelSecretType: "cluster"})

// apiSource lists the Secrets from the API server on every pass.
type apiSource struct {
	secrets   secretsClient
	namespace string
}

func (apiSource) synced() bool { return true }

func (a apiSource) list(ctx context.Context) ([]*corev1.Secret, string, error) {
	l, err := a.secrets.List(ctx, metav1.ListOptions{LabelSelector: clusterSecrets.String()})
	if err != nil {
		return nil, "", fmt.Errorf("list cluster secrets in %s: %w", a.namespace, err)
	}
	out := make([]*corev1.Secret, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, l.ResourceVersion, nil
}

// informerSource reads the Secrets from a shared informer's cache.
type informerSource struct {
	inf    cache.SharedIndexInformer
	lister corev1listers.SecretNamespaceLister
	// observed is the newest resourceVersion our event handler was told of:
	// handlers hear of an event after the cache applied it, in order.
	observed newest
}

func (s *informerSource) synced() bool { return s.inf.HasSynced() }

func (s *informerSource) list(context.Context) ([]*corev1.Secret, string, error) {
	rv := s.observed.get() // first: the cache is at least as new as rv then
	l, err := s.lister.List(clusterSecrets)
	if err != nil {
		return nil, "", fmt.Errorf("read cluster secrets from the cache: %w", err)
	}
	return l, rv, nil
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
	// secret is the Secret as the API returned it, trimmed by
	// CacheTransform; nil for a delete.
	secret *corev1.Secret
	// uid is the deleted Secret's.
	uid types.UID
	at  time.Time
}

// wrote records a Secret as a create or an update returned it.
func (w *ownWrites) wrote(s *corev1.Secret) {
	if s == nil || s.Name == "" {
		return
	}
	trimmed, _ := CacheTransform(s) // s is ours: it may be trimmed in place
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.observed != nil && atLeast(w.observed.get(), s.ResourceVersion) {
		return // the watch event came before the response (then shown saw no write)
	}
	w.put(s.Name, ownWrite{secret: trimmed.(*corev1.Secret), at: time.Now()})
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
func (w *ownWrites) shown(s *corev1.Secret, deleted bool) {
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
func (o ownWrite) shownBy(cached *corev1.Secret) bool {
	if o.secret == nil {
		return cached.UID != o.uid // deleted, and since re-created by someone
	}
	return atLeast(cached.ResourceVersion, o.secret.ResourceVersion)
}

// view returns the Secrets of cur (read from the cache, which is at least
// as new as observed) with our writes that the cache does not show yet in
// place of their cached versions. Writes the cache shows, or that are older
// than ownWriteTTL, are forgotten. The Secrets are shallow copies: their
// maps must not be modified.
func (w *ownWrites) view(cur []*corev1.Secret, observed string) []corev1.Secret {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	out := make([]corev1.Secret, 0, len(cur)+len(w.m))
	inCache := make(map[string]bool, len(w.m))
	for _, s := range cur {
		o, ok := w.m[s.Name]
		if !ok {
			out = append(out, *s)
			continue
		}
		inCache[s.Name] = true
		switch {
		case o.shownBy(s) || now.Sub(o.at) > ownWriteTTL:
			delete(w.m, s.Name)
			out = append(out, *s)
		case o.secret != nil:
			out = append(out, *o.secret)
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
		out = append(out, *o.secret)
	}
	return out
}

// The digests of credential-bearing values in the cache.

// digestPrefix starts a value that CacheTransform replaced by its SHA-256.
// Values read from or written to the API never start with a NUL byte in
// practice (config is JSON), and a digest is never written: see update.
const digestPrefix = "\x00sha256:"

// digestedKeys are the data keys whose values the cache holds as digests.
var digestedKeys = []string{"config"}

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// CacheTransform trims a cluster Secret for an informer cache (a
// cache.TransformFunc): it drops managedFields, replaces the config value
// (CA data, bearer token: 2–3 KB) by its SHA-256 digest, and drops the
// kubectl.kubernetes.io/last-applied-configuration annotation (a copy of
// the data) of Secrets we do not manage. The reconciler compares digests
// where it compares values, and reads a Secret from the API before an
// update that keeps its data. The cache then holds no credential. It is
// idempotent and changes obj in place, as client-go allows.
func CacheTransform(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	s.ManagedFields = nil
	for _, k := range digestedKeys {
		if v, ok := s.Data[k]; ok && !isDigest(v) {
			s.Data[k] = digest(v)
		}
	}
	if s.Labels[LabelManagedBy] != ManagedByValue {
		delete(s.Annotations, lastApplied)
	}
	// the keys, label values, namespace and type repeat across thousands of
	// Secrets: one copy of each
	s.Namespace, s.Type = intern(s.Namespace), corev1.SecretType(intern(string(s.Type)))
	s.Labels = internMap(s.Labels, true)
	s.Annotations = internMap(s.Annotations, false)
	if len(s.Data) > 0 {
		data := make(map[string][]byte, len(s.Data))
		for k, v := range s.Data {
			data[intern(k)] = v
		}
		s.Data = data
	}
	return s, nil
}

func intern(s string) string { return unique.Make(s).Value() }

// internMap returns m with interned keys, and values if values is set.
func internMap(m map[string]string, values bool) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if values {
			v = intern(v)
		}
		out[intern(k)] = v
	}
	return out
}

func isDigest(v []byte) bool {
	return len(v) == len(digestPrefix)+sha256.Size && string(v[:len(digestPrefix)]) == digestPrefix
}

func digest(v []byte) []byte {
	sum := sha256.Sum256(v)
	return append([]byte(digestPrefix), sum[:]...)
}

// sameValue compares two data values, either of which may be a digest.
func sameValue(a, b []byte) bool {
	switch da, db := isDigest(a), isDigest(b); {
	case da == db:
		return bytes.Equal(a, b)
	case da:
		return bytes.Equal(a, digest(b))
	default:
		return bytes.Equal(digest(a), b)
	}
}

func hasDigest(s *corev1.Secret) bool {
	for _, v := range s.Data {
		if isDigest(v) {
			return true
		}
	}
	return false
}

// withFullData returns a copy of next with the values the cache replaced by
// digests taken from full, the Secret as read from the API; nil if full is
// not the version next was computed from.
func withFullData(next, full *corev1.Secret) *corev1.Secret {
	if full.UID != next.UID || full.ResourceVersion != next.ResourceVersion {
		return nil
	}
	out := next.DeepCopy()
	for k, v := range out.Data {
		if !isDigest(v) {
			continue
		}
		fv, ok := full.Data[k]
		if !ok || !sameValue(v, fv) {
			return nil
		}
		out.Data[k] = fv
	}
	return out
}
