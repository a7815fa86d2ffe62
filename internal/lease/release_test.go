package lease

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// TestReleaseOnlyWhatWeHold: client-go's release reads the Lease, then
// writes an empty holder if the holder it last observed itself is this
// process. A leader whose renewals timed out while another replica took
// the Lease still believes it holds it: the release must not be written
// over the new holder's Lease (then both would lead), nor extend the
// fence. A Lease this process holds is released as before.
func TestReleaseOnlyWhatWeHold(t *testing.T) {
	for _, tc := range []struct {
		name, holder string
		released     bool
	}{
		{name: "another replica took the Lease", holder: "b"},
		{name: "ours", holder: "a", released: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset(&coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns"},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &tc.holder},
			})
			f := &fence{now: time.Now}
			l := &fencedLock{Interface: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns"},
				Client: client.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: "a"}},
				fence: f, duration: time.Minute}
			// what client-go's release does
			_, _, err := l.Get(ctx)
			require.NoError(t, err)
			now := metav1.Now()
			err = l.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now})

			got, gerr := client.CoordinationV1().Leases("ns").Get(ctx, "l", metav1.GetOptions{})
			require.NoError(t, gerr)
			if tc.released {
				require.NoError(t, err)
				assert.Empty(t, *got.Spec.HolderIdentity, "released")
			} else {
				require.Error(t, err)
				assert.Equal(t, tc.holder, *got.Spec.HolderIdentity, "the new holder's Lease is left as it is")
			}
			require.Error(t, Check(context.WithValue(ctx, fenceKey{}, f)), "a release extends no fence")
		})
	}
}

// TestRunLeadingWaitsForRun: RunLeading returns once the term's run has
// returned, not only its context ended, and leading(false) comes after
// leading(true). Before, client-go's OnStartedLeading goroutine could
// outlive RunLeading (and a next term start beside it).
func TestRunLeadingWaitsForRun(t *testing.T) {
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var told []bool
	returned := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- RunLeading(ctx, client.CoordinationV1(), Config{Namespace: "ns", Name: "l", Identity: "a",
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 100 * time.Millisecond},
			func(b bool) {
				mu.Lock()
				defer mu.Unlock()
				told = append(told, b)
			},
			func(ctx context.Context) {
				<-ctx.Done()
				time.Sleep(200 * time.Millisecond) // a write in flight finishing
				close(returned)
			})
	}()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(told) == 1
	}, 10*time.Second, 10*time.Millisecond, "leading")
	cancel()
	require.NoError(t, <-errc)
	select {
	case <-returned:
	default:
		t.Fatal("RunLeading returned before run did")
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []bool{true, false}, told)
}
