package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// process is one run of the service's leader: an inventory over the test's
// sources that keeps its records in a ledger that outlives it.
type process struct {
	t      *testing.T
	ledger Ledger
	rule   Departure
	srcs   []*listings
	clk    *clock
	inv    *Inventory
}

func newProcess(t *testing.T, rule Departure, srcs ...*listings) *process {
	p := &process{t: t, ledger: NewMemory(), rule: rule, srcs: srcs,
		clk: &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), step: time.Second}}
	p.restart()
	return p
}

// restart replaces the process by a new one on the same ledger, as a pod
// replaced by an upgrade: it loads the ledger before its first listing.
func (p *process) restart() {
	p.t.Helper()
	var specs []SourceSpec
	for i, s := range p.srcs {
		specs = append(specs, spec(fmt.Sprintf("s%d", i+1), s))
	}
	inv, err := New(specs, Options{Departure: p.rule, Now: p.clk.Now, Registerer: prometheus.NewRegistry(), Ledger: p.ledger})
	require.NoError(p.t, err)
	require.True(p.t, inv.load(context.Background()))
	p.inv = inv
}

func (p *process) list() *Snapshot {
	p.t.Helper()
	require.NoError(p.t, p.inv.RefreshAll(context.Background()))
	return p.inv.Snapshot()
}

// TestRestartResumesTheLifecycle restarts the process between listings at
// each step of a lifecycle: every answer after a restart is the answer
// before it, and every count goes on where it was.
func TestRestartResumesTheLifecycle(t *testing.T) {
	ready := sources.PhaseReady
	t.Run("a departure in progress completes after AfterListings listings in all, not after a restart", func(t *testing.T) {
		src := &listings{}
		p := newProcess(t, Departure{AfterListings: 3, GracePeriod: -1}, src)
		stay := []sources.Cluster{inPhase("a", ready), inPhase("b", ready), inPhase("c", ready), inPhase("d", ready)}
		src.set(append([]sources.Cluster{inPhase("x", ready)}, stay...)...)
		p.list()
		src.set(stay...) // one of five: not a mass drop
		assert.Equal(t, sources.PhaseAbsent, served(p.list())["x"], "missed 1")
		p.restart()
		assert.Equal(t, sources.PhaseAbsent, served(p.inv.Snapshot())["x"], "a restart serves what was served")
		assert.Equal(t, sources.PhaseAbsent, served(p.list())["x"], "missed 2")
		p.restart()
		assert.NotContains(t, served(p.list()), "x", "missed 3: confirmed, counting the listings of both processes")
	})
	t.Run("a held mass drop stays held across restarts", func(t *testing.T) {
		src := &listings{}
		p := newProcess(t, Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 6}, src)
		var all []sources.Cluster
		for i := range 8 {
			all = append(all, inPhase(fmt.Sprintf("c%d", i), ready))
		}
		src.set(all...)
		p.list()
		src.set() // the token lost its rights: 200 with no clusters
		for i := range 5 {
			snap := p.list()
			require.Len(t, snap.Clusters, 8, "listing %d", i+1)
			p.restart()
			snap = p.inv.Snapshot()
			require.Len(t, snap.Clusters, 8, "restart after listing %d", i+1)
			st, _ := snap.Source("s1")
			require.Equal(t, 8, st.HeldDepartures, "restart after listing %d", i+1)
		}
		assert.Empty(t, p.list().Clusters, "the sixth listing confirms the drop")
	})
}

