package inventory

// The rules that decide when a drop is held.

import (
	"context"
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

// TestMassDropCounting: a drop is counted against the clusters served
// before the listing, so newcomers in the same listing never hide it, and
// a source's only cluster vanishing is held too; a cluster seen leaving
// first is a deletion, not a drop.
func TestMassDropCounting(t *testing.T) {
	d := Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 5}
	fleet := func(prefix string, n int) []sources.Cluster {
		var out []sources.Cluster
		for i := range n {
			out = append(out, inPhase(fmt.Sprintf("%s%d", prefix, i), sources.PhaseReady))
		}
		return out
	}
	cases := []struct {
		name      string
		before    []sources.Cluster
		steps     [][]sources.Cluster // listings after before
		wantHeld  int
		wantAfter int // served clusters after the steps
	}{
		{"newcomers do not dilute a drop (a token swapped for another user's)", fleet("old", 4),
			[][]sources.Cluster{fleet("new", 20), fleet("new", 20)}, 4, 24},
		{"the only cluster of a source vanishing is held", fleet("only", 1),
			[][]sources.Cluster{{}, {}}, 1, 1},
		{"the only cluster seen leaving, then gone, departs after afterListings", fleet("only", 1),
			[][]sources.Cluster{{inPhase("only0", sources.PhaseLeaving)}, {}}, 0, 0},
		{"one cluster of five is an ordinary departure", fleet("c", 5),
			[][]sources.Cluster{fleet("c", 4), fleet("c", 4)}, 0, 4},
		{"a loss spread over listings is one drop (a role removed subscription by subscription)", fleet("c", 8),
			[][]sources.Cluster{fleet("c", 6), fleet("c", 4), fleet("c", 4), fleet("c", 4)}, 4, 8},
		{"a deletion seen leaving does not join a later drop", fleet("c", 8),
			[][]sources.Cluster{append(fleet("c", 4), inPhase("c4", sources.PhaseLeaving), inPhase("c5", sources.PhaseLeaving),
				inPhase("c6", sources.PhaseLeaving), inPhase("c7", sources.PhaseLeaving)), fleet("c", 4)}, 0, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := &listings{}
			inv := newLifecycleInventory(t, d, time.Second, src)
			src.set(tc.before...)
			require.NoError(t, inv.RefreshAll(context.Background()))
			for _, step := range tc.steps {
				src.set(step...)
				require.NoError(t, inv.RefreshAll(context.Background()))
			}
			snap := inv.Snapshot()
			st, _ := snap.Source("s1")
			assert.Equal(t, tc.wantHeld, st.HeldDepartures, "held")
			assert.Len(t, snap.Clusters, tc.wantAfter, "served")
		})
	}
}

// ackedInventory returns an inventory over one source s1 whose held
// departures wait for acknowledgements, and the operator's hand that
// acknowledges the departures of clusters of s1 by id.
func ackedInventory(t *testing.T, src sources.Source) (*Inventory, func(ids ...string)) {
	t.Helper()
	var mu sync.Mutex
	acked := map[string]bool{}
	clk := &clock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), step: time.Second}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{Now: clk.Now,
		Departure: Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 3},
		Acknowledged: func(source, id string) bool {
			mu.Lock()
			defer mu.Unlock()
			return source == "s1" && acked[id]
		}})
	require.NoError(t, err)
	return inv, func(ids ...string) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			acked[id] = true
		}
	}
}

// ackedFleet returns eight ready clusters c0 to c7, a hand that lists
// some of them from the source s1 of an ackedInventory and returns the
// snapshot, and the operator's hand that acknowledges departures.
func ackedFleet(t *testing.T) ([]sources.Cluster, func(...sources.Cluster) *Snapshot, func(ids ...string)) {
	t.Helper()
	src := &listings{}
	inv, acknowledge := ackedInventory(t, src)
	var all []sources.Cluster
	for i := range 8 {
		all = append(all, inPhase(fmt.Sprintf("c%d", i), sources.PhaseReady))
	}
	list := func(cs ...sources.Cluster) *Snapshot {
		src.set(cs...)
		require.NoError(t, inv.RefreshAll(context.Background()))
		return inv.Snapshot()
	}
	return all, list, acknowledge
}

