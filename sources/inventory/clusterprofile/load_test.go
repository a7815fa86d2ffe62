package clusterprofile

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

// What a new leader resumes from: the book Load reads, as the inventory
// runs on it.

// TestUnreadableRecordFailsTheLoad holds the load's refusal of a hole: an
// object of ours whose record cannot be read fails Load, not left out, so
// that a leader never starts from a book missing a cluster (it would
// forget its departure count, or see it as new); an inventory on that
// ledger does not list while it cannot load. A replica that starts then
// has read the ledger (ready) and says why it has no answer.
func TestUnreadableRecordFailsTheLoad(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, record string }{
		{name: "not JSON", record: `{"source":"rancher","id":`},
		{name: "no source and id", record: `{"served":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			require.NoError(t, c.ledger(t, "owner-1").Save(ctx, ledgertest.Fleet(2)))
			name := c.profileNames(t)[0]
			good := c.setRecord(t, name, tc.record)

			_, err := c.ledger(t, "owner-1").Load(ctx)
			assert.ErrorContains(t, err, name)

			// a replica that starts now is ready and answers why it has no
			// answer, until the record is readable again
			view := newInventory(t, &listing{}, nil)
			fctx, stop := context.WithCancel(ctx)
			followed := make(chan struct{})
			feed, err := New(c.cfg, Options{Namespace: c.ns, OwnerID: "owner-1", UnsettledAfter: 3 * time.Second})
			require.NoError(t, err)
			go func() { defer close(followed); view.Follow(fctx, feed) }()
			defer func() { stop(); <-followed }()
			require.Never(t, view.Followed, 500*time.Millisecond, 10*time.Millisecond,
				"told before UnsettledAfter (a save in progress adds up within it)")
			require.Eventually(t, view.Followed, 10*time.Second, 10*time.Millisecond, "the feed has read the ledger")
			assert.Equal(t, Unsettled, view.Snapshot().Unsettled)
			c.setRecord(t, name, good)
			require.Eventually(t, func() bool { return len(view.Snapshot().Clusters) == 2 }, 10*time.Second, 10*time.Millisecond)
			assert.Empty(t, view.Snapshot().Unsettled)
			c.setRecord(t, name, tc.record)

			src := &listing{}
			src.set(ready("prod-00"), ready("prod-01"))
			inv := newInventory(t, src, c.ledger(t, "owner-1"))
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			inv.Run(rctx) // returns when rctx ends
			assert.Zero(t, src.listings(), "listed though the ledger cannot be loaded")
			assert.Empty(t, inv.Snapshot().Clusters)
		})
	}
}

// TestBreakerHoldSurvivesTheLedger holds the breaker's hold across
// leaders: a departure the breaker held (Blocked) is read back from the
// ClusterProfiles by a new leader as held by the breaker, so that seeing
// the cluster leaving does not release it (as it would a mass drop's): it
// stays served until HeldListings.
func TestBreakerHoldSurvivesTheLedger(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	var all []sources.Cluster
	for i := range 20 {
		all = append(all, ready(fmt.Sprintf("c%02d", i)))
	}
	src := &listing{}
	first := newInventory(t, src, c.ledger(t, "owner-1"))
	src.set(all...)
	require.NoError(t, first.RefreshAll(ctx))
	src.set(append(leaving(all[:3]), all[3:]...)...) // three deleted upstream at once: over the breaker (2)
	for range 2 {
		require.NoError(t, first.RefreshAll(ctx))
	}
	st, _ := first.Snapshot().Source("s1")
	require.Equal(t, 3, st.HeldDepartures, "the breaker held the three")
	require.Len(t, first.Snapshot().Clusters, 20)

	// a new leader; c01 and c02 are back, c00 still leaving: alone, within
	// the breaker, it would be confirmed at once if its hold were released
	src.set(append(leaving(all[:1]), all[1:]...)...)
	next := newInventory(t, src, c.ledger(t, "owner-1"))
	reader := c.ledger(t, "owner-1") // before next runs: a client made while others send races on the counter
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); next.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return src.listings() == 4 && !next.Status().Sources[0].LastSuccess.IsZero() },
		10*time.Second, 10*time.Millisecond, "the new leader's listing")
	assert.True(t, slices.ContainsFunc(next.Snapshot().Clusters, func(c *sources.Cluster) bool { return c.Name == "c00" }),
		"c00, held by the breaker, is still served though seen leaving")

	var saved inventory.Record
	require.Eventually(t, func() bool {
		b, err := reader.Load(ctx)
		if err != nil {
			return false
		}
		i := slices.IndexFunc(b.Clusters, func(r inventory.Record) bool { return r.ID == "id-c00" })
		if i >= 0 {
			saved = b.Clusters[i]
		}
		return saved.Missed == 3
	}, 10*time.Second, 50*time.Millisecond, "the new leader's save")
	assert.True(t, saved.Served && saved.Held && saved.Blocked, "%+v", saved)
}

// breakerRule confirms a departure after two listings, but at most two in
// one listing (of 20 clusters); a held one after six.
var breakerRule = inventory.Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 6,
	MaxDeletions: 2, MaxDeletionsPercent: 10}

// newInventory is an inventory of one source, s1, listing src, on ledger l.
func newInventory(t *testing.T, src sources.Source, l *Ledger) *inventory.Inventory {
	t.Helper()
	inv, err := inventory.New([]inventory.SourceSpec{{Name: "s1", Provider: sources.ProviderStatic, Kind: sources.KindFile,
		Source: src, Interval: time.Hour, Timeout: 5 * time.Second}}, inventory.Options{Ledger: l, Departure: breakerRule, Jitter: -1})
	require.NoError(t, err)
	return inv
}

func ready(name string) sources.Cluster {
	return sources.Cluster{Name: name, ID: "id-" + name, Server: "https://" + name + ".example.com/", Ready: true, Phase: sources.PhaseReady}
}

// leaving returns cs as deleted upstream: listed, leaving.
func leaving(cs []sources.Cluster) []sources.Cluster {
	out := slices.Clone(cs)
	for i := range out {
		out[i].Phase = sources.PhaseLeaving
	}
	return out
}

// listing is a source whose listing the test sets; it counts its
// listings.
type listing struct {
	clusters atomic.Pointer[[]sources.Cluster]
	n        atomic.Int32
}

func (s *listing) set(cs ...sources.Cluster) { s.clusters.Store(&cs) }

func (s *listing) listings() int { return int(s.n.Load()) }

// Clusters implements sources.Source.
func (s *listing) Clusters(context.Context) ([]sources.Cluster, error) {
	s.n.Add(1)
	return *s.clusters.Load(), nil
}
