package clusterprofile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// TestNextLeaderResumesTheCountdowns: the leader dies in the middle of a
// save, part of its departures counted one listing further in the ledger
// than the others. Each next leader (a new inventory on the same
// ClusterProfiles, as after the Lease changes hands) goes on from what the
// ledger holds, counting listings, not time: a departure saved at two
// missed listings is confirmed at the next leader's first listing, one
// saved at one at its second, and none before.
func TestNextLeaderResumesTheCountdowns(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	rule := inventory.Departure{AfterListings: 3, GracePeriod: -1, MaxFraction: 1, HeldListings: 3, MaxDeletions: 100}
	var all []sources.Cluster
	for i := range 8 {
		all = append(all, ready(fmt.Sprintf("c%02d", i)))
	}
	src := &listing{}
	leader := func() *inventory.Inventory {
		t.Helper()
		inv, err := inventory.New([]inventory.SourceSpec{{Name: "s1", Provider: sources.ProviderStatic, Kind: sources.KindFile,
			Source: src, Interval: time.Hour, Timeout: 5 * time.Second}}, inventory.Options{Ledger: c.ledger(t, "owner-1"), Departure: rule, Jitter: -1})
		require.NoError(t, err)
		return inv
	}
	first := leader()
	src.set(all...)
	require.NoError(t, first.RefreshAll(ctx))
	src.set(all[4:]...) // four vanish: each leaves after three listings
	require.NoError(t, first.RefreshAll(ctx))
	c.counter.failAfter.Store(c.counter.writes.Load() + 2) // the leader dies two writes into its next save
	_ = first.RefreshAll(ctx)                              // its save fails: the error is the save's, logged
	c.counter.failAfter.Store(0)

	reader := c.ledger(t, "owner-1")
	missed := func() map[string]int {
		t.Helper()
		b, err := reader.Load(ctx)
		require.NoError(t, err)
		out := map[string]int{}
		for _, r := range b.Clusters {
			if r.Missed > 0 {
				out[r.ID] = r.Missed
			}
		}
		return out
	}
	cut := missed()
	require.Len(t, cut, 4, "every departing record is whole")
	var atOne, atTwo []string
	for id, n := range cut {
		if n == 2 {
			atTwo = append(atTwo, id)
		} else {
			atOne = append(atOne, id)
		}
	}
	require.NotEmpty(t, atTwo, "the writes before the cut are there: %v", cut)
	require.NotEmpty(t, atOne, "the cut came before the last record's write: %v", cut)

	// each next leader lists once and saves, then goes (its Lease lost)
	lead := func(listings int) {
		t.Helper()
		inv := leader()
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); inv.Run(rctx) }()
		defer func() { cancel(); <-done }()
		require.Eventually(t, func() bool { return src.listings() == listings && !inv.Status().Sources[0].LastSuccess.IsZero() },
			10*time.Second, 10*time.Millisecond, "the leader's listing")
		want := map[string]int{}
		for id, n := range cut {
			if n+listings-3 < rule.AfterListings { // the first leader listed three times
				want[id] = n + listings - 3
			}
		}
		require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, missed()) }, 10*time.Second, 50*time.Millisecond,
			"listing %d saved: each count one further than the ledger held, those at %d confirmed", listings, rule.AfterListings)
		served := map[string]bool{}
		for _, cl := range inv.Snapshot().Clusters {
			served[cl.Key()] = true
		}
		for id, n := range cut {
			assert.Equal(t, n+listings-3 < rule.AfterListings, served[id], "%s (saved at %d): served after listing %d", id, n, listings)
		}
	}
	lead(4)
	lead(5)
	assert.Empty(t, missed(), "every departure confirmed, each after three listings in all")
}
