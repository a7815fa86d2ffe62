package clustersecret

import (
	"crypto/sha256"
	"maps"
	"slices"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Record is what a pass reads of a cluster Secret: its name, namespace,
// uid and resourceVersion, the labels, annotations and data values the plan
// and the ApplicationSet refresh trigger read by key (cachedLabels and the
// annotations and data of the plan), and the digest of the content we own
// (ownedDigest). CacheTransform turns the Secrets of the informer's cache
// into Records, which hold no credential; a Record read from the API also
// holds the full Secret (Full), which an update then starts from.
//
// A Record is a metav1.Object and a runtime.Object, which is what an
// informer's store and its event handlers need; only the fields above are
// kept, and the setters of the others do nothing. Its label map may be
// shared with other Records: it must not be modified.
type Record struct {
	Name, Namespace string
	UID             types.UID
	ResourceVersion string

	labels map[string]string
	// cluster and clusterID are the annotations AnnotationCluster and
	// AnnotationClusterID ("" when absent).
	cluster, clusterID string
	// countdown holds the prune countdown annotations that are set (nil
	// when none is: the usual case).
	countdown map[string]string
	// agent: the Secret is an agent's (sources.IsAgentSecret), never ours
	// whatever its labels say.
	agent bool
	// name, server and project are the data values of those keys.
	name, server, project string
	digest                [sha256.Size]byte
	// full is the Secret the Record was read from, when read from the API
	// (nil in the cache); it must not be modified.
	full *corev1.Secret
}

// countdownAnnotations are the annotations of a prune countdown.
var countdownAnnotations = []string{AnnotationMissingSince, AnnotationMissingListings, AnnotationMissingListing}

// recordOf returns the Record of s; with full set it holds s, which must
// not be modified after.
func recordOf(s *corev1.Secret, full bool) *Record {
	r := &Record{Name: s.Name, Namespace: intern(s.Namespace), UID: s.UID, ResourceVersion: s.ResourceVersion,
		labels:    labelSets.get(keep(s.Labels, cachedLabels, true)),
		cluster:   s.Annotations[AnnotationCluster],
		clusterID: s.Annotations[AnnotationClusterID],
		countdown: keep(s.Annotations, countdownAnnotations, false),
		name:      string(s.Data["name"]), server: string(s.Data["server"]), project: string(s.Data["project"]),
		agent: sources.IsAgentSecret(s.Labels, s.Annotations),
	}
	if r.clusterID == r.cluster { // one string for equal values
		r.clusterID = r.cluster
	}
	if r.name == r.cluster {
		r.name = r.cluster
	}
	copy(r.digest[:], ownedDigest(s))
	if full {
		r.full = s
	}
	return r
}

// Full returns the Secret the Record was read from, or nil if it comes
// from the cache.
func (r *Record) Full() *corev1.Secret { return r.full }

// Label returns the label k if the Record keeps it.
func (r *Record) Label(k string) string { return r.labels[k] }

// Annotation returns the annotation k if the Record keeps it.
func (r *Record) Annotation(k string) (string, bool) {
	switch k {
	case AnnotationCluster:
		return r.cluster, r.cluster != ""
	case AnnotationClusterID:
		return r.clusterID, r.clusterID != ""
	}
	v, ok := r.countdown[k]
	return v, ok
}

// Value returns the data value of key "name", "server" or "project" ("" for
// another key, or if absent).
func (r *Record) Value(k string) string {
	switch k {
	case "name":
		return r.name
	case "server":
		return r.server
	case "project":
		return r.project
	}
	return ""
}

// owned reports whether r carries our managed-by label and owner id, and
// is no agent's (see Owned).
func (r *Record) owned(ownerID string) bool {
	return r.labels[LabelManagedBy] == ManagedByValue && r.labels[LabelOwner] == ownerID && ownerID != "" && !r.agent
}

// The metav1.Object of a Record.

// GetNamespace implements metav1.Object.
func (r *Record) GetNamespace() string { return r.Namespace }

// SetNamespace implements metav1.Object.
func (r *Record) SetNamespace(ns string) { r.Namespace = ns }

// GetName implements metav1.Object.
func (r *Record) GetName() string { return r.Name }

// SetName implements metav1.Object.
func (r *Record) SetName(name string) { r.Name = name }

// GetGenerateName implements metav1.Object.
func (r *Record) GetGenerateName() string { return "" }

// SetGenerateName implements metav1.Object.
func (r *Record) SetGenerateName(string) {}

// GetUID implements metav1.Object.
func (r *Record) GetUID() types.UID { return r.UID }

// SetUID implements metav1.Object.
func (r *Record) SetUID(uid types.UID) { r.UID = uid }

// GetResourceVersion implements metav1.Object.
func (r *Record) GetResourceVersion() string { return r.ResourceVersion }

// SetResourceVersion implements metav1.Object.
func (r *Record) SetResourceVersion(v string) { r.ResourceVersion = v }

// GetGeneration implements metav1.Object.
func (r *Record) GetGeneration() int64 { return 0 }

// SetGeneration implements metav1.Object.
func (r *Record) SetGeneration(int64) {}

// GetSelfLink implements metav1.Object.
func (r *Record) GetSelfLink() string { return "" }

// SetSelfLink implements metav1.Object.
func (r *Record) SetSelfLink(string) {}

// GetCreationTimestamp implements metav1.Object.
func (r *Record) GetCreationTimestamp() metav1.Time { return metav1.Time{} }

// SetCreationTimestamp implements metav1.Object.
func (r *Record) SetCreationTimestamp(metav1.Time) {}

// GetDeletionTimestamp implements metav1.Object.
func (r *Record) GetDeletionTimestamp() *metav1.Time { return nil }

// SetDeletionTimestamp implements metav1.Object.
func (r *Record) SetDeletionTimestamp(*metav1.Time) {}

// GetDeletionGracePeriodSeconds implements metav1.Object.
func (r *Record) GetDeletionGracePeriodSeconds() *int64 { return nil }

// SetDeletionGracePeriodSeconds implements metav1.Object.
func (r *Record) SetDeletionGracePeriodSeconds(*int64) {}

// GetLabels implements metav1.Object.
func (r *Record) GetLabels() map[string]string { return r.labels }

// SetLabels implements metav1.Object.
func (r *Record) SetLabels(l map[string]string) { r.labels = l }

// GetFinalizers implements metav1.Object.
func (r *Record) GetFinalizers() []string { return nil }

// SetFinalizers implements metav1.Object.
func (r *Record) SetFinalizers([]string) {}

// GetOwnerReferences implements metav1.Object.
func (r *Record) GetOwnerReferences() []metav1.OwnerReference { return nil }

// SetOwnerReferences implements metav1.Object.
func (r *Record) SetOwnerReferences([]metav1.OwnerReference) {}

// GetManagedFields implements metav1.Object.
func (r *Record) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }

