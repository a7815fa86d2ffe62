package inventory

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// fleetOf returns n ready clusters c00, c01, ...
func fleetOf(n int) []sources.Cluster {
	var out []sources.Cluster
	for i := range n {
		out = append(out, inPhase(fmt.Sprintf("c%02d", i), sources.PhaseReady))
	}
	return out
}

// leavingFrom returns fleet with its clusters from..to-1 leaving (deleted
// upstream: never part of a drop).
func leavingFrom(fleet []sources.Cluster, from, to int) []sources.Cluster {
	out := slices.Clone(fleet)
	for i := from; i < to; i++ {
		out[i].Phase = sources.PhaseLeaving
	}
	return out
}

// TestBreakerCountsAnInterval: the answer's breaker bounds the departures
// of an interval, not of a listing. Listings that come more often than the
// interval (Rancher's change events) each within the limit do not add up
// to more: the departures over it wait, served and not held, for the
// interval to pass, across a restart too (the ledger keeps the confirmed
// ones). A departure released by an acknowledgement or by heldListings
// still passes.
func TestBreakerCountsAnInterval(t *testing.T) {
	// the limit is 3 departures an interval (spec's: an hour); the clock
	// moves a second a listing
	rule := Departure{AfterListings: 1, GracePeriod: -1, MaxFraction: 1, HeldListings: 3, MaxDeletions: 3, MaxDeletionsPercent: -1}
	fleet := fleetOf(20)
	for _, tc := range []struct {
		name    string
		restart bool
	}{
		{name: "one process"},
		{name: "restarted before the next listing", restart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &listings{}
			p := newProcess(t, rule, src)
			src.set(fleet...)
			require.Len(t, p.list().Clusters, 20)
			src.set(leavingFrom(fleet, 0, 2)...)
			require.Len(t, p.list().Clusters, 18, "two due: within the limit, confirmed")

			src.set(leavingFrom(fleet, 0, 5)...)
			if tc.restart {
				p.restart()
			}
			snap := p.list()
			assert.Equal(t, []string{"c03", "c04"}, leavingNames(snap),
				"three more due a second later, within the limit on their own: one fits the interval (the oldest, then by id), two wait, served")
			st, _ := snap.Source("s1")
			assert.Zero(t, st.HeldDepartures, "waiting is not held: no acknowledgement needed")
			assert.Zero(t, st.BlockedDepartures)
			require.Len(t, p.list().Clusters, 17, "still within the interval")

			p.clk.advance(time.Hour)
			assert.Len(t, p.list().Clusters, 15, "an interval later: confirmed")
		})
	}
}

// leavingNames returns the names of the served clusters in phase leaving.
func leavingNames(snap *Snapshot) []string {
	var out []string
	for _, c := range snap.Clusters {
		if c.Phase == sources.PhaseLeaving {
			out = append(out, c.Name)
		}
	}
	return out
}

// TestReleasedDeparturesPassTheInterval: departures a mass drop held and
// heldListings released (no acknowledgements: the in-memory ledger) are
// confirmed whatever the interval's budget, as the breaker lets them pass
// when it trips.
func TestReleasedDeparturesPassTheInterval(t *testing.T) {
	rule := Departure{AfterListings: 1, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 3, MaxDeletions: 6, MaxDeletionsPercent: -1}
	fleet := fleetOf(20)
	src := &listings{}
	p := newProcess(t, rule, src)
	src.set(fleet...)
	p.list()
	src.set(leavingFrom(fleet, 0, 2)...)
	require.Len(t, p.list().Clusters, 18, "two of the interval's six used")
	src.set(fleet[8:]...) // c02..c07 vanish: a mass drop, held
	for i := range rule.HeldListings - 1 {
		require.Len(t, p.list().Clusters, 18, "listing %d: held", i+1)
	}
	assert.Len(t, p.list().Clusters, 12, "heldListings released the six: all confirmed, though four were left of the interval's budget")
}

