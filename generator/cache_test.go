package generator

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

func TestResponseCacheIsBounded(t *testing.T) {
	c := newResponseCache(1000)
	c.maxBytes = 100
	answer := func(runs int) Result { return Result{runs: make([]run, runs)} } // runBytes each

	c.putFilter(1, "a", answer(7))
	c.putBody(1, []byte(`{"a"}`), answer(7))
	_, ok := c.getFilter(1, "a")
	assert.True(t, ok)
	c.putFilter(1, "b", answer(7)) // over the selection budget: everything goes, b stays
	_, ok = c.getFilter(1, "a")
	assert.False(t, ok)
	_, ok = c.getBody(1, []byte(`{"a"}`))
	assert.False(t, ok, "body entries share the selections and go with them")
	_, ok = c.getFilter(1, "b")
	assert.True(t, ok)
	assert.Equal(t, 7*runBytes+len("b"), c.bytes)

	c.putFilter(1, "huge", answer(13))
	_, ok = c.getFilter(1, "huge")
	assert.False(t, ok, "a selection over the budget is served but not kept")
	assert.LessOrEqual(t, c.bytes, c.maxBytes)

	c.putFilter(1, "all", answer(1))
	c.putFilter(1, "none", answer(0))
	_, ok = c.getFilter(1, "none")
	assert.True(t, ok, "an empty selection is kept")
	assert.Equal(t, runBytes+len("all")+len("none"), c.bytes, "one run however many clusters it holds, and the keys")

	c.maxBytes = 1 << 30
	for i := range 2000 {
		c.putFilter(1, fmt.Sprint(i), answer(1))
	}
	assert.LessOrEqual(t, len(c.byFilter), 1000, "bounded by count too")

	c.putFilter(2, "new", answer(10))
	_, ok = c.getFilter(1, "b")
	assert.False(t, ok, "a new snapshot version empties the cache")
	assert.Equal(t, 10*runBytes+len("new"), c.bytes)
}

// TestResponseCacheCountsKeys: a filter's key holds its nameRegex and
// labelSelector as sent, up to a request body's size; filters that
// select nothing (no runs) must not hold memory without bound.
func TestResponseCacheCountsKeys(t *testing.T) {
	c := newResponseCache(4096)
	pad := strings.Repeat("x", 64<<10)
	for i := range 1000 {
		c.putFilter(1, fmt.Sprintf("nameRegex=%d%s", i, pad), Result{})
		require.LessOrEqual(t, c.bytes, c.maxBytes)
	}
	held := 0
	for k := range c.byFilter {
		held += len(k)
	}
	assert.LessOrEqual(t, held, maxSelectionBytes, "the keys held are within the cache's budget")
	assert.Equal(t, held, c.bytes)
}

func TestResponseCacheEncodesOncePerVersion(t *testing.T) {
	snap := func(version uint64, names ...string) *inventory.Snapshot {
		s := &inventory.Snapshot{Version: version}
		for _, n := range names {
			c := testCluster(n, "acme")
			s.Clusters = append(s.Clusters, &c)
		}
		return s
	}
	c := newResponseCache(1000)
	v1 := snap(1, "a", "b")

	// concurrent first requests share one build
	const callers = 8
	got := make([]*encodedSnapshot, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			enc, err := c.encoded(v1)
			assert.NoError(t, err)
			got[i] = enc
		})
	}
	wg.Wait()
	require.NotNil(t, got[0])
	for _, enc := range got {
		assert.Same(t, got[0], enc)
	}
	c.putFilter(1, "all", Result{enc: got[0], runs: []run{{0, 2}}})
	c.putBody(1, []byte(`{}`), Result{enc: got[0], runs: []run{{0, 2}}})

	// a new version drops the old encoding and the selections of it
	v2, err := c.encoded(snap(2, "a", "b", "c"))
	require.NoError(t, err)
	assert.NotSame(t, got[0], v2)
	assert.Len(t, v2.off, 4)
	assert.Same(t, v2, c.enc.enc, "the cache holds the encoding of its version only")
	assert.Empty(t, c.byFilter)
	assert.Empty(t, c.byBody)
	assert.Zero(t, c.bytes)

	// a request still holding the old snapshot gets its own encoding,
	// which the cache does not keep
	old, err := c.encoded(v1)
	require.NoError(t, err)
	assert.Len(t, old.off, 3)
	assert.Same(t, v2, c.enc.enc)
	c.putFilter(1, "all", Result{enc: old, runs: []run{{0, 2}}})
	_, ok := c.getFilter(2, "all")
	assert.False(t, ok, "an answer of an older version is not kept")
}
