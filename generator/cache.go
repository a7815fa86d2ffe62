package generator

import (
	"sync"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// maxCachedBody bounds the request bodies used as cache keys; larger
// bodies are still answered from the per-filter cache.
const maxCachedBody = 4 << 10

// maxSelectionBytes bounds the selections held at once (runBytes per
// run, and the bytes of the filter keyed). A selection of n clusters has
// at most n runs (every other cluster of the snapshot), so at 10,000
// clusters one takes at most ~40 KB and a client sending many distinct
// filters cannot make the cache grow without bound.
const maxSelectionBytes = 8 << 20

// responseCache holds the answers for one snapshot version: the snapshot's
// encoding, built once by the first request that needs it, and the
// selections of it, keyed both by the raw request body (a hit skips JSON
// decoding) and by the canonical filter (different ApplicationSets with
// equal filters share one selection). A new snapshot version empties it
// and drops the old encoding; going over max entries or maxBytes of
// selections empties the selections.
type responseCache struct {
	mu       sync.RWMutex
	version  uint64
	enc      *lazyEncoding // of version, nil until asked for
	max      int
	maxBytes int
	bytes    int // of the selections in byFilter (byBody shares them)
	byBody   map[string]Result
	byFilter map[string]Result
}

// lazyEncoding is a snapshot's encoding, built once however many requests
// ask for it at the same time.
type lazyEncoding struct {
	once sync.Once
	enc  *encodedSnapshot
	err  error
}

func newResponseCache(max int) *responseCache {
	return &responseCache{max: max, maxBytes: maxSelectionBytes, byBody: map[string]Result{}, byFilter: map[string]Result{}}
}

// encoded returns snap's encoding, building it on the first call for its
// version; concurrent callers wait for that one build. A snapshot older
// than the cache's version is encoded but not kept.
func (c *responseCache) encoded(snap *inventory.Snapshot) (*encodedSnapshot, error) {
	c.mu.Lock()
	if snap.Version < c.version {
		c.mu.Unlock()
		return encodeSnapshot(snap)
	}
	c.advance(snap.Version)
	e := c.enc
	if e == nil {
		e = &lazyEncoding{}
		c.enc = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.enc, e.err = encodeSnapshot(snap) })
	return e.enc, e.err
}

func (c *responseCache) getBody(version uint64, body []byte) (Result, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.version != version {
		return Result{}, false
	}
	r, ok := c.byBody[string(body)] // no allocation: the compiler keys the lookup on the bytes
	return r, ok
}

func (c *responseCache) getFilter(version uint64, key string) (Result, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.version != version {
		return Result{}, false
	}
	r, ok := c.byFilter[key]
	return r, ok
}

func (c *responseCache) putBody(version uint64, body []byte, r Result) {
	if len(body) > maxCachedBody {
		return
	}
	c.put(version, func() {
		if len(c.byBody) >= c.max {
			clear(c.byBody)
		}
		c.byBody[string(body)] = r
	})
}

func (c *responseCache) putFilter(version uint64, key string, r Result) {
	// the key counts too: it holds the filter's nameRegex and labelSelector
	// as sent, up to a body's size, and a filter that selects nothing has
	// no runs
	size := len(r.runs)*runBytes + len(key)
	c.put(version, func() {
		if len(c.byFilter) >= c.max || c.bytes+size > c.maxBytes {
			// byBody entries share these selections: drop both, or the
			// memory would stay referenced
			clear(c.byFilter)
			clear(c.byBody)
			c.bytes = 0
		}
		if size > c.maxBytes {
			return // served, not kept
		}
		c.byFilter[key] = r
		c.bytes += size
	})
}

// put runs store under the lock, first emptying the cache when version is
// newer than what it holds. An answer for an older version is dropped.
func (c *responseCache) put(version uint64, store func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if version < c.version {
		return
	}
	c.advance(version)
	store()
}

// advance empties the cache, encoding included, when version is newer than
// what it holds. c.mu must be held.
func (c *responseCache) advance(version uint64) {
	if version > c.version {
		c.version = version
		c.enc = nil
		clear(c.byBody)
		clear(c.byFilter)
		c.bytes = 0
	}
}
