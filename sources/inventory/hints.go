package inventory

import (
	"context"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// The debounce of hints (sources.Hinter): a hint starts a quiet window of
// HintQuiet, which each further hint restarts, and the source is listed
// when the window ends or HintMaxDelay after the first hint, whichever is
// sooner. A burst of changes is one listing; a hint during a listing is
// one more listing after it (Trigger coalesces), never two at once.
const (
	HintQuiet    = 500 * time.Millisecond
	HintMaxDelay = 3 * time.Second
)

// runHints runs the hints of st's source, if it has them, until ctx is
// cancelled: each burst of hints triggers one listing.
func (inv *Inventory) runHints(ctx context.Context, st *sourceState) {
	h, ok := st.spec.Source.(sources.Hinter)
	if !ok {
		return
	}
	hints := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		debounce(ctx, hints, HintQuiet, HintMaxDelay, func() { inv.Trigger(st.spec.Name) })
	}()
	h.Hints(ctx, func() {
		select {
		case hints <- struct{}{}:
		default:
		}
	})
	<-done
}

// debounce calls fire once per burst of signals on in: quiet after the
// last signal, or maxDelay after the first, whichever comes sooner. It
// returns when ctx is cancelled.
func debounce(ctx context.Context, in <-chan struct{}, quiet, maxDelay time.Duration, fire func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-in:
		}
		deadline := time.NewTimer(maxDelay)
		window := time.NewTimer(quiet)
	burst:
		for {
			select {
			case <-ctx.Done():
				deadline.Stop()
				window.Stop()
				return
			case <-in:
				window.Reset(quiet)
			case <-window.C:
				break burst
			case <-deadline.C:
				break burst
			}
		}
		deadline.Stop()
		window.Stop()
		fire()
	}
}
