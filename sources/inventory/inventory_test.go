package inventory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// step is one scripted answer of a fake source.
type step struct {
	clusters []sources.Cluster
	err      error
	block    bool // wait for ctx to end, as a hung upstream does
}

// scripted is a Source that plays its steps in order and repeats the last.
type scripted struct {
	mu    sync.Mutex
	steps []step
	calls int
}

func (s *scripted) Clusters(ctx context.Context) ([]sources.Cluster, error) {
	s.mu.Lock()
	st := s.steps[min(s.calls, len(s.steps)-1)]
	s.calls++
	s.mu.Unlock()
	if st.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return st.clusters, st.err
}

func (s *scripted) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func cluster(name string) sources.Cluster {
	return sources.Cluster{Name: name, Server: "https://" + name + ".example.com/", Ready: true, Labels: map[string]string{"env": "prod"}}
}

func phases(snap *Snapshot) []sources.Phase {
	out := []sources.Phase{}
	for _, c := range snap.Clusters {
		out = append(out, c.Phase)
	}
	return out
}

func names(snap *Snapshot) []string {
	out := []string{}
	for _, c := range snap.Clusters {
		out = append(out, c.Name)
	}
	return out
}

func spec(name string, src sources.Source) SourceSpec {
	return SourceSpec{Name: name, Provider: sources.ProviderStatic, Kind: sources.KindFile, Source: src, Interval: time.Hour, Timeout: time.Second}
}

func TestLastGoodListingIsKeptWhileFailing(t *testing.T) {
	src := &scripted{steps: []step{
		{clusters: []sources.Cluster{cluster("b"), cluster("a"), cluster("c")}},
		{err: errors.New("upstream answered 500")},
		{clusters: []sources.Cluster{cluster("a")}},
	}}
	reg := prometheus.NewRegistry()
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{Registerer: reg})
	require.NoError(t, err)
	ctx := context.Background()

	snap := inv.Snapshot()
	require.Equal(t, uint64(0), snap.Version)
	require.False(t, snap.Synced(), "nothing listed yet")
	st, _ := snap.Source("s1")
	require.False(t, st.Synced)

	require.NoError(t, inv.RefreshAll(ctx))
	snap = inv.Snapshot()
	assert.Equal(t, uint64(1), snap.Version)
	assert.Equal(t, []string{"a", "b", "c"}, names(snap), "sorted by name")
	assert.Equal(t, "https://a.example.com", snap.Clusters[0].Server, "server normalized")
	assert.Equal(t, "s1", snap.Clusters[0].Source, "stamped with its source")
	assert.True(t, snap.Synced())

	err = inv.RefreshAll(ctx)
	require.ErrorContains(t, err, "source s1: list clusters: upstream answered 500")
	snap = inv.Snapshot()
	assert.Equal(t, []string{"a", "b", "c"}, names(snap), "failed listing keeps the last complete one")
	st, _ = snap.Source("s1")
	assert.True(t, st.Synced)
	assert.True(t, st.Stale, "marked stale while failing")
	assert.Equal(t, uint64(2), snap.Version, "stale flag is part of the content")
	status := inv.Status().Sources[0]
	assert.Equal(t, 1, status.ConsecutiveFailures)
	assert.Contains(t, status.LastError, "upstream answered 500")
	assert.Equal(t, 3, status.Clusters)
	assert.Equal(t, 1.0, testutil.ToFloat64(inv.metrics.errors.WithLabelValues("s1")))
	assert.Equal(t, 1.0, testutil.ToFloat64(inv.metrics.stale.WithLabelValues("s1")))

	require.NoError(t, inv.RefreshAll(ctx))
	snap = inv.Snapshot()
	assert.Equal(t, []string{"a", "b", "c"}, names(snap), "clusters missing from one listing are still served")
	assert.Equal(t, []sources.Phase{sources.PhaseReady, sources.PhaseAbsent, sources.PhaseAbsent}, phases(snap))
	st, _ = snap.Source("s1")
	assert.False(t, st.Stale)
	status = inv.Status().Sources[0]
	assert.Equal(t, 0, status.ConsecutiveFailures)
	assert.Empty(t, status.LastError)
	assert.Equal(t, 1.0, testutil.ToFloat64(inv.metrics.clusters.WithLabelValues("s1", "true")))
}

