package rancher

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/front"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// fastEvents is the subscriber's timing in tests: the same rules, in
// milliseconds. The read timeout is 40 pings: a loaded machine that
// misses six would otherwise reconnect, a hint and a listing more than
// the tests count.
var fastEvents = eventTiming{readTimeout: 2 * time.Second, backoffMin: 20 * time.Millisecond, backoffMax: 100 * time.Millisecond,
	stable: time.Hour, authBackoff: 50 * time.Millisecond, handshake: 2 * time.Second}

// newEventsFake is a fake Rancher pinging every 50 ms.
func newEventsFake(t *testing.T, opts ...fakerancher.Option) *fakeRancher {
	t.Helper()
	f, err := fakerancher.New(fixturesDir, testToken, append([]fakerancher.Option{fakerancher.WithSubscribeTiming(50*time.Millisecond, time.Hour)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(f.Close)
	return &fakeRancher{Fake: f, t: t}
}

// hints runs s's subscriber until the test ends and counts its hints.
type hints struct {
	n    atomic.Int64
	done chan struct{}
}

func runHints(t *testing.T, s *Source) *hints {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &hints{done: make(chan struct{})}
	go func() {
		defer close(h.done)
		s.Hints(ctx, func() { h.n.Add(1) })
	}()
	t.Cleanup(func() { cancel(); <-h.done })
	return h
}

func (h *hints) atLeast(t *testing.T, n int64, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return h.n.Load() >= n }, 5*time.Second, 5*time.Millisecond, what)
}

func eventSource(t *testing.T, f *fakeRancher, cfg Config, opts testOptions) *Source {
	t.Helper()
	s := newTestSource(t, "rancher-a", cfg, opts)
	s.events.timing = fastEvents
	return s
}

// TestEventsHint: the connect is a hint (no resume: a listing catches up),
// and so is each change and removal of a cluster; /status and the metrics
// show the stream.
func TestEventsHint(t *testing.T) {
	f := newEventsFake(t)
	reg := prometheus.NewRegistry()
	s := eventSource(t, f, config(t, f), testOptions{Registerer: reg})
	h := runHints(t, s)
	h.atLeast(t, 1, "the connect is a hint")
	require.Eventually(t, func() bool { return f.Subscribers() == 1 }, 5*time.Second, 5*time.Millisecond)
	st := s.HintStatus()
	assert.True(t, st.Enabled)
	assert.True(t, st.Connected)
	assert.Zero(t, st.Reconnects)

	f.Set(fakerancher.Cluster{ID: "c-m-ev000001", Name: "new", State: "provisioning"})
	h.atLeast(t, 2, "a new cluster is a hint")
	f.Remove("c-m-ev000001")
	h.atLeast(t, 3, "a removal is a hint")
	assert.False(t, s.HintStatus().LastEvent.IsZero())

	m := s.events.m
	assert.Equal(t, 1.0, testutil.ToFloat64(m.connected))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.connects))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.received.WithLabelValues("change")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.received.WithLabelValues("remove")))
	time.Sleep(200 * time.Millisecond) // pings only
	assert.Equal(t, int64(3), h.n.Load(), "pings are no hints")
}

// TestEventsReconnect: a cut socket (Rancher's 30-minute close, a lag
// drop) and a silent one (no ping for three intervals) are reconnected,
// each with a hint; a short-lived connection counts as a failure.
func TestEventsReconnect(t *testing.T) {
	f := newEventsFake(t)
	s := eventSource(t, f, config(t, f), testOptions{})
	h := runHints(t, s)
	require.Eventually(t, func() bool { return f.Subscribers() == 1 }, 5*time.Second, 5*time.Millisecond)
	f.CutSubscribers()
	require.Eventually(t, func() bool { return f.SubscribeConnects() == 2 && f.Subscribers() == 1 }, 5*time.Second, 5*time.Millisecond)
	h.atLeast(t, 3, "the connect, the drop and the reconnect")
	assert.Equal(t, 1, s.HintStatus().Reconnects)

	silent := newEventsFake(t, fakerancher.WithSubscribeTiming(time.Hour, time.Hour))
	s = eventSource(t, silent, config(t, silent), testOptions{})
	runHints(t, s)
	require.Eventually(t, func() bool { return silent.SubscribeConnects() >= 2 }, 4*fastEvents.readTimeout, 5*time.Millisecond,
		"a socket silent for the read timeout is dead")
	assert.GreaterOrEqual(t, testutil.ToFloat64(s.events.m.failures.WithLabelValues(string(upstream.KindTimeout))), 1.0,
		"a read deadline passed")
}

