package inventory

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// savesLedger is a memory ledger that keeps every book saved to it.
type savesLedger struct {
	*Memory
	mu    sync.Mutex
	books []Book
}

func (l *savesLedger) Save(ctx context.Context, b Book) error {
	l.mu.Lock()
	l.books = append(l.books, b)
	l.mu.Unlock()
	return l.Memory.Save(ctx, b)
}

// TestFirstSaveWaitsForEverySource: a cold start writes each record once.
// The listing of the first source to list is not saved on its own (its
// clusters become established once the other has listed, and their records
// would be written again); once every source has tried a listing, whether
// it failed or not, the book is saved and every save after that follows
// its listing.
func TestFirstSaveWaitsForEverySource(t *testing.T) {
	ready := sources.PhaseReady
	for _, tc := range []struct {
		name           string
		secondFails    bool
		wantClusters   int
		wantEstablshed bool
	}{
		{name: "both list", wantClusters: 3, wantEstablshed: true},
		{name: "the second fails its first listing", secondFails: true, wantClusters: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			first, second := &listings{}, &listings{}
			first.set(inPhase("a", ready), inPhase("b", ready))
			second.set(inPhase("c", ready))
			if tc.secondFails {
				second.err = errors.New("upstream answered 401")
			}
			ledger := &savesLedger{Memory: NewMemory()}
			inv, err := New([]SourceSpec{spec("s1", first), spec("s2", second)}, Options{Registerer: prometheus.NewRegistry(), Ledger: ledger})
			require.NoError(t, err)
			require.True(t, inv.load(ctx))

			require.NoError(t, inv.refresh(ctx, inv.states[0]))
			assert.Empty(t, ledger.books, "saved before the second source tried its first listing")

			err = inv.refresh(ctx, inv.states[1])
			assert.Equal(t, tc.secondFails, err != nil)
			require.Len(t, ledger.books, 1, "one save once both tried")
			got := ledger.books[0]
			assert.Len(t, got.Clusters, tc.wantClusters)
			for _, r := range got.Clusters {
				assert.Equal(t, tc.wantEstablshed, !r.Established.IsZero(), "%s established", r.ID)
			}

			first.set(inPhase("a", ready))
			require.NoError(t, inv.refresh(ctx, inv.states[0]))
			assert.Len(t, ledger.books, 2, "a listing after the first round is saved")
		})
	}
}
