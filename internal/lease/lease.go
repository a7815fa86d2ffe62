// Package lease runs work only while this process holds a Kubernetes
// Lease, with client-go's leader election: the Secret reconciler and the
// ApplicationSet refresh trigger each have their own Lease; the inventory
// that writes the ledger runs under the Secret reconciler's, or its own.
package lease

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config names a Lease and its timings.
type Config struct {
	Namespace     string
	Name          string
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// RunLeading calls run each time this process acquires the Lease, with a
// context that ends as soon as the Lease is lost (so no new write starts),
// and campaigns again after a loss. leading is told of every change. It
// returns when ctx ends, releasing the Lease.
func RunLeading(ctx context.Context, client coordinationv1.LeasesGetter, cfg Config, leading func(bool), run func(context.Context)) error {
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: cfg.Name, Namespace: cfg.Namespace},
			Client:     client,
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		},
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				leading(true)
				run(ctx)
			},
			OnStoppedLeading: func() { leading(false) },
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
