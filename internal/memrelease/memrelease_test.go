package memrelease

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRun: a check releases when more than Above is free and less than
// Quiet was allocated since the last check (at rest), and only then; Run
// stops with its context.
func TestRun(t *testing.T) {
	type reading struct{ free, allocs uint64 } // allocs: since the check before
	for _, tc := range []struct {
		name     string
		readings []reading
		want     int
	}{
		{"nothing free", []reading{{0, 0}, {0, 0}}, 0},
		{"at the threshold", []reading{{Above, 0}, {Above, 0}}, 0},
		{"free at rest", []reading{{0, 0}, {Above + 1, 0}, {0, 0}}, 1},
		{"free at every check, at rest", []reading{{Above + 1, 1 << 20}, {64 << 20, 0}, {Above + 1, Quiet - 1}}, 3},
		{"free while allocating: a burst, then rest", []reading{{64 << 20, Quiet}, {64 << 20, 64 << 20}, {64 << 20, 0}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tick := make(chan time.Time)
			ctx, cancel := context.WithCancel(t.Context())
			i, total, released := -1, uint64(1<<30), 0 // -1: Run's first reading, before any check
			heap := func() (uint64, uint64) {
				if i++; i == 0 {
					return 0, total
				}
				r := tc.readings[i-1]
				total += r.allocs
				return r.free, total
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				run(ctx, tick, Above, Quiet, heap, func() { released++ })
			}()
			for range tc.readings {
				tick <- time.Now()
			}
			cancel()
			<-done
			assert.Equal(t, len(tc.readings), i, "one reading a check")
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

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, 10*time.Millisecond, Above, Quiet) }()
	defer func() { cancel(); <-done }()
	assert.Eventually(t, func() bool { return Free() <= Above }, 5*time.Second, 20*time.Millisecond,
		"the free heap released")
}
