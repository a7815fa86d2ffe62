package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

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
	require.NoError(t, l.Update(ctx, resourcelock.LeaderElectionRecord{}), "renewed at +10s")
	now = now.Add(14 * time.Second)
	require.NoError(t, Check(ctx), "+24s: within 15s of the renew")

	inner.fail = errors.New("conflict")
	require.Error(t, l.Update(ctx, resourcelock.LeaderElectionRecord{}))
	now = now.Add(time.Second)
	err := Check(ctx)
	require.Error(t, err, "a failed renew does not extend the fence")
	assert.Contains(t, err.Error(), "not writing")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, Check(cancelled), context.Canceled)
	require.NoError(t, Check(context.Background()), "no fence outside leader election")
}
