package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// renew is a renewal's record: a holder (an update without one is a
// release).
var renew = resourcelock.LeaderElectionRecord{HolderIdentity: "a"}

// lock is a resource lock whose writes succeed or fail on demand.
type lock struct {
	resourcelock.Interface
	fail error
}

func (l *lock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return l.fail }
func (l *lock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return l.fail }

// TestFence: a write may start only within a lease duration of the start
// of the last successful acquire or renew, whatever the context says: a
// leader frozen past its lease must not write when it wakes up.
func TestFence(t *testing.T) {
	now := time.Unix(1000, 0)
	f := &fence{now: func() time.Time { return now }}
	inner := &lock{}
	l := &fencedLock{Interface: inner, fence: f, duration: 15 * time.Second}
	ctx := context.WithValue(context.Background(), fenceKey{}, f)

	require.Error(t, Check(ctx), "never acquired")
	require.NoError(t, l.Create(ctx, resourcelock.LeaderElectionRecord{}))
	require.NoError(t, Check(ctx))

	now = now.Add(10 * time.Second)
	require.NoError(t, l.Update(ctx, renew), "renewed at +10s")
	now = now.Add(14 * time.Second)
	require.NoError(t, Check(ctx), "+24s: within 15s of the renew")

	inner.fail = errors.New("conflict")
	require.Error(t, l.Update(ctx, renew))
	now = now.Add(time.Second)
	err := Check(ctx)
	require.Error(t, err, "a failed renew does not extend the fence")
	assert.Contains(t, err.Error(), "not writing")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, Check(cancelled), context.Canceled)
	require.NoError(t, Check(context.Background()), "no fence outside leader election")

	soon := WithDeadline(context.Background(), time.Now().Add(time.Hour), nil)
	require.NoError(t, Check(soon))
	past := WithDeadline(context.Background(), time.Now().Add(-time.Second), nil)
	require.Error(t, Check(past), "past its deadline, though not cancelled")
	require.NoError(t, past.Err())
}

// TestObserve: each read or write of the Lease is reported, a Lease not
// created yet as no error.
func TestObserve(t *testing.T) {
	var got []error
	inner := &getLock{lock: lock{}}
	l := &fencedLock{Interface: inner, fence: &fence{now: time.Now}, duration: time.Second, observe: func(err error) { got = append(got, err) }}
	ctx := context.Background()
	inner.getErr = apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "x")
	_, _, _ = l.Get(ctx)
	inner.getErr = apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "x", errors.New("no"))
	_, _, _ = l.Get(ctx)
	inner.fail = errors.New("conflict")
	_ = l.Update(ctx, renew)
	require.Len(t, got, 3)
	require.NoError(t, got[0], "not found: about to be created")
	assert.True(t, apierrors.IsForbidden(got[1]))
	assert.EqualError(t, got[2], "conflict")
}

// getLock is a lock whose Get fails on demand.
type getLock struct {
	lock
	getErr error
}

func (l *getLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return nil, nil, l.getErr
}

// slowLock is a lock whose Update takes a while: it moves the clock.
type slowLock struct {
	lock
	took time.Duration
	now  *time.Time
}

func (l *slowLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	*l.now = l.now.Add(l.took)
	return l.fail
}

// TestFenceCountsFromTheRenewsStart: a renew that takes 5 s of a 15 s
// lease buys 15 s from when it was sent, not from its answer: another
// candidate may have seen the renewed Lease from its start, so the fence
// ends at start + 15 s, 10 s after the answer.
func TestFenceCountsFromTheRenewsStart(t *testing.T) {
	now := time.Unix(1000, 0)
	f := &fence{now: func() time.Time { return now }}
	l := &fencedLock{Interface: &slowLock{took: 5 * time.Second, now: &now}, fence: f, duration: 15 * time.Second}
	ctx := context.WithValue(context.Background(), fenceKey{}, f)

	sent := now
	require.NoError(t, l.Update(ctx, renew))
	require.Equal(t, sent.Add(5*time.Second), now, "the answer came 5 s later")
	now = sent.Add(15*time.Second - time.Millisecond)
	require.NoError(t, Check(ctx), "within 15 s of the renew's start")
	now = sent.Add(15 * time.Second)
	require.Error(t, Check(ctx), "15 s after the renew was sent, though only 10 s after its answer")
}