// TestRestartKeepsRenderingsAndNames: what a new process serves first is
// what the last one served: kept renderings, established clusters and
// their names, the last complete listing of a failing source.
func TestRestartKeepsRenderingsAndNames(t *testing.T) {
	ready := sources.PhaseReady
	t.Run("a kept rendering is served after a restart", func(t *testing.T) {
		src := &listings{}
		p := newProcess(t, Departure{}, src)
		good := inPhase("x", ready)
		good.Server = "https://x.example.com"
		src.set(good)
		p.list()
		broken := inPhase("x", sources.PhaseDegraded)
		broken.Ready, broken.NotReadyReason, broken.Server = false, "cacerts unavailable", "https://wrong.example.com"
		src.set(broken)
		p.list()
		p.restart()
		for range 2 {
			snap := p.list()
			require.Len(t, snap.Clusters, 1)
			assert.Equal(t, "https://x.example.com", snap.Clusters[0].Server)
			assert.Equal(t, sources.PhaseDegraded, snap.Clusters[0].Phase)
			assert.Equal(t, []Kept{{Name: "x", Source: "s1", Reason: "cacerts unavailable"}}, snap.Kept)
			p.restart()
		}
	})
	t.Run("an established cluster seen pending again stays served", func(t *testing.T) {
		src := &listings{}
		p := newProcess(t, Departure{}, src)
		src.set(inPhase("x", ready))
		p.list()
		p.restart()
		src.set(inPhase("x", sources.PhasePending)) // Rancher node-group replacement
		assert.Equal(t, sources.PhaseDegraded, served(p.list())["x"])
	})
	t.Run("the established cluster keeps its name against a newcomer after a restart", func(t *testing.T) {
		s1, s2 := &listings{}, &listings{}
		p := newProcess(t, Departure{}, s1, s2)
		s1.set(inPhase("prod", ready))
		p.list()
		p.restart()
		newcomer := inPhase("prod", ready)
		newcomer.ID, newcomer.Server = "id-newcomer", "https://newcomer.example.com"
		s2.set(newcomer)
		snap := p.list()
		require.Len(t, snap.Clusters, 1)
		assert.Equal(t, "s1", snap.Clusters[0].Source)
		assert.Equal(t, []Conflict{{Name: "prod", Sources: []string{"s1", "s2"}, KeptSource: "s1"}}, snap.Conflicts)
	})
	t.Run("a restart while the upstream fails serves the last complete listing, not an empty answer", func(t *testing.T) {
		src := &listings{}
		p := newProcess(t, Departure{}, src)
		src.set(inPhase("x", ready), inPhase("y", ready))
		p.list()
		src.mu.Lock()
		src.err = fmt.Errorf("rancher: 503")
		src.mu.Unlock()
		p.restart()
		snap := p.inv.Snapshot()
		require.True(t, snap.Synced(), "the ledger says the source has listed: no barrier after a restart")
		require.Error(t, p.inv.RefreshAll(context.Background()))
		snap = p.inv.Snapshot()
		assert.Equal(t, []string{"x", "y"}, names(snap))
		st, _ := snap.Source("s1")
		assert.True(t, st.Stale)
	})
}

// TestFollowerAnswersAsTheLeader: an inventory that follows the ledger
// shows, at every step, the snapshot the leader's inventory shows.
func TestFollowerAnswersAsTheLeader(t *testing.T) {
	s1, s2 := &listings{}, &listings{}
	p := newProcess(t, Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.5, HeldListings: 4}, s1, s2)
	follower, err := New([]SourceSpec{spec("s1", s1), spec("s2", s2)}, Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); follower.Follow(ctx, p.ledger.(Feed)) }()
	t.Cleanup(func() { cancel(); <-done })
	require.False(t, follower.Snapshot().Synced(), "nothing listed: the follower answers 503 as the leader does")

	newcomer := inPhase("a", sources.PhaseReady)
	newcomer.ID, newcomer.Server = "id-a2", "https://a2.example.com"
	broken := inPhase("k", sources.PhaseReady)
	broken.Ready, broken.NotReadyReason = false, "no CA"
	steps := [][2][]sources.Cluster{
		{{inPhase("a", "ready"), inPhase("b", "ready"), inPhase("k", "ready")}, {inPhase("p", "pending")}},
		{{inPhase("a", "ready"), inPhase("b", "degraded"), broken}, {newcomer, inPhase("p", "ready")}},
		{{inPhase("a", "ready")}, {newcomer}},
		{{inPhase("a", "ready")}, {newcomer, inPhase("p", "leaving")}},
		{{}, {}},
	}
	for i, step := range steps {
		s1.set(step[0]...)
		s2.set(step[1]...)
		want := p.list()
		require.Eventually(t, func() bool { return follower.Snapshot().Version >= 1 && sameContent(want, follower.Snapshot()) },
			5*time.Second, time.Millisecond, "step %d: the follower shows what the leader shows", i+1)
		assert.Equal(t, want.Clusters, follower.Snapshot().Clusters, "step %d", i+1)
	}
}

