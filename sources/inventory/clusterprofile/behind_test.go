package clusterprofile

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

// TestCurrentSaysWhenTheBookIsBehind holds Current, asked before each
// answer, to the ledger as the API server holds it: a replica whose view
// of the ledger has stopped (its watch failing, or the API server out of
// its reach) is told so within CatchUp of a save, instead of answering its
// last book: the other replica serves the leader's newcomer, and a 200
// without it from this one would delete the Application the other made
// Argo CD create. A view a moment behind is waited for, not reported; one
// that catches up is current again.
func TestCurrentSaysWhenTheBookIsBehind(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		all    bool // the API server out of reach: reads by name fail too
		reason string
	}{
		{name: "its watch fails", reason: "this replica's view of the ledger is behind it: the ledger's ConfigMap is at resourceVersion"},
		{name: "the API server out of its reach", all: true, reason: "this replica cannot read the ledger (read configmap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			leader := c.ledger(t, "owner-1")
			require.NoError(t, leader.Save(ctx, ledgertest.Fleet(2)))
			cut := &watchCut{}
			cfg := rest.CopyConfig(c.cfg)
			counted := cfg.WrapTransport
			cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
				return cuttable{rt: counted(rt), cut: cut}
			}
			feed, err := New(cfg, Options{Namespace: c.ns, OwnerID: "owner-1", CatchUp: time.Second})
			require.NoError(t, err)
			require.NoError(t, feed.Current(ctx), "no book yet: nothing to say")
			view := newInventory(t, &listing{}, nil)
			fctx, stop := context.WithCancel(ctx)
			followed := make(chan struct{})
			go func() { defer close(followed); view.Follow(fctx, feed) }()
			defer func() { stop(); <-followed }()
			serves := func(n int) func() bool { return func() bool { return len(view.Snapshot().Clusters) == n } }
			require.Eventually(t, serves(2), 10*time.Second, 10*time.Millisecond)
			require.NoError(t, feed.Current(ctx))

			// a save: asked at once, Current waits for the watch to bring it
			require.NoError(t, leader.Save(ctx, ledgertest.Fleet(3)))
			time.Sleep(FreshFor) // a read from before the save is not used
			require.NoError(t, feed.Current(ctx))
			assert.Len(t, view.Snapshot().Clusters, 3, "current, so the view has the save")
			assert.Empty(t, feed.Behind())

			// one read of the API server serves the requests of FreshFor
			time.Sleep(FreshFor)
			before := cut.gets.Load()
			for range 50 {
				require.NoError(t, feed.Current(ctx))
			}
			assert.LessOrEqual(t, cut.gets.Load()-before, int64(2), "reads of the ledger's ConfigMap for 50 requests")
			// under steady traffic the next read starts before the last
			// expires: no answer waits for one
			waited := feed.cur.waited.Load()
			for range 100 {
				require.NoError(t, feed.Current(ctx))
				time.Sleep(10 * time.Millisecond)
			}
			assert.LessOrEqual(t, feed.cur.waited.Load()-waited, int64(1), "answers of steady traffic that waited for a read")

			cut.set(true, tc.all)
			require.NoError(t, leader.Save(ctx, ledgertest.Fleet(4)))
			time.Sleep(FreshFor)
			start := time.Now()
			err = feed.Current(ctx)
			require.Error(t, err, "still current with a stalled view")
			assert.Contains(t, err.Error(), tc.reason)
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.Len(t, view.Snapshot().Clusters, 3, "the view has not seen the save: it is behind indeed")
			assert.Contains(t, feed.Behind(), tc.reason, "/status says why")

			cut.set(false, false)
			require.Eventually(t, func() bool { return feed.Current(ctx) == nil }, 90*time.Second, 50*time.Millisecond, "the view caught up: %s", feed.Behind())
			assert.Len(t, view.Snapshot().Clusters, 4)
			assert.Empty(t, feed.Behind())
		})
	}
}

