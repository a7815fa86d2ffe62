package appsetrefresh

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElection configures the trigger's own Lease. It is not the Secret
// reconciler's Lease: the trigger also runs without the reconciler, and it
// does not depend on both running in one replica (a Secret written by the
// reconciler elsewhere wakes it through the Secret watch).
type LeaderElection struct {
	Namespace     string
	LeaseName     string
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// RunLeading runs the trigger only while this process holds the Lease.
// Losing it cancels the trigger at once; the process then campaigns again.
// It returns when ctx ends, releasing the Lease.
func (t *Trigger) RunLeading(ctx context.Context, le LeaderElection) error {
	if t.kube == nil {
		return fmt.Errorf("leader election: no kubernetes client")
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: le.LeaseName, Namespace: le.Namespace},
			Client:     t.kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
		},
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				t.setLeader(true)
				t.logger.Info("leader lease acquired; refreshing ApplicationSets on changes", "lease", le.LeaseName, "identity", le.Identity)
				t.Run(ctx)
			},
			OnStoppedLeading: func() {
				t.setLeader(false)
				t.logger.Info("not leading; ApplicationSet refreshes are left to the leader", "lease", le.LeaseName, "identity", le.Identity)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	for ctx.Err() == nil {
		elector.Run(ctx) // returns when the lease is lost or ctx ends
	}
	return nil
}

// RunWithoutElection runs the trigger as the only one, for a single
// replica with leader election disabled.
func (t *Trigger) RunWithoutElection(ctx context.Context) {
	t.setLeader(true)
	defer t.setLeader(false)
	t.Run(ctx)
}

// Leader reports whether the trigger runs in this process now.
func (t *Trigger) Leader() bool { return t.leader.Load() }

func (t *Trigger) setLeader(b bool) {
	t.leader.Store(b)
	v := 0.0
	if b {
		v = 1
	}
	t.metrics.leader.Set(v)
}