// advance moves the clock by d at once (the time between two listings).
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestGracePeriodSurvivesARestart: the grace period runs from when the
// cluster was first seen missing, as the ledger remembers it: a restart
// neither ends it early (the listings are enough, the minute is not) nor
// starts it again.
func TestGracePeriodSurvivesARestart(t *testing.T) {
	ready := sources.PhaseReady
	src := &listings{}
	p := newProcess(t, Departure{AfterListings: 2, GracePeriod: time.Minute, MaxFraction: 1}, src)
	src.set(inPhase("x", ready), inPhase("y", ready))
	p.list()
	src.set(inPhase("y", ready))
	assert.Equal(t, sources.PhaseAbsent, served(p.list())["x"], "missed 1: the grace period starts")
	p.clk.advance(40 * time.Second)
	p.restart()
	assert.Equal(t, sources.PhaseAbsent, served(p.inv.Snapshot())["x"])
	snap := p.list()
	assert.Equal(t, sources.PhaseAbsent, served(snap)["x"], "missed 2, but under a minute since it went missing: still served")
	assert.False(t, snap.HasDeparted("s1", "id-x"))
	p.clk.advance(20 * time.Second) // a minute since it went missing, 20 s since the restart
	snap = p.list()
	assert.NotContains(t, served(snap), "x", "the grace period counted from before the restart is over")
	assert.True(t, snap.HasDeparted("s1", "id-x"))
}

// TestBreakerHoldSurvivesARestart: departures the breaker held stay held
// across a restart: served, and counted as held, until acknowledged (or,
// without acknowledgements, until heldListings listings in all).
func TestBreakerHoldSurvivesARestart(t *testing.T) {
	rule := Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 4, MaxDeletions: 2, MaxDeletionsPercent: 10}
	var fleet, remaining []sources.Cluster
	for i := range 20 {
		c := inPhase(fmt.Sprintf("c%02d", i), sources.PhaseReady)
		fleet = append(fleet, c)
		if i < 5 {
			c.Phase = sources.PhaseLeaving // deleted upstream: seen leaving, never a mass drop
		}
		remaining = append(remaining, c)
	}
	for _, tc := range []struct {
		name   string
		acks   bool
		served []int // after each listing once restarted
	}{
		{name: "with acknowledgements: held until acknowledged", acks: true, served: []int{20, 20, 20, 20}},
		{name: "without: heldListings in all, counting the listings before the restart", served: []int{20, 15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			acked := false
			ledger, src := NewMemory(), &listings{}
			start := func() *Inventory {
				t.Helper()
				opts := Options{Departure: rule, Ledger: ledger, Registerer: prometheus.NewRegistry()}
				if tc.acks {
					opts.Acknowledged = func(string, string) bool { mu.Lock(); defer mu.Unlock(); return acked }
				}
				inv, err := New([]SourceSpec{spec("s1", src)}, opts)
				require.NoError(t, err)
				require.True(t, inv.load(context.Background()))
				return inv
			}
			inv := start()
			src.set(fleet...)
			require.NoError(t, inv.RefreshAll(context.Background()))
			src.set(remaining...)
			for range 2 { // the second confirms 5 departures at once: over the breaker's 2
				require.NoError(t, inv.RefreshAll(context.Background()))
			}
			require.Len(t, inv.Snapshot().Clusters, 20, "the breaker held them")

			inv = start()
			snap := inv.Snapshot()
			require.Len(t, snap.Clusters, 20, "a restart serves what the breaker held")
			st, _ := snap.Source("s1")
			assert.Equal(t, 5, st.HeldDepartures, "and counts them as held")
			for i, want := range tc.served {
				require.NoError(t, inv.RefreshAll(context.Background()))
				require.Len(t, inv.Snapshot().Clusters, want, "listing %d after the restart", i+1)
			}
			if !tc.acks {
				return
			}
			st, _ = inv.Snapshot().Source("s1")
			assert.Equal(t, 5, st.HeldDepartures, "far past heldListings: acknowledgements decide")
			mu.Lock()
			acked = true
			mu.Unlock()
			require.NoError(t, inv.RefreshAll(context.Background()))
			assert.Len(t, inv.Snapshot().Clusters, 15, "acknowledged: confirmed")
		})
	}
}