func TestFailureBeforeFirstSyncLeavesSourceUnsynced(t *testing.T) {
	src := &scripted{steps: []step{{err: errors.New("401 must authenticate")}}}
	inv, err := New([]SourceSpec{spec("rancher-eu", src)}, Options{})
	require.NoError(t, err)
	require.Error(t, inv.RefreshAll(context.Background()))
	st, _ := inv.Snapshot().Source("rancher-eu")
	assert.False(t, st.Synced)
	assert.False(t, st.Stale, "nothing to be stale about")
	assert.Empty(t, inv.Snapshot().Clusters)
}

func TestConflictsAreReportedAndNotServed(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	s1 := &scripted{steps: []step{{clusters: []sources.Cluster{cluster("shared"), cluster("only-1")}}}}
	otherShared := cluster("shared")
	otherShared.Server = "https://another-shared.example.com" // another cluster: same server would be a duplicate
	s2 := &scripted{steps: []step{{clusters: []sources.Cluster{otherShared, cluster("only-2")}}}}
	twiceA, twiceB := cluster("twice"), cluster("twice")
	twiceA.ID, twiceB.ID, twiceB.Server = "id-a", "id-b", "https://twice-b.example.com"
	s3 := &scripted{steps: []step{{clusters: []sources.Cluster{twiceA, twiceB}}}}
	reg := prometheus.NewRegistry()
	inv, err := New([]SourceSpec{spec("s1", s1), spec("s2", s2), spec("s3", s3)}, Options{Logger: logger, Registerer: reg})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(context.Background()))

	snap := inv.Snapshot()
	assert.Equal(t, []string{"only-1", "only-2"}, names(snap), "conflicting names are kept out, not picked at random")
	assert.Equal(t, []Conflict{{Name: "shared", Sources: []string{"s1", "s2"}}, {Name: "twice", Sources: []string{"s3", "s3"}}}, snap.Conflicts)
	assert.Equal(t, snap.Conflicts, inv.Status().Conflicts)
	assert.Contains(t, logs.String(), "cluster=shared")
	assert.Contains(t, logs.String(), "sources=s1,s2")
	assert.Equal(t, 2.0, testutil.ToFloat64(inv.metrics.conflicts))
}

func TestNotReadyAndInvalidClusters(t *testing.T) {
	bad := cluster("bad-server")
	bad.Server = "ftp://nope"
	noCA := cluster("no-ca")
	noCA.Ready, noCA.NotReadyReason = false, "CA not fetched yet"
	badAuth := cluster("bad-auth")
	badAuth.Auth = sources.Auth{Kind: sources.AuthBearerToken}
	// not ready upstream and, because of it, no server: the source's reason is kept
	noAgent := cluster("no-agent")
	noAgent.Server, noAgent.Ready, noAgent.NotReadyReason = "", false, "agent not registered: annotate its Secret"
	src := &scripted{steps: []step{{clusters: []sources.Cluster{bad, noCA, badAuth, noAgent, cluster("ok")}}}}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(context.Background()))
	snap := inv.Snapshot()
	assert.Equal(t, []string{"ok"}, names(snap), "a cluster never rendered is not served")
	got := map[string]Unserved{}
	for _, u := range snap.Unserved {
		got[u.Name] = u
	}
	require.Len(t, got, 4, "clusters that cannot be rendered are reported, and present: nobody prunes them")
	assert.Contains(t, got["bad-server"].Reason, "invalid server")
	assert.Equal(t, "CA not fetched yet", got["no-ca"].Reason)
	assert.Contains(t, got["bad-auth"].Reason, "invalid auth")
	assert.Equal(t, "agent not registered: annotate its Secret", got["no-agent"].Reason)
	assert.True(t, snap.Present("no-ca"))
	assert.Equal(t, 4, inv.Status().Sources[0].NotReady)
	assert.Len(t, inv.Status().Unserved, 4)
}

