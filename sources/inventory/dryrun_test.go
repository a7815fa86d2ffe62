package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestDryRunConfirmsNoDeparture: in a dry run a departure that comes due
// is not confirmed: the cluster stays served however many listings it
// misses, and /status counts it. The first process that is not a dry run
// (the ledger loaded, as after a restart) confirms it at its first
// listing.
func TestDryRunConfirmsNoDeparture(t *testing.T) {
	src := &listings{}
	ledger := NewMemory()
	clk := &clock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), step: time.Second}
	process := func(dryRun bool) *Inventory {
		inv, err := New([]SourceSpec{spec("s1", src)}, Options{Departure: Departure{AfterListings: 2, GracePeriod: -1, HeldListings: 3},
			Now: clk.Now, Registerer: prometheus.NewRegistry(), Ledger: ledger, DryRun: dryRun})
		require.NoError(t, err)
		require.True(t, inv.load(context.Background()))
		return inv
	}
	list := func(inv *Inventory) (*Snapshot, SourceState) {
		require.NoError(t, inv.RefreshAll(context.Background()))
		snap := inv.Snapshot()
		st, _ := snap.Source("s1")
		return snap, st
	}
	x := inPhase("x", sources.PhaseReady)
	stay := []sources.Cluster{inPhase("a", sources.PhaseReady), inPhase("b", sources.PhaseReady), inPhase("c", sources.PhaseReady), inPhase("d", sources.PhaseReady)}
	dry := process(true)
	src.set(append([]sources.Cluster{x}, stay...)...)
	list(dry)
	src.set(stay...) // one of five: no mass drop
	var snap *Snapshot
	var st SourceState
	for range 5 {
		snap, st = list(dry)
	}
	assert.Equal(t, sources.PhaseAbsent, served(snap)["x"], "due in a dry run: still served")
	assert.Equal(t, 1, st.DryRunDepartures)
	assert.False(t, snap.HasDeparted("s1", x.Key()))
	saved := func() string {
		b, err := ledger.Load(context.Background())
		require.NoError(t, err)
		raw, err := json.Marshal(b.Clusters) // as the Kubernetes ledger writes the records
		require.NoError(t, err)
		return string(raw)
	}
	before := saved()
	list(dry)
	assert.Equal(t, before, saved(), "the same records listing after listing (missed listings are counted up to heldListings): nothing to write")

	snap, st = list(process(false))
	assert.NotContains(t, served(snap), "x", "the first listing that is not a dry run confirms it")
	assert.Zero(t, st.DryRunDepartures)
}

// TestDryRunEndsUnderTheBreaker: departures a dry run held back come due
// together at the first listing that is not a dry run; more of them than
// the breaker's limit wait for its room, oldest first, instead of
// tripping it (which would hold every one until acknowledged).
func TestDryRunEndsUnderTheBreaker(t *testing.T) {
	src := &listings{}
	ledger := NewMemory()
	clk := &clock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), step: time.Second}
	process := func(dryRun bool) *Inventory {
		inv, err := New([]SourceSpec{spec("s1", src)}, Options{Now: clk.Now, Registerer: prometheus.NewRegistry(), Ledger: ledger, DryRun: dryRun,
			Departure: Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.5, HeldListings: 3, MaxDeletions: 1}})
		require.NoError(t, err)
		require.True(t, inv.load(context.Background()))
		return inv
	}
	var fleet []sources.Cluster
	for i := range 10 {
		fleet = append(fleet, inPhase(fmt.Sprintf("c%d", i), sources.PhaseReady))
	}
	dry := process(true)
	src.set(fleet...)
	require.NoError(t, dry.RefreshAll(context.Background()))
	for i := 1; i <= 3; i++ { // three vanish one listing apart: no drop
		src.set(fleet[i:]...)
		for range 3 {
			require.NoError(t, dry.RefreshAll(context.Background()))
		}
	}
	st, _ := dry.Snapshot().Source("s1")
	require.Equal(t, 3, st.DryRunDepartures)

	next := process(false)
	require.NoError(t, next.RefreshAll(context.Background()))
	snap := next.Snapshot()
	st, _ = snap.Source("s1")
	assert.Zero(t, st.HeldDepartures, "the breaker did not trip")
	assert.Equal(t, 2, st.WaitingDepartures, "one passed, two wait for room")
	assert.True(t, snap.HasDeparted("s1", fleet[0].Key()), "the oldest first")
	assert.Len(t, snap.Clusters, 9)
}
