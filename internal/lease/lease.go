// Package lease runs work only while this process holds a Kubernetes
// Lease, with client-go's leader election: the Secret reconciler and the
// ApplicationSet refresh trigger each have their own Lease; the inventory
// that writes the ledger runs under the Secret reconciler's, or its own.
package lease

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// Observe, when set, is told the outcome of each read or write of the
	// Lease: nil on success, else the error (a forbidden Lease, an API
	// server out of reach), so that a replica can say why it does not lead.
	Observe func(error)
}

// RunLeading calls run each time this process acquires the Lease, with a
// context that ends as soon as the Lease is lost (so no new write starts),
// and campaigns again after a loss, once run has returned. leading is told
// of every change, in order. It returns when ctx ends, releasing the
// Lease, once run has returned.
//
// run's context also carries a fence (see Check): a write must not start
// once a lease duration has passed since the last renew began, even if the
// context is not cancelled yet.
func RunLeading(ctx context.Context, client coordinationv1.LeasesGetter, cfg Config, leading func(bool), run func(context.Context)) error {
	f := &fence{now: time.Now}
	for ctx.Err() == nil {
		// an elector per term: client-go may call a term's
		// OnStartedLeading after the next term has begun
		t := &term{done: make(chan struct{})}
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &fencedLock{Interface: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Name: cfg.Name, Namespace: cfg.Namespace},
				Client:     client,
				LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
			}, fence: f, duration: cfg.LeaseDuration, observe: cfg.Observe},
			LeaseDuration:   cfg.LeaseDuration,
			RenewDeadline:   cfg.RenewDeadline,
			RetryPeriod:     cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            cfg.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) { t.lead(ctx, f, leading, run) },
				OnStoppedLeading: func() { t.stop(leading) },
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		elector.Run(ctx) // returns when the lease is lost or ctx ends
	}
	return nil
}

// term is one campaign of RunLeading. client-go calls OnStartedLeading in
// a goroutine of its own and OnStoppedLeading when its Run returns, with
// no order between them and without waiting for the first: a term that
// stops before it started never starts, and one that started is stopped
// (leading(false)) after leading(true) and finished when run has returned.
type term struct {
	mu               sync.Mutex
	started, stopped bool
	done             chan struct{} // closed when run has returned
}

func (t *term) lead(ctx context.Context, f *fence, leading func(bool), run func(context.Context)) {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	t.started = true
	leading(true)
	t.mu.Unlock()
	defer close(t.done)
	run(context.WithValue(ctx, fenceKey{}, f))
}

func (t *term) stop(leading func(bool)) {
	t.mu.Lock()
	t.stopped = true
	started := t.started
	leading(false)
	t.mu.Unlock()
	if started {
		<-t.done
	}
}

// fence is the time until which this process may still write: the start
// of its last successful acquire or renew plus the lease duration. Another
// candidate takes the Lease only a lease duration after it observed that
// renew, so no one else leads before the fence. A process frozen past its
// lease (a paused VM, a stopped container) wakes up with its context not yet
// cancelled; the fence tells it, at the write, that it may no longer lead.
type fence struct {
	mu       sync.Mutex
	deadline time.Time // with a monotonic reading
	now      func() time.Time
}

func (f *fence) extend(to time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if to.After(f.deadline) {
		f.deadline = to
	}
}

func (f *fence) check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.now().Before(f.deadline) {
		return fmt.Errorf("the leader lease was not renewed since %s: not writing", f.deadline.Round(time.Millisecond).Format(time.RFC3339Nano))
	}
	return nil
}

// fencedLock is a resource lock that extends the fence at each successful
// write of the Lease (acquire or renew), and releases only a Lease it
// holds.
type fencedLock struct {
	resourcelock.Interface
	fence    *fence
	duration time.Duration
	observe  func(error) // may be nil

	mu sync.Mutex
	// holder is the holder the last read of the Lease found
	holder string
}

func (l *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r, raw, err := l.Interface.Get(ctx)
	if apierrors.IsNotFound(err) {
		l.told(nil) // not created yet: the next step creates it
	} else {
		l.told(err)
	}
	if err == nil && r != nil {
		l.mu.Lock()
		l.holder = r.HolderIdentity
		l.mu.Unlock()
	}
	return r, raw, err
}

func (l *fencedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	start := l.fence.now()
	err := l.Interface.Create(ctx, r)
	if err == nil {
		l.fence.extend(start.Add(l.duration))
	}
	l.told(err)
	return err
}

func (l *fencedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	if r.HolderIdentity == "" {
		return l.release(ctx, r)
	}
	start := l.fence.now()
	err := l.Interface.Update(ctx, r)
	if err == nil {
		l.fence.extend(start.Add(l.duration))
	}
	l.told(err)
	return err
}

// release writes r, a release (no holder), only over a Lease this process
// holds as last read, and never extends the fence. client-go's release
// reads the Lease, then trusts the holder it last observed itself: a
// leader whose renewals timed out while another took the Lease would
// write the release over the new holder's Lease (with its resource
// version, so without a conflict), then take the empty Lease again, and
// both would lead until the other's next renew failed.
func (l *fencedLock) release(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	holder := l.holder
	l.mu.Unlock()
	if holder != l.Identity() {
		return fmt.Errorf("not releasing the lease: %q holds it", holder)
	}
	return l.Interface.Update(ctx, r)
}

func (l *fencedLock) told(err error) {
	if l.observe != nil {
		l.observe(err)
	}
}

type fenceKey struct{}

// WithDeadline returns ctx carrying a fence that ends at deadline by the
// clock now (time.Now when nil), as RunLeading's does at the end of the
// last renew's lease duration: Check fails from then on though ctx is not
// cancelled. It stands for a leader frozen past its lease (a paused VM, a
// stopped container), which no test can make of RunLeading itself.
func WithDeadline(ctx context.Context, deadline time.Time, now func() time.Time) context.Context {
	if now == nil {
		now = time.Now
	}
	f := &fence{now: now}
	f.extend(deadline)
	return context.WithValue(ctx, fenceKey{}, f)
}

// Check returns an error when ctx is a leader's context (RunLeading's) whose
// lease may have passed to another process: the last acquire or renew
// started a lease duration ago or more. Call it right before each write;
// it is nil outside leader election.
func Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if f, ok := ctx.Value(fenceKey{}).(*fence); ok {
		return f.check()
	}
	return nil
}