// accountListings is a sources.AccountLister whose next answer the test
// sets: clusters, and the accounts the listing covered.
type accountListings struct {
	listings
	accounts []string
}

func (a *accountListings) ClustersAndAccounts(ctx context.Context) ([]sources.Cluster, []string, error) {
	cs, err := a.Clusters(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	return cs, a.accounts, err
}

// TestAccountOutOfSightIsHeld: a cluster missing with its account (an AKS
// subscription whose Reader role was removed) is held however few they
// are, until acknowledged; a cluster deleted in an account still covered
// departs as usual.
func TestAccountOutOfSightIsHeld(t *testing.T) {
	src := &accountListings{}
	inv, acknowledge := ackedInventory(t, src)
	var all []sources.Cluster
	for i := range 10 {
		c := inPhase(fmt.Sprintf("c%d", i), sources.PhaseReady)
		c.Account = "sub-b"
		if i == 0 {
			c.Account = "SUB-A" // compared case-insensitively
		}
		all = append(all, c)
	}
	list := func(accounts []string, cs ...sources.Cluster) *Snapshot {
		src.mu.Lock()
		src.next, src.accounts = cs, accounts
		src.mu.Unlock()
		require.NoError(t, inv.RefreshAll(context.Background()))
		return inv.Snapshot()
	}
	list([]string{"sub-a", "sub-b"}, all...)
	for i := range 6 { // sub-a out of sight, c9 deleted in sub-b
		snap := list([]string{"sub-b"}, all[1:9]...)
		assert.Contains(t, names(snap), "c0", "listing %d: held until acknowledged", i+1)
		if i >= 1 {
			assert.NotContains(t, names(snap), "c9", "listing %d: deleted in a covered account: departs", i+1)
		}
	}
	st, _ := inv.Snapshot().Source("s1")
	assert.Equal(t, 1, st.HeldDepartures)
	acknowledge("id-c0")
	assert.NotContains(t, names(list([]string{"sub-b"}, all[1:9]...)), "c0", "acknowledged: confirmed")
}

// TestHeldDropWaitsForAcknowledgement: with acknowledgements, a held drop
// is never released by counting listings: each departure waits for its
// acknowledgement, or for the cluster to be seen leaving.
func TestHeldDropWaitsForAcknowledgement(t *testing.T) {
	all, list, acknowledge := ackedFleet(t)
	list(all...)
	for i := range 20 { // far past HeldListings
		snap := list(all[:4]...)
		require.Len(t, snap.Clusters, 8, "listing %d: held until acknowledged", i+1)
	}
	acknowledge("id-c4", "id-c5")
	snap := list(all[:4]...)
	assert.Equal(t, []string{"c0", "c1", "c2", "c3", "c6", "c7"}, names(snap), "the acknowledged departures are confirmed")
	st, _ := snap.Source("s1")
	assert.Equal(t, 2, st.HeldDepartures, "the others stay held")
	assert.Zero(t, st.BlockedDepartures, "a mass drop, not the breaker")

	leaving := inPhase("c6", sources.PhaseLeaving) // seen being deleted upstream
	list(append(all[:4:4], leaving)...)
	snap = list(append(all[:4:4], leaving)...)
	assert.Equal(t, []string{"c0", "c1", "c2", "c3", "c7"}, names(snap), "a held cluster seen leaving departs as any other")
}

// TestDepartureBreaker: one listing (the first of its interval) confirms
// at most max(maxDeletions, maxDeletionsPercent) departures; when more
// are due, none of them goes: they are held, and an acknowledgement (or,
// without acknowledgements, heldListings) releases them.
func TestDepartureBreaker(t *testing.T) {
	var all []sources.Cluster
	for i := range 20 {
		all = append(all, inPhase(fmt.Sprintf("c%02d", i), sources.PhaseReady))
	}
	leaving := func(cs []sources.Cluster) []sources.Cluster { // deleted upstream: seen leaving, never a mass drop
		out := slices.Clone(cs)
		for i := range out {
			out[i].Phase = sources.PhaseLeaving
		}
		return out
	}
	rule := Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 6, MaxDeletions: 2, MaxDeletionsPercent: 10}
	for _, tc := range []struct {
		name    string
		acks    bool
		gone    int
		want    []int // served after each listing once they are gone
		held    int   // after the last
		release bool  // acknowledge them all, then one more listing
	}{
		{name: "within the breaker: confirmed", gone: 2, want: []int{20, 18}},
		{name: "over the breaker: held, not confirmed", acks: true, gone: 5, want: []int{20, 20, 20, 20, 20}, held: 5},
		{name: "over the breaker, acknowledged: confirmed", acks: true, gone: 5, want: []int{20, 20}, held: 5, release: true},
		{name: "over the breaker without acknowledgements: heldListings releases them", gone: 5, want: []int{20, 20, 20, 20, 20, 15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			acked := false
			opts := Options{Departure: rule}
			if tc.acks {
				opts.Acknowledged = func(string, string) bool { mu.Lock(); defer mu.Unlock(); return acked }
			}
			src := &listings{}
			inv, err := New([]SourceSpec{spec("s1", src)}, opts)
			require.NoError(t, err)
			src.set(all...)
			require.NoError(t, inv.RefreshAll(context.Background()))
			src.set(append(slices.Clone(all[tc.gone:]), leaving(all[:tc.gone])...)...)
			for i, want := range tc.want {
				require.NoError(t, inv.RefreshAll(context.Background()))
				require.Len(t, inv.Snapshot().Clusters, want, "listing %d", i+1)
			}
			st, _ := inv.Snapshot().Source("s1")
			assert.Equal(t, tc.held, st.HeldDepartures)
			assert.Equal(t, tc.held, st.BlockedDepartures, "seen leaving, no mass drop: the breaker holds them")
			assert.Equal(t, float64(tc.held), testutil.ToFloat64(inv.metrics.blocked.WithLabelValues("s1")), "source_departures_blocked")
			if tc.release {
				mu.Lock()
				acked = true
				mu.Unlock()
				require.NoError(t, inv.RefreshAll(context.Background()))
				assert.Len(t, inv.Snapshot().Clusters, 20-tc.gone, "acknowledged: confirmed at once")
			}
		})
	}
}

