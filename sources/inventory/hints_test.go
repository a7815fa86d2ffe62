package inventory

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestDebounce: a burst of signals fires once, when it has been quiet for
// the window, or at the longest delay after its first signal when it goes
// on; nothing fires without a signal; cancelling stops it.
func TestDebounce(t *testing.T) {
	const quiet, maxDelay = 40 * time.Millisecond, 150 * time.Millisecond
	tests := []struct {
		name           string
		every, lasting time.Duration
		wantMin        int64
		wantMax        int64
	}{
		{"one signal", 0, 0, 1, 1},
		{"a burst shorter than the longest delay", 5 * time.Millisecond, 100 * time.Millisecond, 1, 1},
		{"a burst longer than the longest delay: one every longest delay", 5 * time.Millisecond, 400 * time.Millisecond, 2, 4},
	}
	for _, tt := range tests {
		// in a bubble: its clock moves only when every goroutine waits, so
		// a slow machine cannot stretch the burst's gaps past quiet
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				in := make(chan struct{}, 1)
				var fired atomic.Int64
				done := make(chan struct{})
				go func() { debounce(ctx, in, quiet, maxDelay, func() { fired.Add(1) }); close(done) }()
				send := func() {
					select {
					case in <- struct{}{}:
					default:
					}
				}
				send()
				for end := time.Now().Add(tt.lasting); time.Now().Before(end); time.Sleep(tt.every) {
					send()
				}
				time.Sleep(maxDelay + quiet)
				got := fired.Load()
				assert.GreaterOrEqual(t, got, tt.wantMin)
				assert.LessOrEqual(t, got, tt.wantMax)
				time.Sleep(maxDelay)
				assert.Equal(t, got, fired.Load(), "nothing fires without a signal")
				cancel()
				<-done
			})
		})
	}
}