// SetManagedFields implements metav1.Object.
func (r *Record) SetManagedFields([]metav1.ManagedFieldsEntry) {}

// GetAnnotations returns a new map of the annotations the Record keeps.
func (r *Record) GetAnnotations() map[string]string {
	out := maps.Clone(r.countdown)
	if out == nil {
		out = map[string]string{}
	}
	if r.cluster != "" {
		out[AnnotationCluster] = r.cluster
	}
	if r.clusterID != "" {
		out[AnnotationClusterID] = r.clusterID
	}
	return out
}

// SetAnnotations keeps of a the annotations a Record keeps.
func (r *Record) SetAnnotations(a map[string]string) {
	r.cluster, r.clusterID, r.countdown = a[AnnotationCluster], a[AnnotationClusterID], keep(a, countdownAnnotations, false)
}

// GetObjectKind returns an empty kind: a Record is never encoded.
func (r *Record) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns a copy of r (its maps and full Secret, which are
// never modified, are shared).
func (r *Record) DeepCopyObject() runtime.Object {
	c := *r
	return &c
}

var (
	_ metav1.Object  = (*Record)(nil)
	_ runtime.Object = (*Record)(nil)
)

// The Records of the cache.
//
// The cache keeps of each Secret only a Record: what the plan and the
// ApplicationSet refresh trigger read by key (cachedLabels and the
// annotations and data of the plan) and the digest of the content we own
// (ownedDigest). The plan compares that digest with the digest of the
// desired Secret; an update planned from a Record of the cache reads the
// full Secret from the API and is computed again from it (update): a
// Record is never written.

// cachedLabels, cachedAnnotations and cachedData are the keys a Record
// keeps, when set: what Plan, Owned and the countdown read, the data of
// clash detection (server) and what the refresh trigger compares (name,
// server, project), and its selector's labels.
var (
	cachedLabels = []string{LabelSecretType, LabelManagedBy, LabelOwner, LabelSource, LabelPin}
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
