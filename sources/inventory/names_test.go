package inventory

// The rules that decide who keeps a name.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestRenameOntoAHeldNameIsTheNewcomer: the name goes to the cluster that
// holds it, not to the older one renamed onto it.
func TestRenameOntoAHeldNameIsTheNewcomer(t *testing.T) {
	s1, s2 := &listings{}, &listings{}
	inv := newLifecycleInventory(t, Departure{}, time.Second, s1, s2)
	older := inPhase("a", sources.PhaseReady)
	s1.set(older)
	s2.set()
	require.NoError(t, inv.RefreshAll(context.Background()))
	holder := inPhase("b", sources.PhaseReady)
	s2.set(holder)
	require.NoError(t, inv.RefreshAll(context.Background()))
	require.Equal(t, []string{"a", "b"}, names(inv.Snapshot()))

	renamed := older
	renamed.Name = "b" // the older cluster renamed onto the name b holds
	s1.set(renamed)
	require.NoError(t, inv.RefreshAll(context.Background()))
	snap := inv.Snapshot()
	require.Len(t, snap.Clusters, 1)
	assert.Equal(t, "s2", snap.Clusters[0].Source, "the holder keeps its name")
	assert.Equal(t, "https://b.example.com", snap.Clusters[0].Server, "its Applications keep pointing at it")
	assert.Equal(t, []Conflict{{Name: "b", Sources: []string{"s1", "s2"}, KeptSource: "s2"}}, snap.Conflicts)
	assert.True(t, snap.Knows("s1", "id-a"), "the newcomer is known by its identity: its Secret is not pruned")
	assert.True(t, snap.Knows("s2", "id-b"))
	assert.False(t, snap.Knows("s2", "id-a"))
}

// TestANameLostIsNoLongerHeld: a cluster renamed onto a held name loses
// it, and with it the name it held before: a newcomer served under that
// name since keeps it when the cluster is renamed back.
func TestANameLostIsNoLongerHeld(t *testing.T) {
	s1, s2 := &listings{}, &listings{}
	inv := newLifecycleInventory(t, Departure{}, time.Second, s1, s2)
	x, y, z := inPhase("a", sources.PhaseReady), inPhase("b", sources.PhaseReady), inPhase("z", sources.PhaseReady)
	s1.set(x)
	s2.set(y)
	require.NoError(t, inv.RefreshAll(context.Background()))
	require.Equal(t, []string{"a", "b"}, names(inv.Snapshot()))

	x.Name = "b" // x renamed onto the name y holds: y keeps it, x is not served
	s1.set(x)
	require.NoError(t, inv.RefreshAll(context.Background()))
	require.Equal(t, []string{"b"}, names(inv.Snapshot()))
	z.Name = "a" // a new cluster takes the name x left
	s2.set(y, z)
	require.NoError(t, inv.RefreshAll(context.Background()))
	require.Equal(t, []string{"a", "b"}, names(inv.Snapshot()))

	x.Name = "a" // x renamed back
	s1.set(x)
	require.NoError(t, inv.RefreshAll(context.Background()))
	snap := inv.Snapshot()
	require.Equal(t, []string{"a", "b"}, names(snap))
	assert.Equal(t, "https://z.example.com", snap.Clusters[0].Server, "z holds a: its Applications keep pointing at it")
	assert.Equal(t, "s2", snap.Clusters[0].Source)
	assert.Equal(t, []Conflict{{Name: "a", Sources: []string{"s1", "s2"}, KeptSource: "s2"}}, snap.Conflicts)
}

