package inventory

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// clock is a test clock that moves by a step at each reading.
type clock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

// listings is a Source whose next answer the test sets.
type listings struct {
	mu   sync.Mutex
	next []sources.Cluster
	err  error
}

func (l *listings) set(cs ...sources.Cluster) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next, l.err = cs, nil
}

func (l *listings) Clusters(context.Context) ([]sources.Cluster, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next, l.err
}

func inPhase(name string, p sources.Phase) sources.Cluster {
	c := cluster(name)
	c.ID, c.Phase, c.State = "id-"+name, p, "state-of-"+string(p)
	return c
}

// served returns name → phase of the served clusters.
func served(snap *Snapshot) map[string]sources.Phase {
	out := map[string]sources.Phase{}
	for _, c := range snap.Clusters {
		out[c.Name] = c.Phase
	}
	return out
}

func newLifecycleInventory(t *testing.T, d Departure, step time.Duration, srcs ...*listings) *Inventory {
	t.Helper()
	var specs []SourceSpec
	for i, s := range srcs {
		specs = append(specs, spec(fmt.Sprintf("s%d", i+1), s))
	}
	clk := &clock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), step: step}
	inv, err := New(specs, Options{Departure: d, Now: clk.Now, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	return inv
}

// TestLifecycle walks one cluster through a sequence of listings and checks
// after each whether it is served and in which phase.
func TestLifecycle(t *testing.T) {
	d := Departure{AfterListings: 3, GracePeriod: -1, MaxFraction: 1, HeldListings: 3}
	ready, degraded := sources.PhaseReady, sources.PhaseDegraded
	notRendered := func(p sources.Phase) sources.Cluster {
		c := inPhase("x", p)
		c.Ready, c.NotReadyReason = false, "CA unavailable: 503"
		return c
	}
	const gone = sources.Phase("(not served)")
	type listing struct {
		c    *sources.Cluster // nil: absent
		want sources.Phase
	}
	at := func(c sources.Cluster, want sources.Phase) listing { return listing{&c, want} }
	absent := func(want sources.Phase) listing { return listing{nil, want} }
	cases := []struct {
		name  string
		steps []listing
	}{
		{"ready stays ready", []listing{at(inPhase("x", ready), ready), at(inPhase("x", ready), ready)}},
		{"an upgrade is degraded, not gone", []listing{at(inPhase("x", ready), ready), at(inPhase("x", degraded), degraded), at(inPhase("x", ready), ready)}},
		{"pending is not served until usable", []listing{at(inPhase("x", sources.PhasePending), gone), at(inPhase("x", ready), ready)}},
		{"pending again after being served is degraded (re-provisioning)", []listing{at(inPhase("x", ready), ready), at(inPhase("x", sources.PhasePending), degraded)}},
		{"an unknown phase is degraded", []listing{at(inPhase("x", "rebooting"), degraded)}},
		{"absent from two listings is still served", []listing{at(inPhase("x", ready), ready), absent(sources.PhaseAbsent), absent(sources.PhaseAbsent)}},
		{"absent from three listings has left", []listing{at(inPhase("x", ready), ready), absent(sources.PhaseAbsent), absent(sources.PhaseAbsent), absent(gone)}},
		{"back before the confirmation resets the count", []listing{at(inPhase("x", ready), ready), absent(sources.PhaseAbsent), absent(sources.PhaseAbsent),
			at(inPhase("x", ready), ready), absent(sources.PhaseAbsent), absent(sources.PhaseAbsent)}},
		{"leaving counts as absent", []listing{at(inPhase("x", ready), ready), at(inPhase("x", sources.PhaseLeaving), sources.PhaseLeaving),
			at(inPhase("x", sources.PhaseLeaving), sources.PhaseLeaving), absent(gone)}},
		{"leaving and never served is not served", []listing{at(inPhase("x", sources.PhaseLeaving), gone)}},
		{"not renderable after served keeps the last rendering", []listing{at(inPhase("x", ready), ready), at(notRendered(degraded), degraded), at(notRendered(ready), ready)}},
		{"never rendered is not served", []listing{at(notRendered(ready), gone), at(inPhase("x", ready), ready)}},
		{"never served and absent is forgotten", []listing{at(inPhase("x", sources.PhasePending), gone), absent(gone), at(inPhase("x", sources.PhasePending), gone)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := &listings{}
			other := &listings{}
			other.set(inPhase("other", ready)) // so that x's departure is never a mass drop
			inv := newLifecycleInventory(t, d, time.Second, src, other)
			for i, step := range tc.steps {
				if step.c != nil {
					src.set(*step.c)
				} else {
					src.set()
				}
				require.NoError(t, inv.RefreshAll(context.Background()))
				got, ok := served(inv.Snapshot())["x"]
				if !ok {
					got = gone
				}
				require.Equal(t, step.want, got, "listing %d", i+1)
			}
		})
	}
}

func TestLastGoodRenderingIsServed(t *testing.T) {
	src := &listings{}
	inv := newLifecycleInventory(t, Departure{}, time.Second, src)
	good := inPhase("x", sources.PhaseReady)
	good.CA = sources.CAFromData("Z29vZA==")
	src.set(good)
	require.NoError(t, inv.RefreshAll(context.Background()))

	broken := inPhase("x", sources.PhaseDegraded)
	broken.CA, broken.Ready, broken.NotReadyReason = sources.CA{}, false, "CA unavailable: 503 from listClusterUserCredential"
	src.set(broken)
	require.NoError(t, inv.RefreshAll(context.Background()))
	snap := inv.Snapshot()
	require.Len(t, snap.Clusters, 1)
	assert.Equal(t, "Z29vZA==", snap.Clusters[0].CA.Data(), "the last good rendering")
	assert.Equal(t, sources.PhaseDegraded, snap.Clusters[0].Phase, "with the phase of the latest listing")
	assert.Equal(t, "state-of-degraded", snap.Clusters[0].State)
	assert.Equal(t, []Kept{{Name: "x", Source: "s1", Reason: broken.NotReadyReason}}, snap.Kept)
	assert.True(t, snap.Clusters[0].Ready)
}

func TestDepartureWaitsForTheGracePeriod(t *testing.T) {
	src := &listings{}
	keep := &listings{}
	keep.set(inPhase("keep", sources.PhaseReady))
	// each clock reading moves 10 s; a listing of one source reads it twice
	// (its start and its duration): 20 s a listing of src
	inv := newLifecycleInventory(t, Departure{AfterListings: 2, GracePeriod: time.Minute, MaxFraction: 1}, 10*time.Second, src, keep)
	src.set(inPhase("x", sources.PhaseReady))
	require.NoError(t, inv.RefreshAll(context.Background()))
	listSrc := func() { require.NoError(t, inv.refresh(context.Background(), inv.states[0])) } // one source: the clock moves as said
	src.set()
	for i := range 3 { // missed at T, T+20 s, T+40 s: two listings are enough, a minute is not over
		listSrc()
		assert.Contains(t, served(inv.Snapshot()), "x", "listing %d: grace period not over", i+1)
	}
	listSrc() // T+60 s
	snap := inv.Snapshot()
	assert.NotContains(t, served(snap), "x", "gone once the grace period passed")
	assert.True(t, snap.HasDeparted("s1", "id-x"))
	assert.False(t, snap.HasDeparted("s1", "id-keep"))
	assert.False(t, snap.Present("x"))
	assert.Equal(t, 1.0, testutil.ToFloat64(inv.metrics.departures.WithLabelValues("s1")))

	src.set(inPhase("x", sources.PhaseReady))
	listSrc()
	assert.False(t, inv.Snapshot().HasDeparted("s1", "id-x"), "a cluster back again has not departed")
}

// missingThenFailing lists x and y, then y only (x's departure count
// starts), then fails failures listings.
func missingThenFailing(t *testing.T, afterListings, failures int) (*listings, *Inventory) {
	t.Helper()
	src := &listings{}
	inv := newLifecycleInventory(t, Departure{AfterListings: afterListings, GracePeriod: -1, MaxFraction: 1}, time.Second, src)
	src.set(inPhase("x", sources.PhaseReady), inPhase("y", sources.PhaseReady))
	require.NoError(t, inv.RefreshAll(context.Background()))
	src.set(inPhase("y", sources.PhaseReady))
	require.NoError(t, inv.RefreshAll(context.Background()))
	for range failures {
		src.mu.Lock()
		src.err = fmt.Errorf("503")
		src.mu.Unlock()
		require.Error(t, inv.RefreshAll(context.Background()))
	}
	return src, inv
}

func TestFailedListingsDoNotCountTowardsDeparture(t *testing.T) {
	src, inv := missingThenFailing(t, 2, 5)
	assert.Equal(t, sources.PhaseAbsent, served(inv.Snapshot())["x"], "five failed listings confirm nothing")
	src.set(inPhase("y", sources.PhaseReady))
	require.NoError(t, inv.RefreshAll(context.Background()))
	assert.NotContains(t, served(inv.Snapshot()), "x", "the second complete listing confirms it")
}

// TestFailedListingsDoNotAdvanceARunningCount: a departure count already
// running (one complete listing without x) is not advanced by failed
// listings: with afterListings 3, x leaves at the third complete listing
// without it, however many failed between.
func TestFailedListingsDoNotAdvanceARunningCount(t *testing.T) {
	src, inv := missingThenFailing(t, 3, 4) // one complete listing without x
	src.set(inPhase("y", sources.PhaseReady))
	require.NoError(t, inv.RefreshAll(context.Background())) // 2
	assert.Equal(t, sources.PhaseAbsent, served(inv.Snapshot())["x"], "two complete listings without x, not three")
	require.NoError(t, inv.RefreshAll(context.Background())) // 3
	assert.NotContains(t, served(inv.Snapshot()), "x", "the third complete listing confirms it")
}

func TestMassDropIsHeld(t *testing.T) {
	src := &listings{}
	inv := newLifecycleInventory(t, Departure{AfterListings: 3, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 6}, time.Second, src)
	var all []sources.Cluster
	for i := range 8 {
		all = append(all, inPhase(fmt.Sprintf("c%d", i), sources.PhaseReady))
	}
	src.set(all...)
	require.NoError(t, inv.RefreshAll(context.Background()))
	src.set(all[:4]...) // half the fleet gone in one listing: a lost role, more likely than a mass deletion
	for i := range 5 {
		require.NoError(t, inv.RefreshAll(context.Background()))
		snap := inv.Snapshot()
		require.Len(t, snap.Clusters, 8, "listing %d: held", i+1)
		st, _ := snap.Source("s1")
		require.Equal(t, 4, st.HeldDepartures)
		require.Equal(t, 4.0, testutil.ToFloat64(inv.metrics.held.WithLabelValues("s1")))
		require.Zero(t, testutil.ToFloat64(inv.metrics.blocked.WithLabelValues("s1")), "a mass drop, not the breaker")
	}
	require.NoError(t, inv.RefreshAll(context.Background()))
	snap := inv.Snapshot()
	assert.Len(t, snap.Clusters, 4, "confirmed by HeldListings listings")
	st, _ := snap.Source("s1")
	assert.Zero(t, st.HeldDepartures)

	// one cluster leaving is never a mass drop, even of a small fleet
	src.set(all[:3]...)
	for range 3 {
		require.NoError(t, inv.RefreshAll(context.Background()))
	}
	assert.Len(t, inv.Snapshot().Clusters, 3, "a single departure takes AfterListings")
}

func TestConflictKeepsTheEstablishedCluster(t *testing.T) {
	s1, s2 := &listings{}, &listings{}
	inv := newLifecycleInventory(t, Departure{}, time.Second, s1, s2)
	established := inPhase("prod", sources.PhaseReady)
	s1.set(established)
	s2.set()
	require.NoError(t, inv.RefreshAll(context.Background()))
	require.Contains(t, served(inv.Snapshot()), "prod")
	require.Equal(t, "s1", inv.Snapshot().Clusters[0].Source)

	newcomer := inPhase("prod", sources.PhaseReady)
	newcomer.ID, newcomer.Server = "id-newcomer", "https://newcomer.example.com"
	s2.set(newcomer)
	require.NoError(t, inv.RefreshAll(context.Background()))
	snap := inv.Snapshot()
	require.Len(t, snap.Clusters, 1)
	assert.Equal(t, "s1", snap.Clusters[0].Source, "the established cluster keeps its name")
	assert.Equal(t, []Conflict{{Name: "prod", Sources: []string{"s1", "s2"}, KeptSource: "s1"}}, snap.Conflicts)

	// two newcomers with one name at start-up: neither is served
	other := inPhase("staging", sources.PhaseReady)
	otherToo := inPhase("staging", sources.PhaseReady)
	otherToo.ID, otherToo.Server = "id-staging-2", "https://staging-2.example.com"
	s1.set(other)
	s2.set(otherToo)
	inv = newLifecycleInventory(t, Departure{}, time.Second, s1, s2)
	require.NoError(t, inv.RefreshAll(context.Background()))
	require.True(t, inv.Snapshot().Synced())
	assert.Equal(t, []Conflict{{Name: "staging", Sources: []string{"s1", "s2"}}}, inv.Snapshot().Conflicts)
	assert.NotContains(t, served(inv.Snapshot()), "staging")
}

func TestDedupeRunsBeforeConflictsAndKeepsTheEstablishedListing(t *testing.T) {
	rancher, eks := &listings{}, &listings{}
	specs := []SourceSpec{spec("rancher", rancher), spec("eks", eks)}
	specs[0].Provider, specs[1].Provider = sources.ProviderRancher, sources.ProviderEKS
	specs[0].Kind, specs[1].Kind = sources.KindManager, sources.KindCloud
	inv, err := New(specs, Options{Prefer: PreferCloud})
	require.NoError(t, err)
	cloudID := sources.EKSCloudID("111", "eu-west-1", "payments")
	viaRancher := inPhase("payments", sources.PhaseReady)
	viaRancher.Server, viaRancher.CloudID = "https://rancher.example.com/k8s/clusters/c-1", cloudID
	viaEKS := inPhase("payments", sources.PhaseReady)
	viaEKS.CloudID = cloudID

	rancher.set(viaRancher)
	eks.set()
	require.NoError(t, inv.RefreshAll(context.Background()))
	eks.set(viaEKS) // the EKS source now lists the same cluster under the same name
	require.NoError(t, inv.RefreshAll(context.Background()))
	snap := inv.Snapshot()
	require.Len(t, snap.Clusters, 1, "one cluster, not a name conflict")
	assert.Empty(t, snap.Conflicts)
	assert.Equal(t, "rancher", snap.Clusters[0].Source, "the established listing is kept over the preference")
	assert.Equal(t, []Duplicate{{Name: "payments", Source: "eks", ID: "id-payments", KeptName: "payments", KeptSource: "rancher", Reason: "cloudID"}}, snap.Duplicates)
}

func TestNothingIsEstablishedBeforeEverySourceListed(t *testing.T) {
	rancher, eks := &listings{}, &listings{}
	specs := []SourceSpec{spec("rancher", rancher), spec("eks", eks)}
	specs[0].Provider, specs[1].Provider = sources.ProviderRancher, sources.ProviderEKS
	specs[0].Kind, specs[1].Kind = sources.KindManager, sources.KindCloud
	inv, err := New(specs, Options{Prefer: PreferCloud})
	require.NoError(t, err)
	cloudID := sources.EKSCloudID("111", "eu-west-1", "payments")
	viaRancher := inPhase("rancher-payments", sources.PhaseReady)
	viaRancher.CloudID = cloudID
	viaEKS := inPhase("payments", sources.PhaseReady)
	viaEKS.CloudID = cloudID
	rancher.set(viaRancher)
	eks.set(viaEKS)

	require.NoError(t, inv.refresh(context.Background(), inv.states[0])) // rancher first; eks later
	assert.False(t, inv.Snapshot().Synced(), "behind the barrier")
	require.NoError(t, inv.refresh(context.Background(), inv.states[1]))
	snap := inv.Snapshot()
	require.True(t, snap.Synced())
	assert.Equal(t, []string{"payments"}, names(snap), "the preference decides: rancher listing first did not establish it")
}

func TestTenantRulesScopeTheInventory(t *testing.T) {
	src := &listings{}
	yes := true
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{Tenants: map[string]sources.TenantRule{
		"acme": {Project: "acme-project", Namespaces: []string{"acme"}, ClusterResources: &yes},
	}})
	require.NoError(t, err)
	c := inPhase("x", sources.PhaseReady)
	c.Tenant, c.Project = "acme", "from-the-source"
	src.set(c)
	require.NoError(t, inv.RefreshAll(context.Background()))
	got := inv.Snapshot().Clusters[0]
	assert.Equal(t, "acme-project", got.Project, "the tenant rule wins")
	assert.Equal(t, []string{"acme"}, got.Namespaces)
	assert.True(t, got.ClusterResources)
}