// TestNameHolderKeepsItsNameAfterARestart: the name a cluster was served
// under is in the ledger; after a restart an older cluster renamed onto it
// is still the newcomer, also while the holder's source fails and is
// served from its last complete listing.
func TestNameHolderKeepsItsNameAfterARestart(t *testing.T) {
	for _, holderFailing := range []bool{false, true} {
		t.Run(fmt.Sprintf("the holder's source failing: %v", holderFailing), func(t *testing.T) {
			s1, s2 := &listings{}, &listings{}
			p := newProcess(t, Departure{}, s1, s2)
			older := inPhase("a", sources.PhaseReady)
			s1.set(older)
			s2.set()
			p.list()
			s2.set(inPhase("b", sources.PhaseReady))
			require.Equal(t, []string{"a", "b"}, names(p.list()), "a established first, then b")

			p.restart()
			if holderFailing {
				s2.mu.Lock()
				s2.err = errors.New("rancher: 503")
				s2.mu.Unlock()
			}
			renamed := older
			renamed.Name = "b" // the older cluster renamed onto the name b holds
			s1.set(renamed)
			err := p.inv.RefreshAll(context.Background())
			assert.Equal(t, holderFailing, err != nil)
			snap := p.inv.Snapshot()
			require.Len(t, snap.Clusters, 1)
			assert.Equal(t, "s2", snap.Clusters[0].Source, "the holder keeps its name")
			assert.Equal(t, "https://b.example.com", snap.Clusters[0].Server)
			assert.Equal(t, []Conflict{{Name: "b", Sources: []string{"s1", "s2"}, KeptSource: "s2"}}, snap.Conflicts)
		})
	}
}

// TestFollowerServesANewcomerAfterItsJoinDelay: a follower serves a
// cluster JoinDelay after the leader established it, so that replicas
// whose watches bring the record a moment apart start serving it at the
// same time (a 200 with it from one replica, then one without it from
// another, would delete the Application Argo CD just created). Until
// then it is unserved, "joining"; the clusters served already stay, and
// those of the first answer are served at once.
func TestFollowerServesANewcomerAfterItsJoinDelay(t *testing.T) {
	const delay = 2 * time.Second
	s1 := &listings{}
	p := newProcess(t, Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.5, HeldListings: 4}, s1)
	p.clk.mu.Lock()
	p.clk.now, p.clk.step = time.Now(), 0 // the leader establishes on the clock the follower reads
	p.clk.mu.Unlock()
	follower, err := New([]SourceSpec{spec("s1", s1)}, Options{JoinDelay: delay})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); follower.Follow(ctx, p.ledger.(Feed)) }()
	t.Cleanup(func() { cancel(); <-done })
	joining := func(name string) func() bool {
		return func() bool {
			for _, u := range follower.Snapshot().Unserved {
				if u.Name == name && strings.HasPrefix(u.Reason, "joining: served from ") {
					return true
				}
			}
			return false
		}
	}
	serves := func(want ...string) func() bool {
		return func() bool { return slices.Equal(names(follower.Snapshot()), want) }
	}

	a := inPhase("a", sources.PhaseReady)
	s1.set(a)
	p.list()
	require.Eventually(t, func() bool { return follower.Snapshot().Synced() }, delay, time.Millisecond)
	assert.Equal(t, []string{"a"}, names(follower.Snapshot()),
		"the first answer's clusters are served at once: an answer without them would delete their Applications")

	p.clk.mu.Lock()
	p.clk.now = time.Now()
	p.clk.mu.Unlock()
	s1.set(a, inPhase("b", sources.PhaseReady))
	p.list()
	require.Eventually(t, joining("b"), delay, time.Millisecond, "b is joining")
	assert.Equal(t, []string{"a"}, names(follower.Snapshot()), "a stays served while b joins")
	require.Eventually(t, serves("a", "b"), 2*delay, time.Millisecond, "served once its join delay passed, with no book to bring it")
}

// TestRestartKeepsTheSourceSynced: a new leader whose first listing of a
// source fails shows the source in its metrics as the ledger holds it
// (synced, stale, its failures counted on), not as never synced: the
// alert on a source that never listed must not fire after a restart.
func TestRestartKeepsTheSourceSynced(t *testing.T) {
	ctx := context.Background()
	src := &listings{}
	p := newProcess(t, Departure{}, src)
	src.set(inPhase("x", sources.PhaseReady))
	p.list()
	src.mu.Lock()
	src.err = errors.New("rancher: 503")
	src.mu.Unlock()
	require.Error(t, p.inv.RefreshAll(ctx))
	p.restart()
	require.Error(t, p.inv.RefreshAll(ctx))
	m := p.inv.metrics
	assert.Equal(t, 1.0, testutil.ToFloat64(m.synced.WithLabelValues("s1")), "synced before the restart")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.stale.WithLabelValues("s1")))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.failures.WithLabelValues("s1")), "one failure before the restart, one after")
	assert.Len(t, p.inv.Snapshot().Clusters, 1, "its last complete listing is served")
}
