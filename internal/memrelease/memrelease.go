// Package memrelease hands the heap memory the Go runtime holds free back
// to the operating system once the process is at rest.
//
// After a collection the runtime keeps the freed pages for the next
// allocations, up to about the garbage collector's goal: between two
// listings of 10,000 clusters the leader held ~18 MiB of them, a sixth of
// its RSS. Run returns them (debug.FreeOSMemory: a collection, then every
// free page released) when more than a few MiB are free, at most once per
// check. A burst (a listing, a cold sync, a load of requests) takes them
// again while it runs: the peak is the runtime's own, only the RSS between
// bursts is lower.
package memrelease

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

const (
	// Every is how often Run checks the free heap.
	Every = 5 * time.Second
	// Above is how much free heap Run lets the runtime keep: a collection
	// for less costs more than the pages are worth.
	Above = 4 << 20
)

// freeHeap is the runtime metric of the heap's free pages that are not
// released to the operating system yet.
const freeHeap = "/memory/classes/heap/free:bytes"

// Run checks the free heap every interval and releases it when above is
// exceeded, until ctx ends.
func Run(ctx context.Context, every time.Duration, above uint64) {
	t := time.NewTicker(every)
	defer t.Stop()
	run(ctx, t.C, above, Free, debug.FreeOSMemory)
}

// run is Run with its clock, its reading of the free heap and its release
// given.
func run(ctx context.Context, tick <-chan time.Time, above uint64, free func() uint64, release func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if free() > above {
				release()
			}
		}
	}
}

// Free returns the heap's free pages not released yet, in bytes: what Run
// hands back.
func Free() uint64 {
	s := []metrics.Sample{{Name: freeHeap}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
