package appsetrefresh

import (
	"context"
	"fmt"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
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
	cfg := lease.Config{Namespace: le.Namespace, Name: le.LeaseName, Identity: le.Identity,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod}
	return lease.RunLeading(ctx, t.kube.CoordinationV1(), cfg, func(leading bool) {
		t.setLeader(leading)
		if leading {
			t.logger.Info("leader lease acquired; refreshing ApplicationSets on changes", "lease", le.LeaseName, "identity", le.Identity)
		} else {
			t.logger.Info("not leading; ApplicationSet refreshes are left to the leader", "lease", le.LeaseName, "identity", le.Identity)
		}
	}, t.Run)
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
