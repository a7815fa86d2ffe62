package inventory

import (
	"context"
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