func TestNamelessClusterFailsTheListing(t *testing.T) {
	src := &scripted{steps: []step{{clusters: []sources.Cluster{cluster("a"), {Server: "https://x"}}}}}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{})
	require.NoError(t, err)
	require.ErrorContains(t, inv.RefreshAll(context.Background()), "has no name")
	assert.Empty(t, inv.Snapshot().Clusters, "no partial result")
}

// TestUnchangedListingReleasesThePrevious checks that after a listing that
// changes nothing, the inventory holds the renderings it held (the same
// objects, not copies) and nothing of the new listing, and that a changed
// cluster gets a rendering of its own: no record points into a listing,
// which would keep the whole listing in memory.
func TestUnchangedListingReleasesThePrevious(t *testing.T) {
	src := &scripted{steps: []step{{clusters: []sources.Cluster{cluster("a"), cluster("b")}}}}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(context.Background()))
	first := inv.Snapshot()
	require.NoError(t, inv.RefreshAll(context.Background()))
	second := inv.Snapshot()
	assert.Equal(t, first.Version, second.Version)
	assert.Same(t, first.Clusters[0], second.Clusters[0], "an unchanged cluster keeps its rendering")
	assert.Same(t, inv.states[0].life.served[0], second.Clusters[0])

	changed := cluster("b")
	changed.Labels = map[string]string{"env": "dev"}
	src.mu.Lock()
	src.steps = []step{{clusters: []sources.Cluster{cluster("a"), changed}}}
	src.mu.Unlock()
	require.NoError(t, inv.RefreshAll(context.Background()))
	third := inv.Snapshot()
	assert.Same(t, first.Clusters[0], third.Clusters[0])
	assert.Equal(t, map[string]string{"env": "dev"}, third.Clusters[1].Labels)
	assert.NotSame(t, first.Clusters[1], third.Clusters[1], "a changed cluster gets a rendering of its own")
}

// generated is a Source whose every listing is a new slice made by gen
// (the number of listings before it): nothing but the inventory holds a
// listing once it is returned.
type generated struct {
	mu    sync.Mutex
	calls int
	gen   func(call int) []sources.Cluster
}

func (g *generated) Clusters(context.Context) ([]sources.Cluster, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	return g.gen(g.calls - 1), nil
}

// TestRecordsDoNotKeepListings checks that what the inventory holds never
// keeps a listing alive. Here, from each listing on, one more cluster
// cannot be rendered and keeps its last good rendering: were that
// rendering a pointer into the listing it came from, the inventory would
// hold every one of those listings (5,000 clusters: ~1.8 MiB each).
func TestRecordsDoNotKeepListings(t *testing.T) {
	const n, listings = 5000, 10
	src := &generated{gen: func(call int) []sources.Cluster {
		out := make([]sources.Cluster, n)
		for i := range out {
			out[i] = cluster(fmt.Sprintf("c-%05d", i))
			if i < call {
				out[i].Ready, out[i].NotReadyReason = false, "cacerts cannot be read"
			}
		}
		return out
	}}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{})
	require.NoError(t, err)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	require.NoError(t, inv.RefreshAll(context.Background()))
	before := heap()
	for range listings - 1 {
		require.NoError(t, inv.RefreshAll(context.Background()))
	}
	after := heap()
	snap := inv.Snapshot()
	require.Len(t, snap.Clusters, n, "every cluster served")
	assert.Len(t, snap.Kept, listings-1, "a cluster that cannot be rendered keeps its last good rendering")
	listing := uint64(n) * uint64(unsafe.Sizeof(sources.Cluster{}))
	assert.Less(t, int64(after)-int64(before), int64(2*listing),
		"after %d listings the heap grew by %d bytes; one listing is %d", listings, int64(after)-int64(before), listing)
}

// TestListingSharedNotCopied checks the sources.Source contract: the
// inventory stamps its own copy of each cluster (the source's slice is left
// as it was) and keeps what the clusters point to without copying it, so
// that 10,000 clusters' labels are held once, not twice.
func TestListingSharedNotCopied(t *testing.T) {
	listing := []sources.Cluster{cluster("a")}
	src := &scripted{steps: []step{{clusters: listing}}}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(context.Background()))

	got := inv.Snapshot().Clusters[0]
	assert.Equal(t, "s1", got.Source)
	assert.Equal(t, "https://a.example.com", got.Server)
	assert.Empty(t, listing[0].Source, "the source's slice is not written to")
	assert.Equal(t, "https://a.example.com/", listing[0].Server)
	assert.Equal(t, reflect.ValueOf(listing[0].Labels).UnsafePointer(), reflect.ValueOf(got.Labels).UnsafePointer(),
		"labels are shared with the source, not copied")
}

