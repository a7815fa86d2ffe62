package main

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// TestReleasingFeed checks when a replica hands its memory back after
// following books: once, a delay after the last large book of a burst,
// never for small books, and never after the feed stopped.
func TestReleasingFeed(t *testing.T) {
	const after, delay = 3, time.Second
	book := func(n int) inventory.Book {
		b := inventory.Book{Sources: []inventory.SourceRecord{{Name: "s", Synced: true}}}
		for i := range n {
			b.Clusters = append(b.Clusters, inventory.Record{Source: "s", ID: strconv.Itoa(i)})
		}
		return b
	}
	tests := []struct {
		name  string
		sizes []int // books saved one after the other, each followed before the next
		want  int   // releases
	}{
		{name: "one large book", sizes: []int{3}, want: 1},
		{name: "a burst of large books", sizes: []int{3, 4, 5, 6}, want: 1},
		{name: "small books", sizes: []int{1, 2}, want: 0},
		{name: "a large book, then small ones", sizes: []int{5, 2, 1}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := inventory.NewMemory()
			var mu sync.Mutex
			var releases []time.Time
			var lastLarge time.Time
			f := releasingFeed{Feed: mem, after: after, delay: delay, release: func() {
				mu.Lock()
				defer mu.Unlock()
				releases = append(releases, time.Now())
			}}
			delivered := make(chan int, 100)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				f.Watch(ctx, func(b inventory.Book) {
					if len(b.Clusters) >= after {
						lastLarge = time.Now()
					}
					delivered <- len(b.Clusters)
				})
			}()
			<-delivered // the empty book
			for _, n := range tt.sizes {
				require.NoError(t, mem.Save(ctx, book(n)))
				for got := -1; got != n; {
					got = <-delivered
				}
			}
			if tt.want > 0 { // waited for: the release's timer may fire late on a loaded machine
				require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(releases) >= tt.want }, delay+5*time.Second, 10*time.Millisecond)
			}
			time.Sleep(delay + delay/2)
			cancel()
			<-done
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, releases, tt.want)
			if tt.want > 0 {
				assert.GreaterOrEqual(t, releases[0].Sub(lastLarge), delay, "released before the books settled")
			}
		})
	}
	t.Run("a feed stopped before the delay releases nothing", func(t *testing.T) {
		mem := inventory.NewMemory()
		released := make(chan struct{}, 1)
		f := releasingFeed{Feed: mem, after: after, delay: delay, release: func() { released <- struct{}{} }}
		require.NoError(t, mem.Save(context.Background(), book(after)))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); f.Watch(ctx, func(inventory.Book) { cancel() }) }()
		<-done
		select {
		case <-released:
			t.Fatal("released after the feed stopped")
		case <-time.After(delay + delay/2):
		}
	})
}
