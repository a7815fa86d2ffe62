package clusterprofile

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

// TestLagObserve holds when a feed's books count as behind the ledger: a
// gap (the API server's ConfigMap version is not the last book's, or it
// cannot be read) that lasts BehindAfter, restarting whenever the books
// move.
func TestLagObserve(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	cut := errors.New("connection refused")
	type check struct {
		at         time.Duration
		live, upTo string
		err        error
		behind     string // a part of the reason, "" for none
	}
	for _, tc := range []struct {
		name   string
		checks []check
	}{
		{name: "in step", checks: []check{{at: 0, live: "7", upTo: "7"}, {at: 20 * time.Second, live: "7", upTo: "7"}}},
		{name: "a watch a moment late", checks: []check{
			{at: 0, live: "8", upTo: "7"}, {at: 5 * time.Second, live: "8", upTo: "8"}, {at: 10 * time.Second, live: "8", upTo: "8"}}},
		{name: "a watch that has stopped", checks: []check{
			{at: 0, live: "8", upTo: "7"}, {at: 5 * time.Second, live: "9", upTo: "7"},
			{at: 10 * time.Second, live: "9", upTo: "7", behind: `is at resourceVersion "9", this replica's last book at "7"`}}},
		{name: "books that move are not behind, however busy the ledger", checks: []check{
			{at: 0, live: "8", upTo: "7"}, {at: 5 * time.Second, live: "10", upTo: "9"}, {at: 10 * time.Second, live: "12", upTo: "11"}}},
		{name: "the ledger's ConfigMap deleted", checks: []check{
			{at: 0, live: "", upTo: "7"}, {at: 10 * time.Second, live: "", upTo: "7", behind: "behind the leader's last save since 2026-11-29T08:00:00Z"}}},
		{name: "cannot read", checks: []check{
			{at: 0, err: cut, upTo: "7"}, {at: 9 * time.Second, err: cut, upTo: "7"},
			{at: 10 * time.Second, err: cut, upTo: "7", behind: "cannot read the ledger since 2026-11-29T08:00:00Z (connection refused)"}}},
		{name: "a read that fails once", checks: []check{
			{at: 0, err: cut, upTo: "7"}, {at: 5 * time.Second, live: "7", upTo: "7"}, {at: 10 * time.Second, err: cut, upTo: "7"}}},
		{name: "behind, then in step again", checks: []check{
			{at: 0, live: "8", upTo: "7"}, {at: 10 * time.Second, live: "8", upTo: "7", behind: "behind"},
			{at: 15 * time.Second, live: "8", upTo: "8"}, {at: 20 * time.Second, live: "9", upTo: "8"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g lag
			for _, c := range tc.checks {
				got := g.observe(t0.Add(c.at), c.live, c.err, c.upTo, 10*time.Second)
				if c.behind == "" {
					assert.Empty(t, got, "at %s", c.at)
				} else {
					assert.Contains(t, got, c.behind, "at %s", c.at)
				}
			}
		})
	}
}

// TestAReplicaBehindTheLedgerHasNoAnswer holds a replica whose view of
// the ledger has stopped (its watch failing, or the API server out of
// its reach) to a 503 with the reason, instead of its last book: the
// other replica serves the leader's newcomer, and a 200 without it from
// this one would delete the Application the other made Argo CD create.
// It answers again from the ledger as it is once its view catches up. A
// view in step, its saves followed, is never told it is behind.
func TestAReplicaBehindTheLedgerHasNoAnswer(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		all    bool // the API server out of reach: reads by name fail too
		reason string
	}{
		{name: "its watch fails", reason: "this replica's view of the ledger has been behind the leader's last save since"},
		{name: "the API server out of its reach", all: true, reason: "this replica cannot read the ledger since"},
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
			feed, err := New(cfg, Options{Namespace: c.ns, OwnerID: "owner-1", BehindAfter: time.Second})
			require.NoError(t, err)
			view := newInventory(t, &listing{}, nil)
			fctx, stop := context.WithCancel(ctx)
			followed := make(chan struct{})
			go func() { defer close(followed); view.Follow(fctx, feed) }()
			defer func() { stop(); <-followed }()
			serves := func(n int) func() bool {
				return func() bool { s := view.Snapshot(); return s.Unsettled == "" && len(s.Clusters) == n }
			}
			require.Eventually(t, serves(2), 10*time.Second, 10*time.Millisecond)

			require.NoError(t, leader.Save(ctx, ledgertest.Fleet(3)))
			require.Eventually(t, serves(3), 10*time.Second, 10*time.Millisecond)
			require.Never(t, func() bool { return view.Snapshot().Unsettled != "" }, 2500*time.Millisecond, 50*time.Millisecond,
				"a view in step was told it is behind")

			cut.set(true, tc.all)
			require.NoError(t, leader.Save(ctx, ledgertest.Fleet(4)))
			require.Eventually(t, func() bool { return strings.Contains(view.Snapshot().Unsettled, tc.reason) }, 10*time.Second, 20*time.Millisecond,
				"still answering its last book: %q", view.Snapshot().Unsettled)
			assert.Len(t, view.Snapshot().Clusters, 3, "the view has not seen the save: it is behind indeed")
			assert.Contains(t, view.Status().NoAnswer, tc.reason, "/status says why")

			cut.set(false, false)
			require.Eventually(t, serves(4), 90*time.Second, 20*time.Millisecond, "the view caught up: %q", view.Snapshot().Unsettled)
			assert.Empty(t, view.Status().NoAnswer)
		})
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
