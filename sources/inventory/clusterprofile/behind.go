package clusterprofile

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// A replica answers from the books its informers make. Each save that
// changes a record ends with a write of the ConfigMap of the source
// records (its counts and sums pin every record), so the ConfigMap's
// resource version, read from the API server, tells whether the last book
// the feed delivered is still the ledger's. A replica whose watch has
// failed, or silently stalled, would otherwise answer its last book while
// the other replicas answer the new one: a newcomer one replica serves is
// missing from the other's 200, and Argo CD deletes the Application the
// first one made it create. Current is asked before each answer; and no
// replica delivers a book sooner than Settle after its informer saw the
// ConfigMap version it holds, so that by the time any replica answers from
// a save, every read a stalled replica may still use (FreshFor) started
// after that save's ConfigMap was written, and shows it.

// FreshFor is how long one read of the ledger's ConfigMap version serves
// the requests that follow it.
const FreshFor = 250 * time.Millisecond

// Settle is how long after the feed's informer saw a ConfigMap version
// the book holding it is delivered, at least: FreshFor, and a margin.
const Settle = FreshFor + 50*time.Millisecond

// liveReadTimeout bounds one read of the ledger's ConfigMap.
const liveReadTimeout = 2 * time.Second

// currency follows the ConfigMap version the feed's last book holds and
// the last read of the API server's (see Current). What every answer
// reads is atomic; mu orders the rest.
type currency struct {
	// booked is the version the last book delivered holds, and when it
	// became that (nil: no book yet): a read of the API server's version
	// from before then cannot tell whether the book is behind
	booked atomic.Pointer[version]
	// last is the last read of the API server's version
	last atomic.Pointer[liveRead]
	// behind is why the last answer of Current was not nil, nil if it was
	behind atomic.Pointer[string]
	// seen is the ConfigMap version the feed's informer holds, and when it
	// first did
	seen atomic.Pointer[version]

	mu sync.Mutex
	// moved is closed (and cleared) when booked changes
	moved chan struct{}
	// reading is the read in flight (nil: none)
	reading *liveRead
	// prefetching: a read started ahead of the last one's expiry is in
	// flight; waited counts the calls that found no fresh read
	prefetching atomic.Bool
	waited      atomic.Int64
}

// liveRead is one read of the ConfigMap's version: when it started, what
// it gave, once done is closed.
type liveRead struct {
	at   time.Time
	done chan struct{}
	live string
	err  error
}

// version is a ConfigMap version, and since when a feed's informer or
// book held it.
type version struct {
	rv string
	at time.Time
}

// saw notes the version of the ConfigMap the feed's informer holds now.
func (c *currency) saw(rv string) {
	if p := c.seen.Load(); p == nil || p.rv != rv {
		c.seen.Store(&version{rv: rv, at: time.Now()})
	}
}

// settled returns how long a book holding version rv must still wait
// before it is delivered (see Settle); 0: now.
func (c *currency) settled(rv string) time.Duration {
	if p := c.booked.Load(); p == nil || p.rv == rv {
		return 0 // the first book (no answer before it), or no new version
	}
	if p := c.seen.Load(); p != nil && p.rv == rv {
		return max(Settle-time.Since(p.at), 0)
	}
	return Settle // seen by the store before the handler noted it
}

// book notes that the last book delivered (or one with the same content)
// holds the ConfigMap at version rv.
func (c *currency) book(rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.booked.Load(); p != nil && p.rv == rv {
		return
	}
	c.booked.Store(&version{rv: rv, at: time.Now()})
	if c.moved != nil {
		close(c.moved)
		c.moved = nil
	}
}

// inStep reports whether the book b (the last delivered) holds live, or
// none was delivered yet, and the version it holds.
func inStep(b *version, live string) (bool, string) {
	if b == nil {
		return true, ""
	}
	return b.rv == live, b.rv
}

// configMapVersion is the resource version of the ledger's ConfigMap in
// store, "" when it holds none.
func (l *Ledger) configMapVersion(store cache.Store) string {
	for _, item := range store.List() {
		if cm, ok := item.(*corev1.ConfigMap); ok && cm.Name == l.opts.ConfigMap {
			return cm.ResourceVersion
		}
	}
	return ""
}

