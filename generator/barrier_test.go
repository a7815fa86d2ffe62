package generator

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// staticSpec is a static source of the test, listed every hour (or when
// triggered).
func staticSpec(name string, s sources.Source) inventory.SourceSpec {
	return inventory.SourceSpec{Name: name, Provider: sources.ProviderStatic, Source: s, Interval: time.Hour, Timeout: time.Second}
}

// TestSourceAddedLaterWaitsAlone: once an answer has been given, a source
// added later that does not list (a bad credential) delays only its own
// clusters. The others' are served (200, the new source named in the
// stale header), their newcomers are established meanwhile, so that the
// new source's clusters, once it lists, do not take their names. Before,
// every request of every tenant got a 503 until the new source listed,
// and its first listing made a name the answer served a conflict served
// to none.
func TestSourceAddedLaterWaitsAlone(t *testing.T) {
	mem := inventory.NewMemory()
	shared := testCluster("shared", "acme")
	alpha := &scripted{steps: []func() ([]sources.Cluster, error){
		ok(testCluster("a1", "acme"), testCluster("a2", "globex")),
		ok(testCluster("a1", "acme"), testCluster("a2", "globex"), shared),
	}}
	// day 1: alpha alone, answered
	runUntil(t, []inventory.SourceSpec{staticSpec("alpha", alpha)}, mem, nil, func(b inventory.Book) bool {
		return len(b.Clusters) == 2 && !b.Clusters[0].Established.IsZero()
	})

	// day 2: beta is added with a credential it cannot list with; alpha
	// lists a newcomer meanwhile
	betaShared := testCluster("shared", "acme")
	betaShared.Server = "https://shared.beta.example.com"
	beta := &scripted{steps: []func() ([]sources.Cluster, error){fail("403 forbidden"), ok(betaShared)}}
	specs := []inventory.SourceSpec{staticSpec("alpha", alpha), staticSpec("beta", beta)}
	view, err := inventory.New(specs, inventory.Options{})
	require.NoError(t, err)
	leader := runUntil(t, specs, mem, view, func(b inventory.Book) bool { return len(b.Clusters) == 3 && len(b.Sources) == 2 })
	require.Eventually(t, func() bool { return len(view.Snapshot().Clusters) == 3 }, 5*time.Second, 10*time.Millisecond)

	h := newServer(t, view).Handler()
	for _, tc := range []struct {
		params map[string]any
		names  []string
		stale  string
	}{
		{params: nil, names: []string{"a1", "a2", "shared"}, stale: "beta"},
		{params: map[string]any{"tenant": "acme"}, names: []string{"a1", "shared"}, stale: "beta"},
		{params: map[string]any{"source": "alpha"}, names: []string{"a1", "a2", "shared"}},
		{params: map[string]any{"source": "beta"}, names: []string{}, stale: "beta"},
	} {
		rec := do(h, argoRequest(t, GetParamsPath, tc.params))
		require.Equal(t, http.StatusOK, rec.Code, "%v: %s", tc.params, rec.Body.String())
		assert.Equal(t, tc.names, paramNames(t, rec.Body.Bytes()), "%v", tc.params)
		assert.Equal(t, tc.stale, rec.Header().Get("X-Cluster-Discovery-Stale"), "%v", tc.params)
	}

	// beta lists, with a newcomer of the name alpha's cluster is served
	// under: alpha's keeps it
	require.True(t, leader.Trigger("beta"))
	require.Eventually(t, func() bool {
		st, _ := view.Snapshot().Source("beta")
		return st.Synced && len(view.Snapshot().Conflicts) == 1
	}, 5*time.Second, 10*time.Millisecond)
	rec := do(h, argoRequest(t, GetParamsPath, nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, []string{"a1", "a2", "shared"}, paramNames(t, rec.Body.Bytes()))
	assert.Contains(t, rec.Body.String(), `"server":"https://shared.example.com"`, "alpha's cluster keeps its name")
	assert.Empty(t, rec.Header().Get("X-Cluster-Discovery-Stale"))
}

// runUntil runs a leader of specs on ledger, and a view following it
// unless view is nil, until the end of the test; with view nil it stops
// the leader as soon as the ledger holds a book that done accepts.
func runUntil(t *testing.T, specs []inventory.SourceSpec, ledger *inventory.Memory, view *inventory.Inventory, done func(inventory.Book) bool) *inventory.Inventory {
	t.Helper()
	leader, err := inventory.New(specs, inventory.Options{Ledger: ledger})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); leader.Run(ctx) }()
	if view != nil {
		wg.Add(1)
		go func() { defer wg.Done(); view.Follow(ctx, ledger) }()
	}
	stopAll := func() { stop(); wg.Wait() }
	require.Eventually(t, func() bool {
		b, err := ledger.Load(context.Background())
		return err == nil && done(b)
	}, 5*time.Second, 10*time.Millisecond)
	if view == nil {
		stopAll()
	} else {
		t.Cleanup(stopAll)
	}
	return leader
}

