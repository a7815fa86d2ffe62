package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestRenamedSourceIsANewSource: a source renamed in the configuration is
// a new source, and the old one is retired, not forgotten: its clusters
// stay served (and their listing by the new name is a duplicate, not a
// second Secret) until their departure is confirmed as a vanished fleet's,
// held for HeldListings listings here (the in-memory ledger's rule); then
// the new source serves them and the old one is gone. A follower of the
// ledger answers the same at every step.
func TestRenamedSourceIsANewSource(t *testing.T) {
	rule := Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 4}
	clk := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), step: time.Second}
	ledger := NewMemory()
	src := &listings{}
	var fleet []sources.Cluster
	for i := range 3 {
		fleet = append(fleet, inPhase(fmt.Sprintf("c%d", i), sources.PhaseReady))
	}
	src.set(fleet...)
	start := func(name string) *Inventory {
		inv, err := New([]SourceSpec{spec(name, src)}, Options{Departure: rule, Now: clk.Now, Registerer: prometheus.NewRegistry(), Ledger: ledger})
		require.NoError(t, err)
		require.True(t, inv.load(context.Background()))
		return inv
	}
	sourceNames := func(snap *Snapshot) map[string]string {
		out := map[string]string{}
		for _, c := range snap.Clusters {
			out[c.Name] = c.Source
		}
		return out
	}
	old := start("rancher")
	require.NoError(t, old.RefreshAll(context.Background()))
	require.Equal(t, map[string]string{"c0": "rancher", "c1": "rancher", "c2": "rancher"}, sourceNames(old.Snapshot()))

	renamed := start("rancher-eu") // the same upstream under a new name
	var followerLog testlog.Buffer
	follower, err := New([]SourceSpec{spec("rancher-eu", src)}, Options{Logger: slog.New(slog.NewJSONHandler(&followerLog, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); follower.Follow(ctx, ledger) }()
	t.Cleanup(func() { cancel(); <-done })

	snap := renamed.Snapshot()
	st, ok := snap.Source("rancher")
	require.True(t, ok, "the old source is known, retired")
	assert.True(t, st.Retired)
	assert.True(t, st.Synced, "a retired source is no barrier")
	assert.False(t, snap.Synced(), "the new source has never listed: the barrier, as for any new source")

	// the first listing of the new source, alone: the retired one's
	// alongside would fail or not depending on which ends first
	listOnly(t, renamed, "rancher-eu")
	for i := 1; i < rule.HeldListings; i++ {
		require.NoError(t, renamed.RefreshAll(context.Background()))
		snap = renamed.Snapshot()
		assert.Equal(t, map[string]string{"c0": "rancher", "c1": "rancher", "c2": "rancher"}, sourceNames(snap),
			"listing %d: the old listing is kept while its departure is held", i)
		assert.Len(t, snap.Duplicates, 3, "listing %d: the new source's listings are duplicates, no second Secret", i)
		st, _ = snap.Source("rancher")
		assert.Equal(t, 3, st.HeldDepartures, "listing %d: a vanished fleet is a held drop", i)
		require.Eventually(t, func() bool { return sameContent(snap, follower.Snapshot()) }, 5*time.Second, time.Millisecond,
			"listing %d: the follower answers as the leader", i)
	}
	assert.Equal(t, 1, strings.Count(followerLog.String(), "a source that is not configured"),
		"the follower says once that it follows a retired source, not at every book")
	require.NoError(t, renamed.RefreshAll(context.Background()))
	snap = renamed.Snapshot()
	assert.Equal(t, map[string]string{"c0": "rancher-eu", "c1": "rancher-eu", "c2": "rancher-eu"}, sourceNames(snap),
		"departure confirmed: the new source serves the clusters")
	_, ok = snap.Source("rancher")
	assert.False(t, ok, "the retired source is forgotten once its last cluster departed")
	b, err := ledger.Load(context.Background())
	require.NoError(t, err)
	for _, s := range b.Sources {
		assert.NotEqual(t, "rancher", s.Name, "the ledger forgets it too")
	}
	require.Eventually(t, func() bool {
		f := follower.Snapshot()
		return assert.ObjectsAreEqual(snap.Clusters, f.Clusters) && assert.ObjectsAreEqual(snap.Sources, f.Sources)
	}, 5*time.Second, time.Millisecond, "the follower answers as the leader (the leader alone remembers the departures it confirmed)")
}

// TestRetiredSourceWaitsForTheConfiguredOnes: a source renamed in the
// configuration whose new name cannot list (a wrong credential): the old
// source's clusters are not counted away while the new one has never
// listed, not even past HeldListings (the in-memory ledger's release), so
// the 200 keeps them; once the new source lists, the retired one departs
// as before. Before, once an answer had been given, the retired clusters
// left the answer after HeldListings listings, with nothing listing them.
func TestRetiredSourceWaitsForTheConfiguredOnes(t *testing.T) {
	rule := Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 2}
	clk := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), step: time.Second}
	ledger := NewMemory()
	src := &listings{}
	src.set(inPhase("c0", sources.PhaseReady), inPhase("c1", sources.PhaseReady))
	start := func(name string) *Inventory {
		inv, err := New([]SourceSpec{spec(name, src)}, Options{Departure: rule, Now: clk.Now, Registerer: prometheus.NewRegistry(), Ledger: ledger})
		require.NoError(t, err)
		require.True(t, inv.load(context.Background()))
		return inv
	}
	require.NoError(t, start("rancher").RefreshAll(context.Background()))

	src.mu.Lock()
	src.err = errors.New("401 Unauthorized")
	src.mu.Unlock()
	renamed := start("rancher-eu")
	for i := range 2 * (rule.AfterListings + rule.HeldListings) {
		_ = renamed.RefreshAll(context.Background())
		assert.Equal(t, map[string]sources.Phase{"c0": sources.PhaseReady, "c1": sources.PhaseReady}, served(renamed.Snapshot()),
			"listing %d: served while the new source has never listed", i)
	}
	for _, st := range renamed.Status().Sources {
		if st.Name == "rancher" {
			assert.Contains(t, st.LastError, "waiting for rancher-eu to complete a listing")
		}
	}

	src.set(inPhase("c0", sources.PhaseReady), inPhase("c1", sources.PhaseReady))
	listOnly(t, renamed, "rancher-eu")
	for range rule.AfterListings + rule.HeldListings + 1 {
		require.NoError(t, renamed.RefreshAll(context.Background()))
	}
	_, retired := renamed.Snapshot().Source("rancher")
	assert.False(t, retired, "once the new source lists, the retired one departs")
	assert.Len(t, renamed.Snapshot().Clusters, 2)
}

// listOnly lists the source name of inv alone.
func listOnly(t *testing.T, inv *Inventory, name string) {
	t.Helper()
	for _, st := range inv.statesNow() {
		if st.spec.Name == name {
			require.NoError(t, inv.refresh(context.Background(), st))
			return
		}
	}
	t.Fatalf("no source %s", name)
}