// Current reports whether the last book the feed delivered is the
// ledger's current one. It reads the ConfigMap's version from the API
// server (at most once every FreshFor, one read shared by the requests
// meanwhile) and, when the book holds an older one, waits up to
// Options.CatchUp for the watch to bring the new one. An error says why
// the book may be behind: the replica must not answer from it. Nil before
// the first book: a reader has no answer then anyway.
func (l *Ledger) Current(ctx context.Context) error {
	c := &l.cur
	giveUp := time.Now().Add(l.opts.CatchUp)
	deadline := time.NewTimer(l.opts.CatchUp)
	defer deadline.Stop()
	for {
		booked := c.booked.Load()
		var notBefore time.Time
		if booked != nil {
			notBefore = booked.at // a read from before the book moved cannot tell
		}
		live, err := l.liveVersion(ctx, notBefore, giveUp)
		if err != nil {
			return l.unreadable(ctx, err)
		}
		c.mu.Lock()
		ok, upTo := inStep(booked, live)
		switch {
		case ok:
			c.mu.Unlock()
			return l.report(nil)
		case c.booked.Load() != booked:
			c.mu.Unlock()
			continue // the book moved during the read: read again
		}
		if c.moved == nil {
			c.moved = make(chan struct{})
		}
		moved := c.moved
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return l.report(fmt.Errorf("this replica's view of the ledger is behind it: the ledger's ConfigMap is at resourceVersion %q, "+
				"this replica's last book still at %q after %s (its watch on the ledger failing, or a ClusterProfile edited or deleted "+
				"by hand, which the leader writes again once it sees it)", live, upTo, l.opts.CatchUp))
		case <-moved: // to live, or past it (a save since): see again
		}
	}
}

// unreadable is Current's answer to a read of the ConfigMap that failed:
// the request's own end is not the ledger's fault.
func (l *Ledger) unreadable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return l.report(fmt.Errorf("this replica cannot read the ledger (%w): its last book may be behind the leader's", err))
}

// Behind is why the last answer of Current was not nil, "" if it was.
func (l *Ledger) Behind() string {
	if p := l.cur.behind.Load(); p != nil {
		return *p
	}
	return ""
}

// report notes err as Current's last answer, logging when that changes
// between nil and not, and returns it.
func (l *Ledger) report(err error) error {
	var why *string
	if err != nil {
		s := err.Error()
		why = &s
	} else if l.cur.behind.Load() == nil {
		return nil // every answer while in step: nothing to note
	}
	was := l.cur.behind.Swap(why)
	logger := l.opts.Logger
	switch {
	case logger == nil:
	case why != nil && was == nil:
		logger.Warn("this replica's view of the ledger may be behind it; answering 503 until it is not", "reason", *why)
	case why == nil && was != nil:
		logger.Info("this replica's view of the ledger is the ledger's again")
	}
	return err
}

// liveVersion returns the ConfigMap's version as the API server holds it,
// "" when there is none: from the last read if it started after notBefore
// and less than FreshFor ago, else from the read in flight if it started
// after notBefore, else from a new one, which later calls share. It gives
// up at deadline.
func (l *Ledger) liveVersion(ctx context.Context, notBefore, deadline time.Time) (string, error) {
	c := &l.cur
	if r := c.last.Load(); r != nil && !r.at.Before(notBefore) {
		if age := time.Since(r.at); age < FreshFor {
			if age > FreshFor/2 && c.prefetching.CompareAndSwap(false, true) {
				// the next read before this one expires: under steady
				// traffic no answer waits for one
				r := l.readFrom(ctx, time.Now())
				go func() { <-r.done; c.prefetching.Store(false) }()
			}
			return r.live, r.err
		}
	}
	c.waited.Add(1)
	r := l.readFrom(ctx, notBefore)
	wait := time.NewTimer(time.Until(deadline))
	defer wait.Stop()
	select {
	case <-r.done:
		return r.live, r.err
	case <-wait.C:
		return "", fmt.Errorf("read configmap %s/%s: no answer in time", l.opts.Namespace, l.opts.ConfigMap)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// readFrom returns a read that started after notBefore: the one in
// flight if it did and is less than FreshFor old, else a new one.
func (l *Ledger) readFrom(ctx context.Context, notBefore time.Time) *liveRead {
	c := &l.cur
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reading
	if r == nil || r.at.Before(notBefore) || time.Since(r.at) >= FreshFor {
		r = &liveRead{at: time.Now(), done: make(chan struct{})}
		c.reading = r
		go l.read(context.WithoutCancel(ctx), r)
	}
	return r
}

// read makes the read r and publishes it.
func (l *Ledger) read(ctx context.Context, r *liveRead) {
	r.live, r.err = l.readLive(ctx)
	c := &l.cur
	c.mu.Lock()
	if c.reading == r {
		c.reading = nil
	}
	if p := c.last.Load(); p == nil || !p.at.After(r.at) {
		c.last.Store(r)
	}
	c.mu.Unlock()
	close(r.done)
}

// readLive reads the ledger's ConfigMap from the API server and returns
// its resource version, "" when there is none.
func (l *Ledger) readLive(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, liveReadTimeout)
	defer cancel()
	cm, err := l.core.CoreV1().ConfigMaps(l.opts.Namespace).Get(ctx, l.opts.ConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read configmap %s/%s: %w", l.opts.Namespace, l.opts.ConfigMap, err)
	}
	return cm.ResourceVersion, nil
}