// unsettledFeed has read a ledger that does not add up, and says so.
type unsettledFeed struct{ reason string }

func (f unsettledFeed) Watch(ctx context.Context, fn func(inventory.Book)) {
	fn(inventory.Book{Unsettled: f.reason})
	<-ctx.Done()
}

// TestUnsettledLedgerIsA503WithItsReason: a replica whose feed has read a
// ledger it cannot take (its objects do not add up) is ready and answers
// every request 503 with the reason, which Argo CD shows, rather than
// being taken out of the Service (connection refused, no message).
func TestUnsettledLedgerIsA503WithItsReason(t *testing.T) {
	view, err := inventory.New([]inventory.SourceSpec{staticSpec("alpha", &scripted{steps: []func() ([]sources.Cluster, error){ok()}})}, inventory.Options{})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); view.Follow(ctx, unsettledFeed{reason: "the ledger does not add up"}) }()
	defer func() { stop(); <-done }()
	require.Eventually(t, view.Followed, 5*time.Second, 10*time.Millisecond)
	h := newServer(t, view, func(o *Options) {
		o.Ready = func() error {
			if !view.Followed() {
				return errors.New("the ledger has not been read yet")
			}
			return nil
		}
	}).Handler()
	assert.Equal(t, http.StatusOK, do(h, rawRequest("GET", "/readyz", nil, "")).Code)
	for _, params := range []map[string]any{nil, {"source": "alpha"}} {
		rec := do(h, argoRequest(t, GetParamsPath, params))
		require.Equal(t, http.StatusServiceUnavailable, rec.Code, "%v", params)
		assert.Contains(t, rec.Body.String(), "the ledger does not add up; this replica has no answer yet")
		assert.NotEmpty(t, rec.Header().Get("Retry-After"))
	}
}

// TestNoAnswerWhileTheBookIsBehind: a replica whose view of the ledger is
// behind it (Options.Current says so) answers 503 with the reason, not
// the 200 it gave before from the same snapshot (the answer cache is not
// asked first), and answers again once its view is current.
func TestNoAnswerWhileTheBookIsBehind(t *testing.T) {
	var behind atomic.Pointer[error]
	h := newServer(t, demoInventory(t), func(o *Options) {
		o.Current = func(context.Context) error {
			if err := behind.Load(); err != nil {
				return *err
			}
			return nil
		}
	}).Handler()
	params := map[string]any{"tenant": "acme"}
	first := do(h, argoRequest(t, GetParamsPath, params))
	require.Equal(t, http.StatusOK, first.Code)

	err := errors.New("this replica's view of the ledger is behind it")
	behind.Store(&err)
	rec := do(h, argoRequest(t, GetParamsPath, params))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "this replica's view of the ledger is behind it")
	assert.NotEmpty(t, rec.Header().Get("Retry-After"))

	behind.Store(nil)
	again := do(h, argoRequest(t, GetParamsPath, params))
	require.Equal(t, http.StatusOK, again.Code)
	assert.Equal(t, first.Body.String(), again.Body.String())
}
