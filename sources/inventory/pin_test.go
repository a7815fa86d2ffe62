package inventory

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestPinKeepsADueDeparture: a cluster an operator pinned stays served
// when its departure is due, for as long as the pin is there, and leaves
// at the next listing once the pin is removed. A pinned departure is not
// confirmed, so it takes no room under the breaker: another departure due
// in the same listing passes as it would alone. A cluster listed again
// is no longer kept by its pin.
func TestPinKeepsADueDeparture(t *testing.T) {
	src := &listings{}
	var mu sync.Mutex
	pins := map[string]bool{}
	pin := func(id string, on bool) {
		mu.Lock()
		defer mu.Unlock()
		pins[id] = on
	}
	clk := &clock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), step: time.Second}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{Now: clk.Now,
		Departure: Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.5, HeldListings: 3, MaxDeletions: 1},
		Pinned: func(source, id string) bool {
			mu.Lock()
			defer mu.Unlock()
			return source == "s1" && pins[id]
		}})
	require.NoError(t, err)
	var all []sources.Cluster
	for i := range 8 {
		all = append(all, inPhase(fmt.Sprintf("c%d", i), sources.PhaseReady))
	}
	list := func(cs ...sources.Cluster) (*Snapshot, SourceState) {
		src.set(cs...)
		require.NoError(t, inv.RefreshAll(context.Background()))
		snap := inv.Snapshot()
		st, _ := snap.Source("s1")
		return snap, st
	}
	served := func(snap *Snapshot, name string) bool {
		for _, c := range snap.Clusters {
			if c.Name == name {
				return true
			}
		}
		return false
	}
	c0, c1 := all[0].Key(), all[1].Key()

	list(all...)
	pin(c0, true)
	list(all[2:]...) // c0 and c1 missing: two departures due at the next listing, one allowed
	snap, st := list(all[2:]...)
	assert.True(t, served(snap, "c0"), "pinned: served although due")
	assert.False(t, served(snap, "c1"), "c1 departs: the pinned one takes no room under the breaker")
	assert.True(t, snap.HasDeparted("s1", c1))
	assert.False(t, snap.HasDeparted("s1", c0))
	assert.Equal(t, 1, st.PinnedDepartures)
	assert.Zero(t, st.WaitingDepartures+st.BlockedDepartures+st.HeldDepartures, "a pin is no hold, and not waiting")

	for range 5 {
		snap, st = list(all[2:]...)
	}
	assert.True(t, served(snap, "c0"), "kept for as long as it is pinned")
	assert.Equal(t, 1, st.PinnedDepartures)

	snap, st = list(append([]sources.Cluster{all[0]}, all[2:]...)...)
	assert.True(t, served(snap, "c0"))
	assert.Zero(t, st.PinnedDepartures, "listed again: nothing to keep")
	list(all[2:]...)
	snap, st = list(all[2:]...)
	assert.True(t, served(snap, "c0"), "missing again, still pinned: kept again")
	assert.Equal(t, 1, st.PinnedDepartures)

	pin(c0, false)
	clk.mu.Lock()
	clk.now = clk.now.Add(2 * time.Hour) // past the interval of c1's departure: the breaker has room
	clk.mu.Unlock()
	snap, st = list(all[2:]...)
	assert.False(t, served(snap, "c0"), "unpinned: its due departure is confirmed at the next listing")
	assert.True(t, snap.HasDeparted("s1", c0))
	assert.Zero(t, st.PinnedDepartures)
}
