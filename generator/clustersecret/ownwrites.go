package clustersecret

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

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
