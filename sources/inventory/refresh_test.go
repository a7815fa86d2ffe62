package inventory

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestListingTimeout(t *testing.T) {
	src := &scripted{steps: []step{{block: true}}}
	sp := spec("slow", src)
	sp.Timeout = 50 * time.Millisecond
	inv, err := New([]SourceSpec{sp}, Options{})
	require.NoError(t, err)
	err = inv.RefreshAll(context.Background())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "timed out after 50ms")
}

func TestRunLoopRefreshesSubscribesAndStops(t *testing.T) {
	src := &scripted{steps: []step{
		{clusters: []sources.Cluster{cluster("a")}},
		{clusters: []sources.Cluster{cluster("a"), cluster("b")}},
	}}
	sp := spec("s1", src)
	sp.Interval = MinInterval // the shortest the configuration allows
	inv, err := New([]SourceSpec{sp}, Options{Jitter: -1})
	require.NoError(t, err)
	ch, unsubscribe := inv.Subscribe()
	defer unsubscribe()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inv.Run(ctx); close(done) }()

	require.Eventually(t, func() bool { return len(inv.Snapshot().Clusters) == 2 }, 5*time.Second, 5*time.Millisecond)
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("subscriber was not told about the change")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	calls := src.Calls()
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, calls, src.Calls(), "no listing after Run returned")
}

func TestTriggerRefreshesBeforeTheInterval(t *testing.T) {
	src := &scripted{steps: []step{{clusters: []sources.Cluster{cluster("a")}}, {clusters: []sources.Cluster{cluster("b")}}}}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{}) // interval: 1h
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inv.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	require.Eventually(t, func() bool { return inv.Snapshot().Version == 1 }, 5*time.Second, 5*time.Millisecond)
	assert.True(t, inv.Trigger("s1"))
	assert.False(t, inv.Trigger("nope"))
	require.Eventually(t, func() bool { return slices.Equal(names(inv.Snapshot()), []string{"a", "b"}) }, 5*time.Second, 5*time.Millisecond)
}

func TestShutdownDuringListingIsNotAFailure(t *testing.T) {
	src := &scripted{steps: []step{{block: true}}}
	sp := spec("s1", src)
	sp.Timeout = time.Minute
	inv, err := New([]SourceSpec{sp}, Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inv.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return src.Calls() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	st := inv.Status().Sources[0]
	assert.Equal(t, 0, st.ConsecutiveFailures)
	assert.Empty(t, st.LastError)
}

func TestJitterStaysInRange(t *testing.T) {
	inv, err := New(nil, Options{Jitter: 0.2})
	require.NoError(t, err)
	for range 1000 {
		d := inv.jittered(10 * time.Second)
		require.GreaterOrEqual(t, d, 8*time.Second)
		require.LessOrEqual(t, d, 12*time.Second)
	}
}

// TestDuplicateIdentityAfterAGoodListing: a listing that names two
// clusters with one identity is no complete listing: it fails, the source
// is stale, the last complete listing is served, and the clusters it lacks
// never start departing, however many such listings come.
func TestDuplicateIdentityAfterAGoodListing(t *testing.T) {
	src := &listings{}
	inv := newLifecycleInventory(t, Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 1}, time.Second, src)
	a, b, c := inPhase("a", sources.PhaseReady), inPhase("b", sources.PhaseReady), inPhase("c", sources.PhaseReady)
	src.set(a, b, c)
	require.NoError(t, inv.RefreshAll(context.Background()))
	clash := b
	clash.ID = a.ID // an upstream answering two clusters under one ARN
	src.set(a, clash)
	for i := range 3 {
		err := inv.RefreshAll(context.Background())
		require.ErrorContains(t, err, `cluster id "id-a" listed twice`, "listing %d", i+1)
		snap := inv.Snapshot()
		assert.Equal(t, map[string]sources.Phase{"a": sources.PhaseReady, "b": sources.PhaseReady, "c": sources.PhaseReady}, served(snap),
			"listing %d: the last complete listing, nobody absent", i+1)
		st, _ := snap.Source("s1")
		assert.True(t, st.Stale, "listing %d", i+1)
		assert.Empty(t, snap.Departed, "listing %d", i+1)
	}
	assert.Equal(t, 3, inv.Status().Sources[0].ConsecutiveFailures)
}

// TestOwnerLabelsNeedTheSourcesTrust: a tenant or a project that a cloud
// cluster's owner wrote in a tag scopes nothing unless the source trusts
// its clusters' labels: untrusted, the cluster is not served (nor given a
// Secret) and says why; trusted, it is served as written.
func TestOwnerLabelsNeedTheSourcesTrust(t *testing.T) {
	for _, tc := range []struct {
		name     string
		provider sources.Provider
		claim    func(c *sources.Cluster)
		why      string
	}{
		{"an EKS cluster's project tag", sources.ProviderEKS, func(c *sources.Cluster) { c.Project, c.ProjectFromOwner = "payments", true },
			`project "payments" is the cluster owner's label or tag`},
		{"an AKS cluster's tenant and project tags", sources.ProviderAKS, func(c *sources.Cluster) {
			c.Tenant, c.TenantFromOwner, c.Project, c.ProjectFromOwner = "payments", true, "payments", true
		}, `tenant "payments" is the cluster owner's label or tag`},
	} {
		for _, trust := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, trusted %v", tc.name, trust), func(t *testing.T) {
				src := &listings{}
				sp := spec("cloud", src)
				sp.Provider, sp.Kind, sp.TrustClusterLabels = tc.provider, sources.KindCloud, trust
				inv, err := New([]SourceSpec{sp}, Options{})
				require.NoError(t, err)
				c := inPhase("x", sources.PhaseReady)
				tc.claim(&c)
				src.set(c)
				require.NoError(t, inv.RefreshAll(context.Background()))
				snap := inv.Snapshot()
				if trust {
					require.Len(t, snap.Clusters, 1)
					assert.Equal(t, "payments", snap.Clusters[0].Project, "the source trusts its clusters' labels")
					return
				}
				assert.Empty(t, snap.Clusters)
				require.Len(t, snap.Unserved, 1)
				assert.Contains(t, snap.Unserved[0].Reason, tc.why)
				assert.True(t, snap.Present("x"), "listed: known, nobody prunes it")
			})
		}
	}
}