// TestOneAccountOutOfSightIsHeld: one account of ten out of sight is far
// below maxFraction, yet its cluster is held, not departed after
// afterListings: without acknowledgements it waits heldListings listings.
// A cluster gone while its account is still covered (in whatever case) is
// an ordinary departure.
func TestOneAccountOutOfSightIsHeld(t *testing.T) {
	rule := Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 5}
	var fleet []sources.Cluster
	for i := range 10 {
		c := inPhase(fmt.Sprintf("c%d", i), sources.PhaseReady)
		c.Account = fmt.Sprintf("subscription-%d", i) // one cluster an account
		fleet = append(fleet, c)
	}
	covered := func(skip string) []string {
		var out []string
		for _, c := range fleet {
			if c.Account != skip {
				out = append(out, strings.ToUpper(c.Account))
			}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		accounts []string
		held     int
		departAt int // the listing after which c3 is no longer served
	}{
		{"its account out of sight: held for heldListings", covered("subscription-3"), 1, rule.HeldListings},
		{"its account still covered: deleted, departs after afterListings", covered(""), 0, rule.AfterListings},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &accountListings{}
			inv, err := New([]SourceSpec{spec("s1", src)}, Options{Departure: rule, Registerer: prometheus.NewRegistry()})
			require.NoError(t, err)
			answer := func(cs []sources.Cluster, accounts []string) {
				src.mu.Lock()
				defer src.mu.Unlock()
				src.next, src.accounts = cs, accounts
			}
			answer(fleet, covered(""))
			require.NoError(t, inv.RefreshAll(context.Background()))
			answer(slices.Delete(slices.Clone(fleet), 3, 4), tc.accounts) // c3 missing
			for i := 1; i <= tc.departAt; i++ {
				require.NoError(t, inv.RefreshAll(context.Background()))
				snap := inv.Snapshot()
				if i < tc.departAt {
					require.Contains(t, names(snap), "c3", "listing %d", i)
					st, _ := snap.Source("s1")
					assert.Equal(t, tc.held, st.HeldDepartures, "listing %d", i)
					continue
				}
				assert.NotContains(t, names(snap), "c3", "listing %d: confirmed", i)
				assert.Len(t, snap.Clusters, 9)
			}
		})
	}
}

