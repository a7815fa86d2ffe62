package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// unreadable is a Ledger whose Load fails a number of times (an API server
// not answering yet) before it reads the memory behind it.
type unreadable struct {
	*Memory
	mu       sync.Mutex
	failures int // Loads still to fail
	loads    int
	loaded   bool // a Load succeeded
}

func (u *unreadable) Load(ctx context.Context) (Book, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.loads++
	if u.failures > 0 {
		u.failures--
		return Book{}, errors.New("clusterprofiles: the server is currently unable to handle the request")
	}
	b, err := u.Memory.Load(ctx)
	u.loaded = err == nil
	return b, err
}

// state returns how many Loads were tried and whether one succeeded.
func (u *unreadable) state() (loads int, loaded bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.loads, u.loaded
}

// watchedSource lists the clusters it is given and counts its listings,
// and those made before the ledger was loaded.
type watchedSource struct {
	listings
	ledger       *unreadable
	calls, early int
}

func (w *watchedSource) Clusters(ctx context.Context) ([]sources.Cluster, error) {
	_, loaded := w.ledger.state()
	w.mu.Lock()
	w.calls++
	if !loaded {
		w.early++
	}
	w.mu.Unlock()
	return w.listings.Clusters(ctx)
}

func (w *watchedSource) counts() (calls, early int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls, w.early
}

// TestNoListingBeforeTheLedgerIsLoaded: a leader that cannot read the
// ledger does not list (it would forget the drop the ledger holds): it
// tries again with a growing wait, lists only once the ledger is loaded,
// and the held drop is still held; shut down while it waits, it returns
// without listing. The bubble's fake clock runs the waits.
func TestNoListingBeforeTheLedgerIsLoaded(t *testing.T) {
	rule := Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 6}
	for _, tc := range []struct {
		name     string
		failures int           // failed Loads before one succeeds
		cancelAt time.Duration // shut down this long after the start, while waiting; 0: never
	}{
		{name: "two failed loads, then the book: the drop is still held", failures: 2},
		{name: "shut down while waiting to load again", failures: 1 << 20, cancelAt: 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ledger := &unreadable{Memory: NewMemory(), failures: tc.failures}
				src := &watchedSource{ledger: ledger}
				heldDropIn(t, ledger.Memory, rule, src)

				inv, err := New([]SourceSpec{spec("s1", src)}, Options{Departure: rule, Ledger: ledger})
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); inv.Run(ctx) }()
				defer func() { cancel(); <-done }()

				synctest.Wait()
				calls, early := src.counts()
				require.Zero(t, calls, "the first Load failed: no listing")
				require.Zero(t, early)
				if tc.cancelAt > 0 {
					time.Sleep(tc.cancelAt) // the bubble's clock: one more failed Load
					synctest.Wait()
					cancel()
					<-done
					loads, _ := ledger.state()
					assert.Equal(t, 2, loads)
					calls, _ = src.counts()
					assert.Zero(t, calls, "Run returned without listing")
					return
				}
				time.Sleep(3 * time.Second) // the waits: 1 s, then 2 s
				synctest.Wait()
				loads, loaded := ledger.state()
				require.True(t, loaded)
				assert.Equal(t, tc.failures+1, loads)
				calls, early = src.counts()
				assert.Equal(t, 1, calls, "one listing, after the load")
				assert.Zero(t, early, "no listing before the ledger was loaded")
				snap := inv.Snapshot()
				assert.Len(t, snap.Clusters, 8, "the held drop is still served")
				st, _ := snap.Source("s1")
				assert.Equal(t, 8, st.HeldDepartures, "and still held")
			})
		})
	}
}

// heldDropIn has a previous leader leave ledger holding a held drop of
// src's eight clusters (listed once, then missing from one listing), and
// leaves src answering without them.
func heldDropIn(t *testing.T, ledger *Memory, rule Departure, src *watchedSource) {
	t.Helper()
	var fleet []sources.Cluster
	for i := range 8 {
		fleet = append(fleet, inPhase(fmt.Sprintf("c%d", i), sources.PhaseReady))
	}
	previous, err := New([]SourceSpec{spec("s1", &src.listings)}, Options{Departure: rule, Ledger: ledger})
	require.NoError(t, err)
	src.set(fleet...)
	require.NoError(t, previous.RefreshAll(context.Background()))
	src.set() // the token lost its rights
	require.NoError(t, previous.RefreshAll(context.Background()))
	st, _ := previous.Snapshot().Source("s1")
	require.Equal(t, 8, st.HeldDepartures)
}

// blocking is a source whose listings wait for release, whatever their
// context says: a Run of it returns only once released.
type blocking struct{ release chan struct{} }

func (b blocking) Clusters(context.Context) ([]sources.Cluster, error) {
	<-b.release
	return []sources.Cluster{cluster("a")}, nil
}

