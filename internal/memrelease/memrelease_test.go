package memrelease

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRun: each check releases when the free heap is above the threshold,
// and only then; Run stops with its context.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frees []uint64
		want  int
	}{
		{"nothing free", []uint64{0, 0, 0}, 0},
		{"at the threshold", []uint64{Above, Above}, 0},
		{"above once", []uint64{0, Above + 1, 0}, 1},
		{"above at every check", []uint64{Above + 1, 64 << 20, Above + 1}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tick := make(chan time.Time)
			ctx, cancel := context.WithCancel(t.Context())
			i, released := 0, 0
			done := make(chan struct{})
			go func() {
				defer close(done)
				run(ctx, tick, Above, func() uint64 { i++; return tc.frees[i-1] }, func() { released++ })
			}()
			for range tc.frees {
				tick <- time.Now()
			}
			cancel()
			<-done
			assert.Equal(t, len(tc.frees), i, "one reading a check")
			assert.Equal(t, tc.want, released)
		})
	}
}

// sink keeps an allocation reachable until the test drops it.
var sink []byte

// TestReleaseEmptiesTheFreeHeap: the runtime's own reading and release.
// 64 MiB allocated, dropped and collected are free heap the runtime keeps;
// Run's release hands them back, and the reading says so.
func TestReleaseEmptiesTheFreeHeap(t *testing.T) {
	sink = make([]byte, 64<<20)
	for i := range sink {
		sink[i] = 1 // touched: resident
	}
	sink = nil
	runtime.GC()
	require.Greater(t, Free(), uint64(32<<20), "64 MiB collected are free, not released yet")

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	go Run(ctx, 10*time.Millisecond, Above)
	assert.Eventually(t, func() bool { return Free() <= Above }, 5*time.Second, 20*time.Millisecond,
		"the free heap released")
}