// TestHeldDropKeepsGrowing: clusters vanishing after part of a drop is
// held join it: the held ones count in the drop, so a loss that goes on
// (a role removed subscription by subscription) never slips the rest out
// as ordinary departures.
func TestHeldDropKeepsGrowing(t *testing.T) {
	all, list, _ := ackedFleet(t)
	list(all...)
	require.Len(t, list(all[:4]...).Clusters, 8, "c4 to c7 held")
	for i := range 6 { // c2 and c3 vanish too: two of eight, not above a quarter on their own
		snap := list(all[:2]...)
		require.Len(t, snap.Clusters, 8, "listing %d: the drop grew: still held", i+1)
	}
	st, _ := list(all[:2]...).Source("s1")
	assert.Equal(t, 6, st.HeldDepartures)
}

// TestDropCountsTheSourcesPartOfTheAnswer: a drop and the breaker are
// counted against what the answer serves of the source, not against its
// listings served from another source (duplicates): a Rancher source
// whose own clusters all vanish is a drop however many EKS clusters it
// also lists.
func TestDropCountsTheSourcesPartOfTheAnswer(t *testing.T) {
	cases := []struct {
		name      string
		rule      Departure
		own, dups int
	}{
		{"mass drop", Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 10}, 4, 20},
		{"breaker", Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 1, HeldListings: 10, MaxDeletions: 5, MaxDeletionsPercent: 10}, 10, 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rancher, eks := &listings{}, &listings{}
			specs := []SourceSpec{spec("rancher", rancher), spec("eks", eks)}
			specs[0].Kind, specs[1].Kind = sources.KindManager, sources.KindCloud
			inv, err := New(specs, Options{Prefer: PreferCloud, Departure: tc.rule, Registerer: prometheus.NewRegistry()})
			require.NoError(t, err)
			var cloud, dups, own []sources.Cluster
			for i := range tc.dups {
				c := inPhase(fmt.Sprintf("eks%d", i), sources.PhaseReady)
				cloud = append(cloud, c)
				c.Name, c.ID = "rancher-"+c.Name, "c-"+c.Name // one cluster: the same server
				dups = append(dups, c)
			}
			for i := range tc.own {
				own = append(own, inPhase(fmt.Sprintf("own%d", i), sources.PhaseReady))
			}
			eks.set(cloud...)
			rancher.set(append(slices.Clone(dups), own...)...)
			require.NoError(t, inv.RefreshAll(context.Background()))
			require.Len(t, inv.Snapshot().Clusters, tc.dups+tc.own)
			require.Len(t, inv.Snapshot().Duplicates, tc.dups)

			rancher.set(dups...) // the Rancher source loses every cluster of its own
			for i := range 5 {
				require.NoError(t, inv.RefreshAll(context.Background()))
				require.Len(t, inv.Snapshot().Clusters, tc.dups+tc.own, "listing %d: the source's whole part of the answer held", i+1)
			}
			st, _ := inv.Snapshot().Source("rancher")
			assert.Equal(t, tc.own, st.HeldDepartures)
		})
	}
}

// TestInCoveredScope: a cluster is in a covered scope when a prefix of
// its id ending in "/" is covered, in whatever case.
func TestInCoveredScope(t *testing.T) {
	covered := map[string]bool{"/subscriptions/s1/resourcegroups/rg-apps/": true, "account-2": true}
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"/subscriptions/s1/resourcegroups/rg-apps/providers/microsoft.containerservice/managedclusters/a", true},
		{"/SUBSCRIPTIONS/S1/resourceGroups/RG-Apps/providers/x/a", true},
		{"/subscriptions/s1/resourcegroups/rg-apps-2/providers/x/a", false},
		{"/subscriptions/s1/resourcegroups/rg-data/providers/x/a", false},
		{"/subscriptions/s1/resourcegroups/rg-apps", false},
		{"account-2", false},
		{"", false},
	} {
		t.Run(tc.id, func(t *testing.T) { assert.Equal(t, tc.want, inCoveredScope(covered, tc.id)) })
	}
}
