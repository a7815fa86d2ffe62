package generator

import "sync"

// maxCachedBody bounds the request bodies used as cache keys; larger
// bodies are still answered from the per-filter cache.
const maxCachedBody = 4 << 10

// maxCachedBytes bounds the encoded answers held at once: at 10,000
// clusters a full answer is ~4-5 MiB, so a client sending many distinct
// filters cannot make the cache grow without bound.
const maxCachedBytes = 64 << 20

// responseCache holds encoded answers for one snapshot version, keyed both
// by the raw request body (a hit skips JSON decoding) and by the canonical
// filter (different ApplicationSets with equal filters share one
// encoding). A new snapshot version empties it; so does going over max
// entries or maxBytes of answers.
type responseCache struct {
	mu       sync.RWMutex
	version  uint64
	max      int
	maxBytes int
	bytes    int // of the answers in byFilter (byBody shares them)
	byBody   map[string]Result
	byFilter map[string]Result
}

func newResponseCache(max int) *responseCache {
	return &responseCache{max: max, maxBytes: maxCachedBytes, byBody: map[string]Result{}, byFilter: map[string]Result{}}
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
	c.put(version, func() {
		if len(c.byFilter) >= c.max || c.bytes+len(r.Body) > c.maxBytes {
			// byBody entries share these answers: drop both, or the memory
			// would stay referenced
			clear(c.byFilter)
			clear(c.byBody)
			c.bytes = 0
		}
		if len(r.Body) > c.maxBytes {
			return // served, not kept
		}
		c.byFilter[key] = r
		c.bytes += len(r.Body)
	})
}

// put runs store under the lock, first emptying the cache when version is
// newer than what it holds. An answer for an older version is dropped.
func (c *responseCache) put(version uint64, store func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case version < c.version:
		return
	case version > c.version:
		c.version = version
		clear(c.byBody)
		clear(c.byFilter)
		c.bytes = 0
	}
	store()
}