// TestSnapshotsShareListings checks that a snapshot shares the renderings
// the inventory holds: a listing of one source copies neither the clusters
// of the others into the next snapshot nor its own unchanged ones.
func TestSnapshotsShareListings(t *testing.T) {
	s1 := &scripted{steps: []step{{clusters: []sources.Cluster{cluster("a")}}}}
	s2 := &scripted{steps: []step{{clusters: []sources.Cluster{cluster("b")}}, {clusters: []sources.Cluster{cluster("b"), cluster("c")}}}}
	inv, err := New([]SourceSpec{spec("s1", s1), spec("s2", s2)}, Options{})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(context.Background()))
	before := inv.Snapshot()
	require.NoError(t, inv.refresh(context.Background(), inv.states[1])) // s2 only
	after := inv.Snapshot()
	require.Equal(t, []string{"a", "b"}, names(before))
	require.Equal(t, []string{"a", "b", "c"}, names(after))
	assert.Same(t, before.Clusters[0], after.Clusters[0], "s1's cluster is shared, not copied")
	assert.Same(t, before.Clusters[1], after.Clusters[1], "s2 listed b again, unchanged")
}

func TestNewRejectsBadSpecs(t *testing.T) {
	ok := &scripted{steps: []step{{}}}
	cases := []struct {
		name  string
		specs []SourceSpec
		opts  Options
		want  string
	}{
		{"no name", []SourceSpec{spec("", ok)}, Options{}, "no name"},
		{"duplicate", []SourceSpec{spec("a", ok), spec("a", ok)}, Options{}, "used twice"},
		{"provider", []SourceSpec{{Name: "a", Source: ok, Interval: time.Second, Timeout: time.Second}}, Options{}, "no provider"},
		{"no source", []SourceSpec{{Name: "a", Provider: sources.ProviderStatic, Interval: time.Second, Timeout: time.Second}}, Options{}, "no implementation"},
		{"interval", []SourceSpec{{Name: "a", Provider: sources.ProviderStatic, Source: ok, Timeout: time.Second}}, Options{},
			`source a: sources[0].interval: Invalid value: "0s": must be at least 1s`},
		{"interval below the loader's minimum", []SourceSpec{spec("a", ok), {Name: "b", Provider: sources.ProviderStatic, Source: ok, Interval: 500 * time.Millisecond, Timeout: time.Second}}, Options{},
			`source b: sources[1].interval: Invalid value: "500ms": must be at least 1s`},
		{"timeout", []SourceSpec{{Name: "a", Provider: sources.ProviderStatic, Source: ok, Interval: time.Second}}, Options{},
			`source a: sources[0].timeout: Invalid value: "0s": must be at least 1ms`},
		{"jitter", []SourceSpec{spec("a", ok)}, Options{Jitter: 1}, "jitter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.specs, tc.opts)
			require.Error(t, err)
			if strings.HasPrefix(tc.want, "source ") {
				assert.Equal(t, tc.want, err.Error(), "the loader's words (inventory.ValidateInterval, ValidateTimeout)")
				return
			}
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestMetricsExposeEverySource(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := New([]SourceSpec{spec("a", &scripted{steps: []step{{}}})}, Options{Registerer: reg})
	require.NoError(t, err)
	n, err := testutil.GatherAndCount(reg, "argocd_cluster_discovery_source_synced")
	require.NoError(t, err)
	assert.Equal(t, 1, n, "series exist before the first listing")
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP argocd_cluster_discovery_source_synced 1 once a source has completed a listing.
# TYPE argocd_cluster_discovery_source_synced gauge
argocd_cluster_discovery_source_synced{source="a"} 0
`), "argocd_cluster_discovery_source_synced")
	require.NoError(t, err)
}