// TestClaimedTenantIsNotServed: a cluster whose owner claims a tenant
// that no rule admits is listed not ready, so never served (nor given a
// Secret); the same claim on a source that trusts its clusters' labels is
// taken.
func TestClaimedTenantIsNotServed(t *testing.T) {
	for _, trust := range []bool{false, true} {
		t.Run(fmt.Sprintf("trust %v", trust), func(t *testing.T) {
			src := &listings{}
			sp := spec("s1", src)
			sp.TrustClusterLabels = trust
			inv, err := New([]SourceSpec{sp}, Options{Tenants: map[string]sources.TenantRule{
				"acme": {Project: "acme", Sources: []string{"other-source"}},
			}})
			require.NoError(t, err)
			c := inPhase("x", sources.PhaseReady)
			c.Tenant, c.TenantFromOwner = "acme", true
			src.set(c)
			require.NoError(t, inv.RefreshAll(context.Background()))
			snap := inv.Snapshot()
			if trust {
				require.Len(t, snap.Clusters, 1)
				assert.Equal(t, "acme", snap.Clusters[0].Project)
				return
			}
			assert.Empty(t, snap.Clusters)
			require.Len(t, snap.Unserved, 1)
			assert.Contains(t, snap.Unserved[0].Reason, `tenant "acme" is the cluster owner's label or tag`)
		})
	}
}

func TestDuplicateIdentityFailsTheListing(t *testing.T) {
	src := &listings{}
	inv := newLifecycleInventory(t, Departure{}, time.Second, src)
	a, b := inPhase("a", sources.PhaseReady), inPhase("b", sources.PhaseReady)
	b.ID = a.ID
	src.set(a, b)
	assert.ErrorContains(t, inv.RefreshAll(context.Background()), `cluster id "id-a" listed twice`)
}

func TestDepartureOptionsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		d    Departure
		want string
	}{
		{Departure{AfterListings: -1}, "afterListings"},
		{Departure{MaxFraction: 1.5}, "maxFraction"},
		{Departure{AfterListings: 5, HeldListings: 2}, "heldListings"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := New(nil, Options{Departure: tc.d})
			assert.ErrorContains(t, err, tc.want)
		})
	}
	d, err := Departure{}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, DefaultDeparture(), d)
}
