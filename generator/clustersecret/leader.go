package clustersecret

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElection configures the Lease that lets several replicas serve the
// API while one writes Secrets.
type LeaderElection struct {
	LeaseName     string
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// RunLeading runs the reconciler only while this process holds the Lease
// in the reconciler's namespace. Losing the Lease cancels the reconciler's
// context at once, so no new write starts; the process then campaigns
// again. It returns when ctx ends, releasing the Lease.
func (r *Reconciler) RunLeading(ctx context.Context, client kubernetes.Interface, le LeaderElection) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: le.LeaseName, Namespace: r.cfg.Namespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				r.setLeader(true)
				r.logger.Info("leader lease acquired; writing cluster Secrets", "identity", le.Identity)
				r.Run(ctx)
			},
			OnStoppedLeading: func() {
				r.setLeader(false)
				r.logger.Info("not leading; cluster Secrets are left to the leader", "identity", le.Identity)
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

func (r *Reconciler) setLeader(b bool) {
	r.leader.Store(b)
	if b {
		r.metrics.leader.Set(1)
	} else {
		r.metrics.leader.Set(0)
	}
}

// RunWithoutElection runs the reconciler as the only writer, for a single
// replica with leader election disabled.
func (r *Reconciler) RunWithoutElection(ctx context.Context) {
	r.setLeader(true)
	defer r.setLeader(false)
	r.Run(ctx)
}