// TestOwnersProjectNeedsTheRulesProject: a tenant rule that admits the
// cluster but sets no project does not make a project its owner wrote
// count: a newcomer is not served, and a served cluster whose owner then
// writes one keeps its last rendering (and project); a rule that sets a
// project replaces the owner's.
func TestOwnersProjectNeedsTheRulesProject(t *testing.T) {
	const why = `project "platform-admin" is the cluster owner's label or tag; only the tenant's rule`
	claim := func(c sources.Cluster) sources.Cluster {
		c.Project, c.ProjectFromOwner = "platform-admin", true
		return c
	}
	owned := inPhase("x", sources.PhaseReady)
	owned.Tenant, owned.TenantFromOwner = "acme", true // admitted by the rule's sources
	for _, tc := range []struct {
		name     string
		project  string            // the rule's
		listings []sources.Cluster // in turn
		want     string            // the served project; empty: not served
		kept     string            // the kept rendering's reason
	}{
		{name: "a newcomer: not served", listings: []sources.Cluster{claim(owned)}},
		{name: "a served cluster: its last rendering", listings: []sources.Cluster{owned, claim(owned)}, kept: why},
		{name: "the rule's project replaces the owner's", project: "acme", listings: []sources.Cluster{claim(owned)}, want: "acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &listings{}
			inv, err := New([]SourceSpec{spec("s1", src)}, Options{Tenants: map[string]sources.TenantRule{
				"acme": {Project: tc.project, Sources: []string{"s1"}, Namespaces: []string{"acme"}},
			}})
			require.NoError(t, err)
			for _, c := range tc.listings {
				src.set(c)
				require.NoError(t, inv.RefreshAll(context.Background()))
			}
			snap := inv.Snapshot()
			if tc.want == "" && tc.kept == "" {
				assert.Empty(t, snap.Clusters)
				require.Len(t, snap.Unserved, 1)
				assert.Contains(t, snap.Unserved[0].Reason, why)
				return
			}
			require.Len(t, snap.Clusters, 1)
			assert.Equal(t, tc.want, snap.Clusters[0].Project)
			assert.Equal(t, []string{"acme"}, snap.Clusters[0].Namespaces, "scoped by the rule")
			if tc.kept != "" {
				require.Len(t, snap.Kept, 1)
				assert.Contains(t, snap.Kept[0].Reason, tc.kept)
			}
		})
	}
}

// TestTenantLabelIsTheCheckedTenant: a label "tenant" the owner wrote
// (a cloud tag "tenant_" made a label key, a Rancher label where the
// tenant is read from another) never reaches the answer or a Secret as a
// tenant: the served cluster's label tenant is its Tenant, or absent. A
// source that trusts its clusters' labels, and a file (the operator's),
// keep theirs as written.
func TestTenantLabelIsTheCheckedTenant(t *testing.T) {
	forged := inPhase("forged", sources.PhaseReady)
	forged.Labels = map[string]string{"tenant": "globex", "env": "prod"}
	admitted := inPhase("admitted", sources.PhaseReady)
	admitted.Labels = map[string]string{"tenant": "globex"}
	admitted.Tenant, admitted.TenantFromOwner = "acme", true
	for _, tc := range []struct {
		name                   string
		kind                   sources.Kind
		trusted                bool
		wantForged, wantAdmits map[string]string
	}{
		{name: "a cloud source", kind: sources.KindCloud,
			wantForged: map[string]string{"env": "prod"}, wantAdmits: map[string]string{"tenant": "acme"}},
		{name: "trust: clusterLabels", kind: sources.KindCloud, trusted: true, wantForged: forged.Labels, wantAdmits: admitted.Labels},
		{name: "a file", kind: sources.KindFile, wantForged: forged.Labels, wantAdmits: admitted.Labels},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &listings{}
			sp := spec("s1", src)
			sp.Provider, sp.Kind, sp.TrustClusterLabels = sources.ProviderEKS, tc.kind, tc.trusted
			inv, err := New([]SourceSpec{sp}, Options{Tenants: map[string]sources.TenantRule{"acme": {Sources: []string{"s1"}}}})
			require.NoError(t, err)
			src.set(forged, admitted)
			require.NoError(t, inv.RefreshAll(context.Background()))
			got := map[string]map[string]string{}
			for _, c := range inv.Snapshot().Clusters {
				got[c.Name] = c.Labels
			}
			assert.Equal(t, map[string]map[string]string{"forged": tc.wantForged, "admitted": tc.wantAdmits}, got)
			assert.Equal(t, "globex", forged.Labels["tenant"], "the listing's labels are not modified")
		})
	}
}
