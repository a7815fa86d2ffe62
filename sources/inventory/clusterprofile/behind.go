package clusterprofile

import (
	"context"
	"fmt"
	"sync"
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
// first one made it create. Current is asked before each answer.

// FreshFor is how long one read of the ledger's ConfigMap version serves
// the requests that follow it. Well under the join delay (a second) that
// the replicas wait before serving a newcomer: a request that the leader's
// replica answers with a newcomer is, on a stalled replica, checked
// against a read made after the save that brought it.
const FreshFor = 250 * time.Millisecond

// liveReadTimeout bounds one read of the ledger's ConfigMap.
const liveReadTimeout = 2 * time.Second

// currency follows the ConfigMap version the feed's last book holds and
// the last read of the API server's (see Current).
type currency struct {
	mu sync.Mutex
	// booked: a book has been delivered; upTo is the version it holds,
	// moved is closed (and cleared) when that changes
	booked bool
	upTo   string
	moved  chan struct{}
	// the last read of the API server's version: when it started, what it
	// gave; reading is closed when the read in flight ends (nil: none)
	readAt  time.Time
	live    string
	readErr error
	reading chan struct{}
	// behind is why the last answer of Current was not nil, "" if it was
	behind string
}

// book notes that the last book delivered (or one with the same
// content) holds the ConfigMap at version rv.
func (c *currency) book(rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.booked = true
	if c.upTo == rv {
		return
	}
	c.upTo = rv
	if c.moved != nil {
		close(c.moved)
		c.moved = nil
	}
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
	live, err := l.liveVersion(ctx, time.Time{})
	if err != nil {
		return l.report(fmt.Errorf("this replica cannot read the ledger (%w): its last book may be behind the leader's", err))
	}
	deadline := time.NewTimer(l.opts.CatchUp)
	defer deadline.Stop()
	c := &l.cur
	for {
		c.mu.Lock()
		if !c.booked || c.upTo == live {
			c.mu.Unlock()
			return l.report(nil)
		}
		if c.moved == nil {
			c.moved = make(chan struct{})
		}
		moved, upTo := c.moved, c.upTo
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return l.report(fmt.Errorf("this replica's view of the ledger is behind it: the ledger's ConfigMap is at resourceVersion %q, "+
				"this replica's last book still at %q after %s (its watch on the ledger failing, or a ClusterProfile edited or deleted "+
				"by hand, which the leader's next save writes again)", live, upTo, l.opts.CatchUp))
		case <-moved:
			// the book moved, maybe past live (a save since): read again
			// (a read that starts now)
			if live, err = l.liveVersion(ctx, time.Now()); err != nil {
				return l.report(fmt.Errorf("this replica cannot read the ledger (%w): its last book may be behind the leader's", err))
			}
		}
	}
}

// Behind is why the last answer of Current was not nil, "" if it was.
func (l *Ledger) Behind() string {
	l.cur.mu.Lock()
	defer l.cur.mu.Unlock()
	return l.cur.behind
}

// report notes err as Current's last answer, logging when that changes
// between nil and not, and returns it.
func (l *Ledger) report(err error) error {
	why := ""
	if err != nil {
		why = err.Error()
	}
	l.cur.mu.Lock()
	was := l.cur.behind
	l.cur.behind = why
	l.cur.mu.Unlock()
	logger := l.opts.Logger
	switch {
	case logger == nil:
	case why != "" && was == "":
		logger.Warn("this replica's view of the ledger may be behind it; answering 503 until it is not", "reason", why)
	case why == "" && was != "":
		logger.Info("this replica's view of the ledger is the ledger's again")
	}
	return err
}

// liveVersion returns the ConfigMap's version as the API server holds it,
// "" when there is none: from a read that started after notBefore and
// less than FreshFor ago, or from a new read, which the calls meanwhile
// share.
func (l *Ledger) liveVersion(ctx context.Context, notBefore time.Time) (string, error) {
	c := &l.cur
	for {
		c.mu.Lock()
		if now := time.Now(); !c.readAt.IsZero() && !c.readAt.Before(notBefore) && now.Sub(c.readAt) < FreshFor {
			live, err := c.live, c.readErr
			c.mu.Unlock()
			return live, err
		}
		if wait := c.reading; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		done := make(chan struct{})
		c.reading = done
		c.mu.Unlock()
		start := time.Now()
		live, err := l.readLive(context.WithoutCancel(ctx))
		c.mu.Lock()
		c.readAt, c.live, c.readErr, c.reading = start, live, err, nil
		close(done)
		c.mu.Unlock()
		return live, err
	}
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