// TestLoadedFollowsTheTermNotTheRun: a term ends when its context does,
// though its Run returns later (a listing in flight); from then on the
// inventory is not loaded, and the next term's Run, once it has loaded,
// is not undone by the earlier Run returning meanwhile.
func TestLoadedFollowsTheTermNotTheRun(t *testing.T) {
	src := blocking{release: make(chan struct{})}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{Ledger: NewMemory()})
	require.NoError(t, err)
	term := func() (func(), chan struct{}) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); inv.Run(ctx) }()
		return cancel, done
	}
	end1, done1 := term()
	require.Eventually(t, inv.Loaded, 5*time.Second, time.Millisecond, "term 1 loaded")
	end1()
	require.Eventually(t, func() bool { return !inv.Loaded() }, 5*time.Second, time.Millisecond, "term 1 ended: not loaded though its Run has not returned")
	end2, done2 := term()
	defer func() { end2(); close(src.release); <-done2 }()
	require.Eventually(t, inv.Loaded, 5*time.Second, time.Millisecond, "term 2 loaded")
	// term 1's listing returns, and its Run. Term 2's listing is in flight
	// on the same source too, and may have called first (term 1's loop
	// starts its listing with its context already ended): release until
	// term 1's Run has returned
	for ended := false; !ended; {
		select {
		case src.release <- struct{}{}:
		case <-done1:
			ended = true
		}
	}
	assert.True(t, inv.Loaded(), "term 1's Run ending does not undo term 2's load")
}

// TestARunThatReturnedIsNotLoaded: once a term's Run has returned, the
// inventory is not loaded, at once. Before, only a context.AfterFunc
// cleared it: its function runs in a goroutine of its own, after Run may
// have returned, and not at all when Run's deferred stop won the race.
func TestARunThatReturnedIsNotLoaded(t *testing.T) {
	src := &scripted{steps: []step{{clusters: []sources.Cluster{cluster("a")}}}}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{Ledger: NewMemory()})
	require.NoError(t, err)
	for i := range 1000 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); inv.Run(ctx) }()
		require.Eventually(t, inv.Loaded, 5*time.Second, time.Millisecond, "term %d loaded", i)
		cancel()
		<-done
		require.False(t, inv.Loaded(), "term %d returned: not loaded", i)
	}
}

// endsTheTerm is a ledger whose load succeeds as the term ends.
type endsTheTerm struct {
	*Memory
	end context.CancelFunc
}

func (l endsTheTerm) Load(ctx context.Context) (Book, error) {
	b, err := l.Memory.Load(ctx)
	l.end()
	return b, err
}

// TestATermEndedDuringTheLoadIsNotLoaded: a load that succeeds after the
// term ended does not make the inventory loaded, though the Run goes on
// until its listing in flight returns. Before, the end could be recorded
// first and the load after it, which then held until the Run returned.
func TestATermEndedDuringTheLoadIsNotLoaded(t *testing.T) {
	src := blocking{release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{Ledger: endsTheTerm{Memory: NewMemory(), end: cancel}})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); inv.Run(ctx) }()
	<-ctx.Done()
	require.Never(t, inv.Loaded, 300*time.Millisecond, time.Millisecond)
	close(src.release)
	<-done
	assert.False(t, inv.Loaded())
}

// TestALoadedSourceHasNoListingYet: a new leader holds its sources as the
// ledger does, synced, before it lists them; SnapshotAndListings gives a
// source a listing only once this process has listed it, so that the
// Secret reconciler's prune countdown never counts a listing nobody made
// (with prune.afterListings 1 it would delete a Secret the last term
// wrote before its ledger save).
func TestALoadedSourceHasNoListingYet(t *testing.T) {
	mem := NewMemory()
	a := cluster("a")
	a.ID, a.Source = "id-a", "s1"
	require.NoError(t, mem.Save(context.Background(), Book{
		Sources:  []SourceRecord{{Name: "s1", Provider: sources.ProviderStatic, Synced: true}},
		Clusters: []Record{{Source: "s1", ID: "id-a", Rendering: &a, Served: true, Established: time.Now().Add(-time.Hour), Holds: "a"}}}))
	src := blocking{release: make(chan struct{})}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{Ledger: mem})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inv.Run(ctx) }()
	defer func() { cancel(); close(src.release); <-done }()
	require.Eventually(t, func() bool { st, _ := inv.Snapshot().Source("s1"); return st.Synced }, 5*time.Second, time.Millisecond,
		"the ledger loaded: s1 synced as it says")

	snap, listings := inv.SnapshotAndListings()
	assert.Equal(t, []string{"a"}, names(snap), "served as the ledger says")
	assert.NotContains(t, listings, "s1", "no listing of s1 in this term yet")

	src.release <- struct{}{}
	require.Eventually(t, func() bool { _, l := inv.SnapshotAndListings(); return !l["s1"].IsZero() }, 5*time.Second, time.Millisecond,
		"this term's listing counts")
}