// TestEventsShortLivedBackOff: a stream that closes as soon as it opens
// (a proxy cutting upgraded connections) is reconnected after a growing
// wait, as a failed dial is: each reconnect is a listing, so reconnecting
// at the shortest wait would list Rancher every few hundred milliseconds.
func TestEventsShortLivedBackOff(t *testing.T) {
	f := newEventsFake(t, fakerancher.WithSubscribeTiming(50*time.Millisecond, time.Millisecond))
	s := eventSource(t, f, config(t, f), testOptions{})
	runHints(t, s)
	time.Sleep(time.Second)
	// waits of at least 10, 20, 40, 50, 50, ... ms (half of 20, 40, 80,
	// then the 100 ms cap): at most ~20 connects in a second; ~70 at the
	// shortest wait
	assert.LessOrEqual(t, f.SubscribeConnects(), 25, "reconnects back off")
	assert.GreaterOrEqual(t, f.SubscribeConnects(), 5, "and go on")
}

// TestEventsNotServed: a 404 turns the subscriber off, with a log line, a
// metric and /status, and the listing goes on; it asks again after the
// long wait (5 minutes in production), and a stream served again (a 404
// from an ingress during a Rancher rollout) is followed again.
func TestEventsNotServed(t *testing.T) {
	f := newEventsFake(t)
	f.SetSubscribeServed(false)
	logs := &testlog.Buffer{}
	s := eventSource(t, f, config(t, f), testOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	h := runHints(t, s)
	require.Eventually(t, func() bool { return s.HintStatus().Disabled != "" }, 5*time.Second, 5*time.Millisecond, "reported off")
	assert.Zero(t, h.n.Load())
	st := s.HintStatus()
	assert.Contains(t, st.Disabled, "404")
	assert.Contains(t, st.LastError, "no resources types matched")
	assert.Equal(t, 1.0, testutil.ToFloat64(s.events.m.disabled))
	assert.Contains(t, logs.String(), "polled only")
	_, err := s.Clusters(context.Background())
	require.NoError(t, err, "the listing goes on")
	time.Sleep(5 * fastEvents.authBackoff) // asked again, still 404: logged once
	assert.Equal(t, 1, strings.Count(logs.String(), "polled only"))

	f.SetSubscribeServed(true)
	h.atLeast(t, 1, "served again: the connect is a hint")
	assert.Empty(t, s.HintStatus().Disabled)
	assert.Equal(t, 0.0, testutil.ToFloat64(s.events.m.disabled))
}

// TestEventsRefused: a 401 backs off (long in production) and is reported
// without the token; once the token is good again the stream opens.
func TestEventsRefused(t *testing.T) {
	f := newEventsFake(t)
	cfg := config(t, f)
	require.NoError(t, os.WriteFile(cfg.Token.File, []byte("token-abcde:wrong\n"), 0o600))
	s := eventSource(t, f, cfg, testOptions{})
	runHints(t, s)
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(s.events.m.failures.WithLabelValues(string(upstream.KindAuth))) >= 2
	},
		5*time.Second, 5*time.Millisecond)
	st := s.HintStatus()
	assert.False(t, st.Connected)
	assert.Contains(t, st.LastError, "HTTP 401")
	assert.NotContains(t, st.LastError, "wrong")
	assert.NotContains(t, st.LastError, "sEcReT")

	require.NoError(t, os.WriteFile(cfg.Token.File, []byte(testToken+"\n"), 0o600))
	require.Eventually(t, func() bool { return s.HintStatus().Connected }, 5*time.Second, 5*time.Millisecond, "the rotated token is read again")
}

// TestEventsOff: events: false opens nothing.
func TestEventsOff(t *testing.T) {
	f := newEventsFake(t)
	cfg := config(t, f)
	off := false
	cfg.Events = &off
	s := eventSource(t, f, cfg, testOptions{})
	done := make(chan struct{})
	go func() { s.Hints(context.Background(), func() {}); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Hints did not return with events off")
	}
	assert.False(t, s.HintStatus().Enabled)
	assert.Zero(t, f.SubscribeConnects())
}