// TestNamesNormalizedAlike: Argo CD makes Application names of the
// normalized name, so two clusters whose names normalize alike compete
// for one name as two clusters of the same name do.
func TestNamesNormalizedAlike(t *testing.T) {
	named := func(name, host string) sources.Cluster {
		c := inPhase(host, sources.PhaseReady)
		c.Name = name
		return c
	}
	cases := []struct {
		name                 string
		first, then          [2][]sources.Cluster // the listings of s1 and s2
		wantServer, wantName string               // the one cluster served at the end, if any
		want                 Conflict
	}{{
		name:       "a newcomer normalized alike does not take the established name",
		first:      [2][]sources.Cluster{{named("prod-eu", "a")}, nil},
		then:       [2][]sources.Cluster{{named("prod-eu", "a")}, {named("Prod_EU", "b")}},
		wantServer: "https://a.example.com", wantName: "prod-eu",
		want: Conflict{Name: "prod-eu", Names: []string{"Prod_EU"}, Sources: []string{"s1", "s2"}, KeptSource: "s1"},
	}, {
		name:       "the holder renamed to a name normalized alike keeps it",
		first:      [2][]sources.Cluster{{named("prod-eu", "a")}, nil},
		then:       [2][]sources.Cluster{{named("Prod-EU.", "a")}, {named("prod-eu", "b")}},
		wantServer: "https://a.example.com", wantName: "Prod-EU.",
		want: Conflict{Name: "prod-eu", Names: []string{"Prod-EU."}, Sources: []string{"s1", "s2"}, KeptSource: "s1"},
	}, {
		name: "newcomers normalized alike: neither is served",
		then: [2][]sources.Cluster{{named("team_a", "a")}, {named("Team-A", "b")}},
		want: Conflict{Name: "team-a", Names: []string{"Team-A", "team_a"}, Sources: []string{"s1", "s2"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s1, s2 := &listings{}, &listings{}
			inv := newLifecycleInventory(t, Departure{}, time.Second, s1, s2)
			if tc.first[0] != nil || tc.first[1] != nil {
				s1.set(tc.first[0]...)
				s2.set(tc.first[1]...)
				require.NoError(t, inv.RefreshAll(context.Background()))
			}
			s1.set(tc.then[0]...)
			s2.set(tc.then[1]...)
			require.NoError(t, inv.RefreshAll(context.Background()))
			snap := inv.Snapshot()
			if tc.wantServer == "" {
				assert.Empty(t, snap.Clusters)
			} else if assert.Len(t, snap.Clusters, 1) {
				assert.Equal(t, tc.wantServer, snap.Clusters[0].Server)
				assert.Equal(t, tc.wantName, snap.Clusters[0].Name)
			}
			assert.Equal(t, []Conflict{tc.want}, snap.Conflicts)
			for _, n := range append([]string{tc.want.Name}, tc.want.Names...) {
				assert.True(t, snap.Present(n), "%s is present: a Secret written under it is not pruned by name", n)
			}
		})
	}
}

// TestUpgradeKeepsBothHoldersOfANormalizedName: a version that compared
// names as listed served "a_b" and "a-b" both; after an upgrade that
// compares them normalized, both stay served (an answer without one would
// delete its Applications), the conflict reported, and a newcomer under
// that name is still not served.
func TestUpgradeKeepsBothHoldersOfANormalizedName(t *testing.T) {
	x, y := inPhase("x", sources.PhaseReady), inPhase("y", sources.PhaseReady)
	x.Name, x.Source = "a_b", "s1"
	y.Name, y.Source = "a-b", "s2"
	established := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	mem := NewMemory()
	require.NoError(t, mem.Save(context.Background(), Book{
		Sources: []SourceRecord{{Name: "s1", Provider: sources.ProviderStatic, Synced: true}, {Name: "s2", Provider: sources.ProviderStatic, Synced: true}},
		Clusters: []Record{
			{Source: "s1", ID: x.ID, Rendering: &x, Served: true, Established: established, Holds: x.Name},
			{Source: "s2", ID: y.ID, Rendering: &y, Served: true, Established: established, Holds: y.Name},
		}}))
	s1, s2 := &listings{}, &listings{}
	inv, err := New([]SourceSpec{spec("s1", s1), spec("s2", s2)}, Options{Ledger: mem})
	require.NoError(t, err)
	require.True(t, inv.load(context.Background()))
	newcomer := inPhase("z", sources.PhaseReady)
	newcomer.Name = "A_B"
	s1.set(x, newcomer)
	s2.set(y)
	require.NoError(t, inv.RefreshAll(context.Background()))
	snap := inv.Snapshot()
	assert.Equal(t, []string{"a-b", "a_b"}, names(snap), "both holders stay served; the newcomer is not")
	assert.Equal(t, []Conflict{{Name: "a-b", Names: []string{"A_B", "a_b"}, Sources: []string{"s1", "s1", "s2"}, KeptSource: "s2"}}, snap.Conflicts)
}
