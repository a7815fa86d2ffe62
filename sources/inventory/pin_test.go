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
		Pinned: func(source, id string) (bool, bool) {
			mu.Lock()
			defer mu.Unlock()
			return source == "s1" && pins[id], true
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

// pinnedFleet returns an inventory over one source s1 of four ready
// clusters c0 to c3, listed once, whose pins the test sets with pin (and
// whether they can be read, with known); and a hand that lists some of
// them and returns the snapshot and s1's state.
func pinnedFleet(t *testing.T) (all []sources.Cluster, list func(...sources.Cluster) (*Snapshot, SourceState), pin func(id string), known func(bool)) {
	t.Helper()
	src := &listings{}
	var mu sync.Mutex
	pins, readable := map[string]bool{}, true
	clk := &clock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), step: time.Second}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{Now: clk.Now,
		Departure: Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 3},
		Pinned: func(_, id string) (bool, bool) {
			mu.Lock()
			defer mu.Unlock()
			return pins[id], readable
		}})
	require.NoError(t, err)
	for i := range 4 {
		all = append(all, inPhase(fmt.Sprintf("c%d", i), sources.PhaseReady))
	}
	list = func(cs ...sources.Cluster) (*Snapshot, SourceState) {
		src.set(cs...)
		require.NoError(t, inv.RefreshAll(context.Background()))
		snap := inv.Snapshot()
		st, _ := snap.Source("s1")
		return snap, st
	}
	list(all...)
	return all, list,
		func(id string) { mu.Lock(); defer mu.Unlock(); pins[id] = true },
		func(ok bool) { mu.Lock(); defer mu.Unlock(); readable = ok }
}

// TestUnreadPinsConfirmNothing: while the pins cannot be read (a new
// leader whose view of the ledger has not read it yet), a due departure
// is not confirmed: the pin it may have is not known. Once they can be
// read, an unpinned one is confirmed.
func TestUnreadPinsConfirmNothing(t *testing.T) {
	all, list, _, known := pinnedFleet(t)
	known(false)
	var st SourceState
	var snap *Snapshot
	for range 4 {
		snap, st = list(all[1:]...)
	}
	assert.Len(t, snap.Clusters, 4, "due, but its pin is not known: served")
	assert.Zero(t, st.PinnedDepartures, "not known to be pinned")
	known(true)
	snap, _ = list(all[1:]...)
	assert.Len(t, snap.Clusters, 3, "not pinned: confirmed")
}

// TestPinnedIsNoDrop: a pinned cluster an operator keeps is known gone:
// another cluster vanishing later is one of four missing, no mass drop,
// and departs as usual; the pinned one is not made part of a hold.
func TestPinnedIsNoDrop(t *testing.T) {
	all, list, pin, _ := pinnedFleet(t)
	pin(all[0].Key())
	list(all[1:]...)
	_, st := list(all[1:]...)
	require.Equal(t, 1, st.PinnedDepartures)
	list(all[2:]...) // c1 vanishes: with the pinned c0, two of four would be a drop
	snap, st := list(all[2:]...)
	assert.Zero(t, st.HeldDepartures, "no mass drop")
	assert.Equal(t, 1, st.PinnedDepartures, "c0 still pinned, not held")
	assert.True(t, snap.HasDeparted("s1", all[1].Key()), "c1 departs as usual")
	assert.Len(t, snap.Clusters, 3)
}

// TestViewTellsPinsOnceFollowed: the view the leader asks for pins
// (Inventory.Pinned) cannot tell them before it holds a book read from the
// ledger (nor while the ledger it read does not add up), then tells what
// each record read from the ledger says.
func TestViewTellsPinsOnceFollowed(t *testing.T) {
	ledger := NewMemory()
	view, err := New([]SourceSpec{spec("s1", &listings{})}, Options{})
	require.NoError(t, err)
	_, known := view.Pinned("s1", "c0")
	assert.False(t, known, "nothing read yet")
	view.unsettle("the ledger does not add up (a save cut short)")
	require.True(t, view.Followed())
	_, known = view.Pinned("s1", "c0")
	assert.False(t, known, "followed, but no book: the pins are not read")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); view.Follow(ctx, ledger) }()
	defer func() { cancel(); <-done }()
	c0, c1 := inPhase("c0", sources.PhaseReady), inPhase("c1", sources.PhaseReady)
	c0.Source, c1.Source = "s1", "s1"
	require.NoError(t, ledger.Save(ctx, Book{Sources: []SourceRecord{{Name: "s1", Synced: true}}, Clusters: []Record{
		{Source: "s1", ID: c0.Key(), Rendering: &c0, Served: true, Pin: true},
		{Source: "s1", ID: c1.Key(), Rendering: &c1, Served: true}}}))
	require.Eventually(t, func() bool { _, known := view.Pinned("s1", c0.Key()); return known }, 10*time.Second, 10*time.Millisecond)
	pinned, known := view.Pinned("s1", c0.Key())
	assert.True(t, known && pinned, "c0's record says it is pinned")
	pinned, known = view.Pinned("s1", c1.Key())
	assert.True(t, known && !pinned)
}

// TestAcknowledgedAndPinnedCountsAsPinned: a departure of a held drop,
// acknowledged, comes due while its cluster is pinned: it stays served and
// counts as pinned, not held; the drop's other departures stay held.
func TestAcknowledgedAndPinnedCountsAsPinned(t *testing.T) {
	src := &listings{}
	var fleet []sources.Cluster
	for i := range 8 {
		fleet = append(fleet, inPhase(fmt.Sprintf("c%d", i), sources.PhaseReady))
	}
	c0 := fleet[0].Key()
	clk := &clock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), step: time.Second}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{Now: clk.Now,
		Departure:    Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 3},
		Acknowledged: func(_, id string) bool { return id == c0 },
		Pinned:       func(_, id string) (bool, bool) { return id == c0, true }})
	require.NoError(t, err)
	src.set(fleet...)
	require.NoError(t, inv.RefreshAll(context.Background()))
	src.set(fleet[4:]...) // half at once: a drop
	for range 4 {
		require.NoError(t, inv.RefreshAll(context.Background()))
	}
	snap := inv.Snapshot()
	st, _ := snap.Source("s1")
	assert.Len(t, snap.Clusters, 8, "nothing departs")
	assert.Equal(t, 1, st.PinnedDepartures, "c0: acknowledged, due, kept by its pin")
	assert.Equal(t, 3, st.HeldDepartures, "the drop's others")
}