// TestEventsThroughProxy: the stream goes through the listing's proxy
// (HTTPS_PROXY) with the listing's trust, as norman's own dialer does
// not.
func TestEventsThroughProxy(t *testing.T) {
	f := newEventsFake(t, fakerancher.WithTLS())
	addr := strings.TrimPrefix(f.URL(), "https://")
	proxy := front.NewProxy(front.Route{Pattern: "example.com", Addr: addr})
	t.Cleanup(proxy.Close)
	pu, err := url.Parse(proxy.URL())
	require.NoError(t, err)
	tr, ok := f.Client().Transport.(*http.Transport)
	require.True(t, ok)
	tr = tr.Clone()
	tr.Proxy = http.ProxyURL(pu)
	cfg := config(t, f)
	cfg.URL = "https://example.com" // in httptest's certificate; resolvable through the proxy only
	s := eventSource(t, f, cfg, testOptions{HTTPClient: &http.Client{Transport: tr}})
	runHints(t, s)
	require.Eventually(t, func() bool { return s.HintStatus().Connected }, 5*time.Second, 5*time.Millisecond, s.HintStatus().LastError)
	assert.Equal(t, []string{"CONNECT example.com:443"}, proxy.Seen())
	_, _, err = net.SplitHostPort(addr)
	require.NoError(t, err)
}

// TestEventsListSooner: with the inventory (interval 1h, the leader's
// Run), a cluster added to Rancher is served within seconds, with one
// listing; a change is one listing; a burst of 200 changes within 2 s is
// at most 2 listings; no change, no listing (pings only); a removal is one
// listing, and the cluster stays served until its departure is confirmed.
func TestEventsListSooner(t *testing.T) {
	f := newEventsFake(t)
	f.Set(fakerancher.Cluster{ID: "c-m-base0001", Name: "base", State: "active"})
	s := eventSource(t, f, config(t, f), testOptions{})
	inv, err := inventory.New([]inventory.SourceSpec{{Name: "rancher-a", Provider: sources.ProviderRancher, Source: s,
		Interval: time.Hour, Timeout: 10 * time.Second}}, inventory.Options{Jitter: -1})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { inv.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	served := func(name string) func() bool { return func() bool { return inv.Snapshot().Present(name) } }
	require.Eventually(t, served("base"), 10*time.Second, 10*time.Millisecond)
	// the connect's listing, then quiet
	require.Eventually(t, func() bool { return f.Served() >= 2 }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(inventory.HintQuiet + 500*time.Millisecond)
	steady := f.Served()
	time.Sleep(time.Second)
	assert.Equal(t, steady, f.Served(), "no change, no listing")

	start := time.Now()
	f.Set(fakerancher.Cluster{ID: "c-m-new00001", Name: "newcomer", State: "active"})
	require.Eventually(t, served("newcomer"), 10*time.Second, 10*time.Millisecond)
	took := time.Since(start)
	t.Logf("a new cluster is served %s after Rancher has it", took)
	assert.Less(t, took, inventory.HintMaxDelay+2*time.Second)
	time.Sleep(inventory.HintQuiet + 300*time.Millisecond)
	assert.Equal(t, steady+1, f.Served(), "an added cluster is one listing (one page)")

	f.Set(fakerancher.Cluster{ID: "c-m-new00001", Name: "newcomer", State: "updating"})
	require.Eventually(t, func() bool { return f.Served() == steady+2 }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(inventory.HintQuiet + 300*time.Millisecond)
	assert.Equal(t, steady+2, f.Served(), "a changed cluster is one listing")

	before := f.Served()
	burst := time.Now()
	for i := range 200 {
		f.Set(fakerancher.Cluster{ID: "c-m-new00001", Name: "newcomer", State: "active", Message: strings.Repeat("m", i%7)})
		time.Sleep(9 * time.Millisecond) // 200 changes in about 2 s
	}
	// one listing per longest delay the burst lasted, and the last one's
	// (a loaded machine stretches the burst, not the rule)
	most := 1 + int(time.Since(burst)/inventory.HintMaxDelay)
	time.Sleep(inventory.HintMaxDelay + time.Second)
	assert.LessOrEqual(t, f.Served()-before, max(2, most+1), "a burst is at most two listings")
	assert.GreaterOrEqual(t, f.Served()-before, 1)

	before = f.Served()
	f.Remove("c-m-new00001")
	require.Eventually(t, func() bool { return f.Served() > before }, 10*time.Second, 10*time.Millisecond, "a removal lists the source")
	time.Sleep(inventory.HintQuiet + 300*time.Millisecond)
	assert.Equal(t, before+1, f.Served(), "a removal is one listing")
	assert.True(t, inv.Snapshot().Present("newcomer"), "served until its departure is confirmed, never on an event")
}
