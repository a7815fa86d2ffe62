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

// TestSoleSeededClusterMissing: a source that served one cluster before
// the ledger, whose first listing into it lacks that cluster, lacks all it
// served: the listing is refused and the source stays unsynced. Listed in
// any phase, leaving included, it is not lacking.
func TestSoleSeededClusterMissing(t *testing.T) {
	only := inPhase("only", sources.PhaseReady)
	for _, tc := range []struct {
		name    string
		listing []sources.Cluster
		refused bool
	}{
		{"listed empty: refused", nil, true},
		{"listed leaving: taken", []sources.Cluster{inPhase("only", sources.PhaseLeaving)}, false},
		{"listed: taken", []sources.Cluster{only}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, seed := &listings{}, &seeded{}
			seed.set(only.ID)
			inv, err := New([]SourceSpec{spec("s1", src)}, Options{Registerer: prometheus.NewRegistry(), Ledger: NewMemory(), Seed: seed.seed})
			require.NoError(t, err)
			require.True(t, inv.load(context.Background()))
			src.set(tc.listing...)
			err = inv.RefreshAll(context.Background())
			if !tc.refused {
				require.NoError(t, err)
				assert.True(t, inv.Snapshot().Synced())
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "lacks 1 of the 1 clusters served before it (id-only)")
			st, _ := inv.Snapshot().Source("s1")
			assert.False(t, st.Synced, "unsynced: the answer is a 503")
			src.set(only)
			require.NoError(t, inv.RefreshAll(context.Background()))
			assert.Equal(t, []string{"only"}, names(inv.Snapshot()), "taken once it is listed again")
		})
	}
}

// seededSources is Options.Seed over several sources: the identities each
// one's cluster Secrets name, and the sources it was asked about.
type seededSources struct {
	mu    sync.Mutex
	ids   map[string][]string
	asked map[string]int
}

func (s *seededSources) seed(_ context.Context, source string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked[source]++
	return s.ids[source], nil
}

func (s *seededSources) askedAbout(source string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[source]
}

// TestSeedIsCheckedPerSource: each source's first listing into the ledger
// is checked against its own clusters served before: the one whose
// listing lacks a mass of them stays unsynced (and the answer a 503), the
// others sync. A source the ledger has not listed yet, configured beside
// one it has, is still checked; the other no longer is.
func TestSeedIsCheckedPerSource(t *testing.T) {
	fleet := func(prefix string) ([]sources.Cluster, []string) {
		var cs []sources.Cluster
		var ids []string
		for i := range 4 {
			c := inPhase(fmt.Sprintf("%s%d", prefix, i), sources.PhaseReady)
			cs, ids = append(cs, c), append(ids, c.ID)
		}
		return cs, ids
	}
	fleet1, ids1 := fleet("a")
	fleet2, ids2 := fleet("b")
	seed := &seededSources{ids: map[string][]string{"s1": ids1, "s2": ids2}, asked: map[string]int{}}
	start := func(ledger Ledger, specs ...SourceSpec) *Inventory {
		t.Helper()
		inv, err := New(specs, Options{Departure: Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 4},
			Registerer: prometheus.NewRegistry(), Ledger: ledger, Seed: seed.seed})
		require.NoError(t, err)
		require.True(t, inv.load(context.Background()))
		return inv
	}

	t.Run("into an empty ledger: the source lacking its clusters stays unsynced", func(t *testing.T) {
		s1, s2 := &listings{}, &listings{}
		inv := start(NewMemory(), spec("s1", s1), spec("s2", s2))
		s1.set(fleet1...)
		s2.set(fleet2[:1]...) // one of its four: a role that lost most of its rights
		err := inv.RefreshAll(context.Background())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "source s2: list clusters: the first listing into the ledger lacks 3 of the 4 clusters")
		snap := inv.Snapshot()
		st1, _ := snap.Source("s1")
		st2, _ := snap.Source("s2")
		assert.True(t, st1.Synced)
		assert.False(t, st2.Synced)
		assert.False(t, snap.Synced(), "the answer is a 503 while one source is unsynced")
	})
	t.Run("a source new to the ledger beside one it holds", func(t *testing.T) {
		s1, s2, ledger := &listings{}, &listings{}, NewMemory()
		inv := start(ledger, spec("s1", s1))
		s1.set(fleet1...)
		require.NoError(t, inv.RefreshAll(context.Background()), "the ledger holds s1's listing only")
		asked := seed.askedAbout("s1")
		inv = start(ledger, spec("s1", s1), spec("s2", s2)) // s2 configured beside it
		s1.set()                                            // from now on a held drop, not a refusal
		s2.set()                                            // 200 []
		err := inv.RefreshAll(context.Background())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "source s2: list clusters: the first listing into the ledger lacks 4 of the 4 clusters")
		assert.NotContains(t, err.Error(), "source s1")
		assert.Equal(t, asked, seed.askedAbout("s1"), "s1 is in the ledger: its Secrets are not read")
		snap := inv.Snapshot()
		assert.Len(t, snap.Clusters, 4, "s1's clusters held")
		st2, _ := snap.Source("s2")
		assert.False(t, st2.Synced)
		s2.set(fleet2...)
		require.NoError(t, inv.RefreshAll(context.Background()))
		assert.True(t, inv.Snapshot().Synced(), "s2's clusters listed again: taken")
	})
}

// TestUpgradeKeepsTheNameHolder: two clusters listed under one name at the
// upgrade into an empty ledger. The previous version served one of them
// (its Secret names it): it keeps the name, and the other is the newcomer,
// instead of the name being served to neither and the holder's
// Applications deleted. A restart changes nothing.
func TestUpgradeKeepsTheNameHolder(t *testing.T) {
	holder, newcomer := inPhase("prod", sources.PhaseReady), inPhase("prod", sources.PhaseReady)
	holder.ID, holder.Server = "id-holder", "https://holder.example.com"
	newcomer.ID, newcomer.Server = "id-newcomer", "https://newcomer.example.com"
	others := []sources.Cluster{inPhase("c0", sources.PhaseReady), inPhase("c1", sources.PhaseReady)}
	src, seed, ledger := &listings{}, &seeded{}, NewMemory()
	seed.set(holder.ID, others[0].ID, others[1].ID)
	src.set(append([]sources.Cluster{newcomer, holder}, others...)...)
	start := func() *Inventory {
		inv, err := New([]SourceSpec{spec("s1", src)}, Options{Registerer: prometheus.NewRegistry(), Ledger: ledger, Seed: seed.seed})
		require.NoError(t, err)
		require.True(t, inv.load(context.Background()))
		require.NoError(t, inv.RefreshAll(context.Background()))
		return inv
	}
	for _, step := range []string{"the first listing into the ledger", "after a restart"} {
		snap := start().Snapshot()
		ids := map[string]string{}
		for _, c := range snap.Clusters {
			ids[c.Name] = c.ID
		}
		assert.Equal(t, map[string]string{"prod": "id-holder", "c0": "id-c0", "c1": "id-c1"}, ids, step)
		require.Len(t, snap.Conflicts, 1, step)
	}
}
