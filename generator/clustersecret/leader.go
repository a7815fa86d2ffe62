package clustersecret

import (
	"context"
	"sync"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
)

// RunLeading runs the reconciler, and each of also beside it, only while
// this process holds the Lease le names, in the reconciler's namespace
// (le.Namespace and le.Observe are the reconciler's). Losing the
// Lease cancels their context at once, so no new write starts; the
// process then campaigns again. It returns when ctx ends, releasing the
// Lease.
func (r *Reconciler) RunLeading(ctx context.Context, client kubeclient.Interface, le lease.Config, also ...func(context.Context)) error {
	le.Namespace, le.Observe = r.cfg.Namespace, r.setLeaseError
	return lease.RunLeading(ctx, client.CoordinationV1(), le, func(leading bool) {
		if leading {
			// a new term: tokens held from an earlier one may have been
			// revoked by the leader between; the first pass adopts again
			r.newTerm()
		}
		r.setLeader(leading)
		if leading {
			r.logger.Info("leader lease acquired; writing cluster Secrets", "identity", le.Identity)
		} else {
			r.logger.Info("not leading; cluster Secrets are left to the leader", "identity", le.Identity)
		}
	}, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, f := range also {
			wg.Add(1)
			go func() { defer wg.Done(); f(ctx) }()
		}
		r.Run(ctx)
		wg.Wait()
	})
}

// setLeaseError records the outcome of the last read or write of the
// Lease, for /status.
func (r *Reconciler) setLeaseError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.LeaseError = ""
	if err != nil {
		r.status.LeaseError = err.Error()
	}
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
	r.newTerm()
	r.setLeader(true)
	defer r.setLeader(false)
	r.Run(ctx)
}
