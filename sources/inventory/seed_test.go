package inventory

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// seeded stands for the cluster Secrets a version without a ledger left:
// the identities Options.Seed returns, which the test deletes as an
// operator would.
type seeded struct {
	mu    sync.Mutex
	ids   []string
	calls int
}

func (s *seeded) seed(_ context.Context, source string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if source != "s1" {
		return nil, nil
	}
	return s.ids, nil
}

func (s *seeded) set(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = ids
}

func (s *seeded) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// TestUpgradeIntoAnEmptyLedger: the first listing into an empty ledger that
// lacks a mass of the clusters served before it (what the previous
// version's Secrets name) is refused: the source stays unsynced, nothing is
// served, until they are listed again or their Secrets are deleted. A
// listing that lacks a few is taken. Once the ledger holds a listing,
// nothing is checked any more, across restarts too.
func TestUpgradeIntoAnEmptyLedger(t *testing.T) {
	rule := Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 4}
	var fleet []sources.Cluster
	var ids []string
	for i := range 8 {
		c := inPhase(fmt.Sprintf("c%d", i), sources.PhaseReady)
		fleet, ids = append(fleet, c), append(ids, c.ID)
	}
	start := func(t *testing.T, ledger Ledger, seed *seeded, src *listings) *Inventory {
		t.Helper()
		inv, err := New([]SourceSpec{spec("s1", src)}, Options{Departure: rule, Registerer: prometheus.NewRegistry(),
			Ledger: ledger, Seed: seed.seed})
		require.NoError(t, err)
		require.True(t, inv.load(context.Background()))
		return inv
	}
	t.Run("a token that lost its access at the upgrade: 503 until the clusters are listed again", func(t *testing.T) {
		src, seed, ledger := &listings{}, &seeded{}, NewMemory()
		seed.set(ids...)
		inv := start(t, ledger, seed, src)
		src.set() // 200 []
		for range 3 {
			err := inv.RefreshAll(context.Background())
			require.Error(t, err)
			assert.Contains(t, err.Error(), "lacks 8 of the 8 clusters served before it (id-c0, id-c1, id-c2)")
			assert.False(t, inv.Snapshot().Synced(), "unsynced: the answer is a 503, Argo CD keeps every Application")
		}
		inv = start(t, ledger, seed, src) // a restart changes nothing
		require.Error(t, inv.RefreshAll(context.Background()))
		assert.False(t, inv.Snapshot().Synced())

		src.set(fleet...) // the access is back
		require.NoError(t, inv.RefreshAll(context.Background()))
		assert.Len(t, inv.Snapshot().Clusters, 8)
		calls := seed.count()
		src.set()
		require.NoError(t, inv.RefreshAll(context.Background()), "from now on the ledger decides: a held drop")
		assert.Len(t, inv.Snapshot().Clusters, 8, "held")
		inv = start(t, ledger, seed, src)
		require.NoError(t, inv.RefreshAll(context.Background()))
		assert.Equal(t, calls, seed.count(), "the Secrets are read only until the ledger holds a listing")
	})
	t.Run("clusters really gone: taken once their Secrets are deleted", func(t *testing.T) {
		src, seed := &listings{}, &seeded{}
		seed.set(ids...)
		inv := start(t, NewMemory(), seed, src)
		src.set(fleet[:4]...)
		require.Error(t, inv.RefreshAll(context.Background()))
		seed.set(ids[:4]...) // the operator deleted the Secrets of c4..c7
		require.NoError(t, inv.RefreshAll(context.Background()))
		assert.Equal(t, []string{"c0", "c1", "c2", "c3"}, names(inv.Snapshot()))
	})
	t.Run("a few missing is no drop: taken at once", func(t *testing.T) {
		src, seed := &listings{}, &seeded{}
		seed.set(ids...)
		inv := start(t, NewMemory(), seed, src)
		src.set(append(fleet[1:7:7], inPhase("new", sources.PhaseReady))...)
		require.NoError(t, inv.RefreshAll(context.Background()))
		assert.Len(t, inv.Snapshot().Clusters, 7)
	})
	t.Run("a fresh installation has no Secrets: nothing to check", func(t *testing.T) {
		src, seed := &listings{}, &seeded{}
		inv := start(t, NewMemory(), seed, src)
		src.set()
		require.NoError(t, inv.RefreshAll(context.Background()))
		assert.True(t, inv.Snapshot().Synced())
	})
}
