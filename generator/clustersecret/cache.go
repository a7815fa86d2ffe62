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
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
)

// NewInformer returns the shared informer of the cluster Secrets of
// namespace: it lists and watches only the Secrets labelled
// argocd.argoproj.io/secret-type=cluster there, kept as Records by
// CacheTransform. The reconciler (WithInformer) and the ApplicationSet
// refresh trigger read that one cache. There is no periodic resync of the
// informer: the reconciler's own Resync compares the cache with what it
// wants, and the informer lists again whenever its watch expires.
func NewInformer(client kubeclient.Interface, namespace string) *kubeclient.Informer {
	return newInformer(client.CoreV1().Secrets(namespace))
}

// newInformer is NewInformer on what c lists and watches.
func newInformer(c kubeclient.Lister[*corev1.SecretList]) *kubeclient.Informer {
	return kubeclient.NewInformer(c, &corev1.Secret{},
		func(o *metav1.ListOptions) { o.LabelSelector = clusterSecrets.String() }, CacheTransform)
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

// list returns the Records of the cache in the reconciler's namespace (the
// store is read whole: NewInformer's informer has no index, and watches
// that namespace only); an informer without CacheTransform holds Secrets,
// which are read as Secrets from the API.
func (s *informerSource) list(context.Context) ([]*Record, string, error) {
	rv := s.observed.get() // first: the cache is at least as new as rv then
	var out []*Record
	var bad any
	err := cache.ListAll(s.inf.GetStore(), clusterSecrets, func(obj any) {
		switch o := obj.(type) {
		case *Record:
			if o.Namespace == s.namespace {
				out = append(out, o)
			}
		case *corev1.Secret:
			if o.Namespace == s.namespace {
				out = append(out, recordOf(o, true))
			}
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
