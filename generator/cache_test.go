package generator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestResponseCacheIsBounded(t *testing.T) {
	c := newResponseCache(1000)
	c.maxBytes = 100
	answer := func(n int) Result { return Result{Body: make([]byte, n)} }

	c.putFilter(1, "a", answer(60))
	c.putBody(1, []byte(`{"a"}`), answer(60))
	_, ok := c.getFilter(1, "a")
	assert.True(t, ok)
	c.putFilter(1, "b", answer(60)) // over the byte budget: everything goes, b stays
	_, ok = c.getFilter(1, "a")
	assert.False(t, ok)
	_, ok = c.getBody(1, []byte(`{"a"}`))
	assert.False(t, ok, "body entries share the answers and go with them")
	_, ok = c.getFilter(1, "b")
	assert.True(t, ok)
	assert.Equal(t, 60, c.bytes)

	c.putFilter(1, "huge", answer(101))
	_, ok = c.getFilter(1, "huge")
	assert.False(t, ok, "an answer over the budget is served but not kept")
	assert.LessOrEqual(t, c.bytes, c.maxBytes)

	c.maxBytes = 1 << 30
	for i := range 2000 {
		c.putFilter(1, fmt.Sprint(i), answer(1))
	}
	assert.LessOrEqual(t, len(c.byFilter), 1000, "bounded by count too")

	c.putFilter(2, "new", answer(10))
	_, ok = c.getFilter(1, "b")
	assert.False(t, ok, "a new snapshot version empties the cache")
	assert.Equal(t, 10, c.bytes)
}
