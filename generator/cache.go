package generator

import "sync"

// maxCachedBody bounds the request bodies used as cache keys; larger
// bodies are still answered from the per-filter cache.
const maxCachedBody = 4 << 10

// responseCache holds encoded answers for one snapshot version, keyed both
// by the raw request body (a hit skips JSON decoding) and by the canonical
// filter (different ApplicationSets with equal filters share one
// encoding). A new snapshot version empties it.
type responseCache struct {
	mu       sync.RWMutex
	version  uint64
	max      int
	byBody   map[string]Result
	byFilter map[string]Result
}

func newResponseCache(max int) *responseCache {
	return &responseCache{max: max, byBody: map[string]Result{}, byFilter: map[string]Result{}}
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
		if len(c.byFilter) >= c.max {
			clear(c.byFilter)
		}
		c.byFilter[key] = r
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
	}
	store()
}