// TestSlowLossIsADrop: clusters that vanish a few at a time, each
// departure below maxFraction, add up within the source's window
// (heldListings intervals): once the departed and the missing are more
// than maxFraction of what was served, the missing ones are held. A loss
// slower than the window, or clusters seen leaving, stay ordinary
// departures.
func TestSlowLossIsADrop(t *testing.T) {
	rule := Departure{AfterListings: 1, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 3, MaxDeletions: 100}
	fleet := fleetOf(20)
	for _, tc := range []struct {
		name    string
		gap     time.Duration // between two pairs vanishing
		leaving bool          // the pairs are seen leaving before they go
		restart bool
		want    int // served after the third pair went
		held    int
	}{
		{name: "three pairs within the window: the third is held", gap: time.Hour, want: 16, held: 2},
		{name: "the same across restarts", gap: time.Hour, restart: true, want: 16, held: 2},
		{name: "slower than the window: ordinary departures", gap: 2 * time.Hour, want: 14},
		{name: "seen leaving: deletions, never a drop", gap: time.Hour, leaving: true, want: 14},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &listings{}
			p := newProcess(t, rule, src)
			src.set(fleet...)
			p.list()
			for pair := 1; pair <= 3; pair++ {
				if pair > 1 {
					p.clk.advance(tc.gap)
				}
				if tc.leaving {
					src.set(leavingFrom(fleet[2*(pair-1):], 0, 2)...)
					p.list()
				}
				src.set(fleet[2*pair:]...)
				if tc.restart {
					p.restart()
				}
				p.list()
			}
			snap := p.list()
			assert.Len(t, snap.Clusters, tc.want)
			st, _ := snap.Source("s1")
			assert.Equal(t, tc.held, st.HeldDepartures)
		})
	}
}

// TestWaitingDeparturesDoNotTrip: departures left waiting by the
// interval's budget do not count towards a trip of the breaker when more
// come due: only the newly due ones are weighed against the limit, so a
// trickle of deletions never ends held for an acknowledgement. They go
// oldest first as the budget allows.
func TestWaitingDeparturesDoNotTrip(t *testing.T) {
	rule := Departure{AfterListings: 1, GracePeriod: -1, MaxFraction: 1, HeldListings: 3, MaxDeletions: 3, MaxDeletionsPercent: -1}
	fleet := fleetOf(20)
	src := &listings{}
	p := newProcess(t, rule, src)
	src.set(fleet...)
	p.list()
	src.set(leavingFrom(fleet, 0, 3)...)
	require.Len(t, p.list().Clusters, 17, "three: the interval's limit")
	src.set(leavingFrom(fleet, 0, 6)...)
	require.Len(t, p.list().Clusters, 17, "three more a second later: they wait")
	src.set(leavingFrom(fleet, 0, 8)...)
	snap := p.list()
	require.Len(t, snap.Clusters, 17, "two more: five due, two of them new: within the limit, all wait")
	st, _ := snap.Source("s1")
	assert.Zero(t, st.HeldDepartures, "waiting ones are not weighed again: no trip, nothing held")
	assert.Equal(t, 5, st.WaitingDepartures)
	assert.Equal(t, 5.0, testutil.ToFloat64(p.inv.metrics.waiting.WithLabelValues("s1")), "source_departures_waiting")

	p.clk.advance(time.Hour)
	snap = p.list()
	assert.Equal(t, []string{"c06", "c07"}, leavingNames(snap), "an interval later: the three that waited longest")
	st, _ = snap.Source("s1")
	assert.Equal(t, 2, st.WaitingDepartures)
	p.clk.advance(time.Hour)
	assert.Len(t, p.list().Clusters, 12)
}

// TestRegularListingsDoNotShareABudget: the breaker's window is the
// shortest time between two regular listings (the interval less its
// jitter), so a listing that comes a little early, as jitter makes every
// other one, does not wait for the last one's departures: only listings
// closer together (Rancher's change events) share a budget.
func TestRegularListingsDoNotShareABudget(t *testing.T) {
	rule := Departure{AfterListings: 1, GracePeriod: -1, MaxFraction: 1, HeldListings: 3, MaxDeletions: 3, MaxDeletionsPercent: -1}
	fleet := fleetOf(20)
	src := &listings{}
	p := newProcess(t, rule, src) // interval an hour, jitter 0.1: listings 54 to 66 minutes apart
	src.set(fleet...)
	p.list()
	src.set(leavingFrom(fleet, 0, 3)...)
	require.Len(t, p.list().Clusters, 17)
	p.clk.advance(55 * time.Minute)
	src.set(leavingFrom(fleet, 0, 6)...)
	assert.Len(t, p.list().Clusters, 14, "the next regular listing, early: a budget of its own")
	p.clk.advance(10 * time.Minute)
	src.set(leavingFrom(fleet, 0, 7)...)
	assert.Len(t, p.list().Clusters, 14, "an extra listing ten minutes later: the budget is used")
}
