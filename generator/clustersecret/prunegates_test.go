package clustersecret

// What holds writes and deletions back on the envtest control plane: a
// source that has not listed yet, a source whose listings fail after a
// restart, and the prune grace period.

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// unreachableSource is a source whose every listing fails, as an upstream
// that refuses connections.
type unreachableSource struct{}

func (unreachableSource) Clusters(context.Context) ([]sources.Cluster, error) {
	return nil, errors.New("dial tcp 10.0.0.9:443: connect: connection refused")
}

// annotationsOf returns the annotations of each cluster Secret, by name.
func (e *env) annotationsOf() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, s := range e.secrets() {
		out[s.Name] = s.Annotations
	}
	return out
}

// TestNoWritesUntilEverySourceListed protects the start-up barrier (no
// write before every source has completed a listing): after a restart, a
// second source never completes a listing. The first source's listing
// shows a new cluster, and a cluster whose Secret of ours was counting
// down is still missing from it; yet no pass creates, updates or deletes
// anything, and the countdown stays as the previous process left it.
func TestNoWritesUntilEverySourceListed(t *testing.T) {
	e := newEnv(t)
	first := newFleet(t, "a", "gone")
	pass(t, newReconciler(t, e, first))
	earlier := time.Now().Add(-time.Hour)
	e.edit(sn("gone"), countdownAt(earlier, 1, earlier)) // one listing missed, counted by the previous process
	first.write("a", "new")

	fleetSrc, err := static.New(static.Config{File: first.path}, "")
	require.NoError(t, err)
	spec := func(name string, src sources.Source) inventory.SourceSpec {
		return inventory.SourceSpec{Name: name, Provider: sources.ProviderStatic, Source: src, Interval: time.Hour, Timeout: 5 * time.Second}
	}
	inv, err := inventory.New([]inventory.SourceSpec{spec("fleet", fleetSrc), spec("down", unreachableSource{})},
		inventory.Options{Departure: inventory.Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 1}})
	require.NoError(t, err)
	require.Error(t, inv.RefreshAll(context.Background()), "the second source fails")
	snap, listings := inv.SnapshotAndListings()
	require.False(t, snap.Synced(), "not every source has listed")
	require.Contains(t, listings, "fleet", "the first source has")

	r := newReconciler(t, e, &fleet{t: t, path: first.path, inv: inv}, func(c *Config) { c.Prune.AfterListings = 2 })
	before := e.annotationsOf()
	e.counter.writes.Store(0)
	for i := range 3 {
		time.Sleep(5 * time.Millisecond) // a later listing start
		require.Error(t, inv.RefreshAll(context.Background()))
		ch := pass(t, r)
		assert.Zero(t, ch.Writes(), "pass %d plans no write", i)
	}
	assert.Zero(t, e.counter.writes.Load(), "nothing was written")
	assert.Equal(t, []string{sn("a"), sn("gone")}, e.secretNames(), "no Secret created or deleted")
	assert.Equal(t, before, e.annotationsOf(), "the countdown is as the previous process left it")
}

// TestFailingSourceFreezesARestartedCountdown protects "no prune, no
// countdown on a failed listing": after a restart, the cluster of a Secret
// of ours is unknown to the process, and its countdown, left by the
// previous process one listing short of the end, was counted at an older
// listing. The source lists once, then every listing fails: the Secret
// stays, its countdown annotations are not touched, and the status says
// the failed listing holds it.
func TestFailingSourceFreezesARestartedCountdown(t *testing.T) {
	e := newEnv(t)
	first := newFleet(t, "stays", "gone")
	pass(t, newReconciler(t, e, first))
	counted := time.Now().Add(-time.Hour)
	e.edit(sn("gone"), countdownAt(counted.Add(-time.Hour), 2, counted))
	first.write("stays")

	f := fleetAt(t, first.path) // the restart: one complete listing, without "gone"
	require.NoError(t, os.WriteFile(f.path, []byte("clusters: [ broken"), 0o600))
	r := newReconciler(t, e, f, func(c *Config) { c.Prune.AfterListings = 3 })
	want := e.get(sn("gone"))
	e.counter.writes.Store(0)
	for range 3 {
		time.Sleep(5 * time.Millisecond)
		require.Error(t, f.refresh())
		ch := pass(t, r)
		assert.Empty(t, names(ch.Delete))
		if assert.Len(t, ch.Pending, 1) {
			assert.Equal(t, "latest listing of the source failed", ch.Pending[0].Held)
			assert.Equal(t, 2, ch.Pending[0].Missed, "not counted")
		}
	}
	assert.Zero(t, e.counter.writes.Load(), "no write while the source fails")
	got := e.get(sn("gone"))
	assert.Equal(t, want.ResourceVersion, got.ResourceVersion)
	for _, k := range countdownAnnotations {
		assert.Equal(t, want.Annotations[k], got.Annotations[k], k)
	}
	assert.Equal(t, []string{sn("gone"), sn("stays")}, e.secretNames())
}