// TestNoReplicaServesASaveAStalledOneCannotSee holds the two halves of
// the promise together: as soon as a replica whose watch works serves a
// save (a newcomer), a replica whose watch has stalled is told by Current
// that its book is behind, even if it was asked a moment before the save
// (its read of the ledger, shared for FreshFor, predates the save): books
// wait Settle after their ConfigMap version was seen. Three saves, each
// after the stalled replica caught up again.
func TestNoReplicaServesASaveAStalledOneCannotSee(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	leader := c.ledger(t, "owner-1")
	require.NoError(t, leader.Save(ctx, ledgertest.Fleet(2)))
	healthy := c.ledger(t, "owner-1")
	cut := &watchCut{}
	cfg := rest.CopyConfig(c.cfg)
	counted := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return cuttable{rt: counted(rt), cut: cut} }
	stalled, err := New(cfg, Options{Namespace: c.ns, OwnerID: "owner-1"})
	require.NoError(t, err)
	fctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	views := map[*Ledger]*inventory.Inventory{}
	for _, l := range []*Ledger{healthy, stalled} {
		view := newInventory(t, &listing{}, nil)
		views[l] = view
		wg.Add(1)
		go func() { defer wg.Done(); view.Follow(fctx, l) }()
	}
	defer func() { stop(); wg.Wait() }()
	serves := func(l *Ledger, n int) bool { return len(views[l].Snapshot().Clusters) == n }

	for n := 3; n <= 5; n++ {
		cut.set(false, false)
		require.Eventually(t, func() bool { return serves(stalled, n-1) && stalled.Current(ctx) == nil }, 90*time.Second, 20*time.Millisecond)
		cut.set(true, false)
		asking := make(chan struct{})
		go func() { // asked all along: its read of the ledger is always fresh
			defer close(asking)
			for !serves(healthy, n) {
				_ = stalled.Current(ctx)
				time.Sleep(5 * time.Millisecond)
			}
		}()
		go func() { assert.NoError(t, leader.Save(ctx, ledgertest.Fleet(n))) }()
		require.Eventually(t, func() bool { return serves(healthy, n) }, 10*time.Second, time.Millisecond)
		err := stalled.Current(ctx)
		<-asking
		require.Error(t, err, "save %d: the other replica serves it, and the stalled one would answer its last book", n)
		assert.True(t, serves(stalled, n-1))
	}
}

// watchCut cuts a client's lists and watches: open watches are closed and
// new lists and watches fail, as for a replica whose watch on the ledger
// has failed; with all, every request fails (the API server out of its
// reach).
type watchCut struct {
	mu      sync.Mutex
	on, all bool
	open    []io.Closer
	// gets counts the reads of one object by name
	gets atomic.Int64
}

func (w *watchCut) set(on, all bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on, w.all = on, all
	if on {
		for _, b := range w.open {
			_ = b.Close()
		}
		w.open = nil
	}
}

// cuttable is a transport that watchCut cuts.
type cuttable struct {
	rt  http.RoundTripper
	cut *watchCut
}

func (c cuttable) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	watching := q.Get("watch") == "true" || q.Get("watch") == "1"
	// a list or a watch: a collection (the ClusterProfiles), or the
	// ConfigMap by field selector; a GET by name is neither
	listing := watching || q.Has("fieldSelector") || q.Has("labelSelector") || strings.HasSuffix(r.URL.Path, "/"+Resource.Resource)
	if !listing && r.Method == http.MethodGet {
		c.cut.gets.Add(1)
	}
	c.cut.mu.Lock()
	on, all := c.cut.on, c.cut.all
	c.cut.mu.Unlock()
	if on && (all || listing) {
		return nil, errors.New("connection cut")
	}
	resp, err := c.rt.RoundTrip(r)
	if err == nil && watching {
		c.cut.mu.Lock()
		c.cut.open = append(c.cut.open, resp.Body)
		c.cut.mu.Unlock()
	}
	return resp, err
}
