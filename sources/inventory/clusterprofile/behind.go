package clusterprofile

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// A follower answers from the books its informers make. Each save that
// changes a record writes the ConfigMap of the source records (its counts
// and sums pin every record), so the ConfigMap's resource version, read
// from the API server, tells whether the last book a feed delivered is
// still the ledger's. A replica whose watch has failed (or silently
// stalled) would otherwise go on answering its last book while the other
// replicas answer the new one: a newcomer that one replica serves is
// missing from the other's 200, and Argo CD deletes the Application the
// first one made it create.

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

// liveConfigMapVersion reads the ledger's ConfigMap from the API server
// (a consistent read, not the informer's cache) and returns its resource
// version, "" when there is none.
func (l *Ledger) liveConfigMapVersion(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.BehindAfter/2)
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

// lag follows how long a feed's books have been behind the ledger. It is
// fed one observation per check (observe) and says when to tell the
// reader. Not safe for concurrent use: the feed's loop owns it.
type lag struct {
	// since is when the current gap was first seen (zero: in step), and
	// key what it was: the version the books were at, or "" for a read
	// that failed
	since time.Time
	key   string
	// told: the reader has been told the books are behind, and must get
	// the current book again once they are not
	told bool
}

// observe takes one check at now: the version of the ConfigMap the API
// server holds (live, or the error that read it), and the version the
// last book delivered reflects (upTo). It returns why the books are
// behind once they have been for after or longer, else "". A gap
// restarts when the books move (a watch that delivers, however late, is
// not failing).
func (g *lag) observe(now time.Time, live string, err error, upTo string, after time.Duration) string {
	if err == nil && live == upTo {
		g.since, g.key = time.Time{}, ""
		return ""
	}
	key := upTo
	if err != nil {
		key = ""
	}
	if g.since.IsZero() || g.key != key {
		g.since, g.key = now, key
	}
	if now.Sub(g.since) < after {
		return ""
	}
	at := g.since.UTC().Format(time.RFC3339)
	if err != nil {
		return fmt.Sprintf("this replica cannot read the ledger since %s (%v): its last book may be behind the leader's", at, err)
	}
	return fmt.Sprintf("this replica's view of the ledger has been behind the leader's last save since %s "+
		"(the ledger's ConfigMap is at resourceVersion %q, this replica's last book at %q): its watch on the ledger is failing", at, live, upTo)
}