// TestGracePeriodHoldsADeselectedSecret protects the prune grace period:
// a cluster leaves the selection; its Secret's countdown reaches
// AfterListings within the grace period, and the Secret stays, the status
// naming the time it may go; once the clock has passed that time the next
// pass deletes it.
func TestGracePeriodHoldsADeselectedSecret(t *testing.T) {
	const grace = 3 * time.Second
	e := newEnv(t)
	f := newFleet(t, "kept", "dropped")
	pass(t, newReconciler(t, e, f))
	r := newReconciler(t, e, f, func(c *Config) {
		c.Prune.AfterListings, c.Prune.GracePeriod = 2, grace
		c.Select = func(c *sources.Cluster) bool { return c.Name != "dropped" }
	})

	ch := pass(t, r) // the listing already made is the first missed
	require.Empty(t, names(ch.Delete))
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, f.refresh())
	ch = pass(t, r)
	assert.Empty(t, names(ch.Delete), "the count is reached, the grace period is not")
	pending := r.Status().Pending
	require.Len(t, pending, 1)
	p := pending[0]
	assert.Equal(t, Pending{Secret: sn("dropped"), Cluster: "dropped", Source: "fleet", Missed: 2, Needed: 2}, Pending{
		Secret: p.Secret, Cluster: p.Cluster, Source: p.Source, Missed: p.Missed, Needed: p.Needed, Held: p.Held})
	assert.Equal(t, grace, p.DeleteAt.Sub(p.Since), "not before the grace period has passed since it went missing")
	require.True(t, time.Now().Before(p.DeleteAt), "the second pass ran within the grace period")
	assert.Equal(t, []string{sn("dropped"), sn("kept")}, e.secretNames())
	assert.Equal(t, p.Since.UTC().Format(time.RFC3339Nano), e.get(sn("dropped")).Annotations[AnnotationMissingSince])

	time.Sleep(time.Until(p.DeleteAt) + 100*time.Millisecond)
	ch = pass(t, r) // no new listing: the clock alone
	assert.Equal(t, []string{sn("dropped")}, names(ch.Delete))
	assert.Equal(t, []string{sn("kept")}, e.secretNames())
}

// TestSourceAddedLaterHoldsOnlyItsOwn: once the ledger holds an answer (a
// cluster established), a source added later that never lists holds back
// nothing but its own clusters: the other source's newcomer gets its
// Secret. Before, no Secret was written until the new source listed.
func TestSourceAddedLaterHoldsOnlyItsOwn(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a")
	mem := inventory.NewMemory()
	spec := func(name string, src sources.Source) inventory.SourceSpec {
		return inventory.SourceSpec{Name: name, Provider: sources.ProviderStatic, Source: src, Interval: time.Hour, Timeout: 5 * time.Second}
	}
	lead := func(specs ...inventory.SourceSpec) (*inventory.Inventory, func()) {
		inv, err := inventory.New(specs, inventory.Options{Ledger: mem, Departure: inventory.Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 1}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); inv.Run(ctx) }()
		return inv, func() { cancel(); <-done }
	}
	fleetSource := func() sources.Source {
		src, err := static.New(static.Config{File: f.path}, "")
		require.NoError(t, err)
		return src
	}
	_, stop := lead(spec("fleet", fleetSource())) // day 1: answered
	require.Eventually(t, func() bool {
		b, err := mem.Load(context.Background())
		return err == nil && len(b.Clusters) == 1 && !b.Clusters[0].Established.IsZero()
	}, 5*time.Second, 10*time.Millisecond)
	stop()

	f.write("a", "new") // day 2: a source added that cannot list
	inv, stop := lead(spec("fleet", fleetSource()), spec("down", unreachableSource{}))
	defer stop()
	require.Eventually(t, func() bool { return len(inv.Snapshot().Clusters) == 2 }, 5*time.Second, 10*time.Millisecond)
	require.False(t, inv.Snapshot().Synced(), "the added source has not listed")
	pass(t, newReconciler(t, e, &fleet{t: t, path: f.path, inv: inv}))
	assert.Equal(t, []string{sn("a"), sn("new")}, e.secretNames(), "the listed source's clusters have their Secrets")
}

// TestNewTermWritesNothingBeforeTheLedgerIsLoaded: a process that leads
// again starts its inventory's Run (which loads the ledger) beside the
// reconciler; until the load, the inventory's snapshot is the end of its
// last term, which the leader between may have moved on from (here: it
// confirmed b's departure and deleted its Secret). No pass writes from
// it. Before, the first pass of the new term created b's Secret again.
func TestNewTermWritesNothingBeforeTheLedgerIsLoaded(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a", "b")
	src, err := static.New(static.Config{File: f.path}, "")
	require.NoError(t, err)
	inv, err := inventory.New([]inventory.SourceSpec{{Name: "fleet", Provider: sources.ProviderStatic, Source: src, Interval: time.Hour, Timeout: 5 * time.Second}},
		inventory.Options{Ledger: inventory.NewMemory(), Departure: inventory.Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 1}})
	require.NoError(t, err)
	ctx, endTerm := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inv.Run(ctx) }()
	require.Eventually(t, func() bool { return inv.Loaded() && len(inv.Snapshot().Clusters) == 2 }, 5*time.Second, 10*time.Millisecond)
	r := newReconciler(t, e, &fleet{t: t, path: f.path, inv: inv})
	pass(t, r)
	require.Equal(t, []string{sn("a"), sn("b")}, e.secretNames())
	endTerm()
	<-done

	// the other leader's term: b departed, its Secret deleted
	require.NoError(t, e.admin.CoreV1().Secrets(e.ns).Delete(context.Background(), sn("b"), metav1.DeleteOptions{}))
	require.False(t, inv.Loaded(), "a term ended: the next one loads again")
	ch := pass(t, r)
	assert.Zero(t, ch.Writes(), "no write from the last term's snapshot")
	assert.Equal(t, []string{sn("a")}, e.secretNames())
}
