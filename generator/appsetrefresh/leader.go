package appsetrefresh

import (
	"context"
	"fmt"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
)

// RunLeading runs the trigger only while this process holds the Lease le
// names: its own, not the Secret reconciler's (the trigger also runs
// without the reconciler).
// Losing it cancels the trigger at once; the process then campaigns again.
// Each term calls onLead (which must not block) before the trigger runs:
// the caller starts the informers the trigger reads there. It returns when
// ctx ends, releasing the Lease.
func (t *Trigger) RunLeading(ctx context.Context, le lease.Config, onLead ...func(context.Context)) error {
	if t.kube == nil {
		return fmt.Errorf("leader election: no kubernetes client")
	}
	return lease.RunLeading(ctx, t.kube.CoordinationV1(), le, func(leading bool) {
		t.setLeader(leading)
		if leading {
			t.logger.Info("leader lease acquired; refreshing ApplicationSets on changes", "lease", le.Name, "identity", le.Identity)
		} else {
			t.logger.Info("not leading; ApplicationSet refreshes are left to the leader", "lease", le.Name, "identity", le.Identity)
		}
	}, func(ctx context.Context) {
		for _, f := range onLead {
			f(ctx)
		}
		t.Run(ctx)
	})
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
