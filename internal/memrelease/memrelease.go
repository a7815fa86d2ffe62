// Package memrelease hands the heap memory the Go runtime holds free back
// to the operating system once the process is at rest.
//
// After a collection the runtime keeps the freed pages for the next
// allocations, up to about the garbage collector's goal, and at rest it
// keeps them for good: between two listings of 10,000 clusters the leader
// held ~18 MiB of them, a sixth of its RSS. Run returns them
// (debug.FreeOSMemory: a collection, then every free page released) once
// more than a MiB is free and the process allocated less than a few MiB
// since its last check: after a burst (a listing, a cold sync, a load of
// requests), not during one, so a busy process pays no extra collection.
// The peak is the runtime's own: only the RSS between bursts is lower.
package memrelease

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The service's settings of Run.
const (
	// Every is how often the service checks its heap.
	Every = time.Second
	// Above is how much free heap the service lets the runtime keep. A
	// replica at rest is otherwise idle: a collection costs it nothing
	// anyone waits for. At 4 MiB a follower of 10,000 clusters kept ~3 MiB
	// of its start-up's pages.
	Above = 1 << 20
	// Quiet is how much the service may allocate between two checks and
	// still be at rest.
	Quiet = 4 << 20
)

// The runtime metrics Run reads.
const (
	// freeHeap is the heap's free pages not released to the system yet.
	freeHeap = "/memory/classes/heap/free:bytes"
	// allocated is every byte the heap ever allocated.
	allocated = "/gc/heap/allocs:bytes"
)

// Run checks the heap every interval (which must be positive) and
// releases its free pages when more than above is free and less than
// quiet was allocated since the last check, until ctx ends.
func Run(ctx context.Context, every time.Duration, above, quiet uint64) {
	t := time.NewTicker(every)
	defer t.Stop()
	run(ctx, t.C, above, quiet, read, debug.FreeOSMemory)
}

// run is Run with its clock, its reading of the heap (free, and allocated
// in all) and its release given.
func run(ctx context.Context, tick <-chan time.Time, above, quiet uint64, heap func() (free, allocs uint64), release func()) {
	_, last := heap()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			free, allocs := heap()
			if free > above && allocs-last < quiet {
				release()
			}
			last = allocs
		}
	}
}

// read returns the heap's free pages not released yet and the bytes it
// allocated in all.
func read() (free, allocs uint64) {
	s := []metrics.Sample{{Name: freeHeap}, {Name: allocated}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// Free returns the heap's free pages not released yet, in bytes: what Run
// hands back.
func Free() uint64 {
	free, _ := read()
	return free
}
