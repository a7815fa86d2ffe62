package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestHeldDropIsWrittenOnce: while a held drop waits for an operator, its
// records stop changing once their count of missed listings reaches
// heldListings, so the ledger (written on change only) is not rewritten
// at every listing; an acknowledgement still confirms the departure at
// the next listing.
func TestHeldDropIsWrittenOnce(t *testing.T) {
	ledger := &savesLedger{Memory: NewMemory()}
	src := &listings{}
	var mu sync.Mutex
	acked := false
	rule := Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 0.25, HeldListings: 3}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{Departure: rule, Ledger: ledger, Registerer: prometheus.NewRegistry(),
		Acknowledged: func(string, string) bool { mu.Lock(); defer mu.Unlock(); return acked }})
	require.NoError(t, err)
	var all []sources.Cluster
	for i := range 8 {
		all = append(all, inPhase(fmt.Sprintf("c%d", i), sources.PhaseReady))
	}
	list := func() *Snapshot {
		require.NoError(t, inv.RefreshAll(context.Background()))
		return inv.Snapshot()
	}
	src.set(all...)
	list()
	src.set(all[:4]...) // half of them: a mass drop, held until acknowledged
	for range rule.HeldListings {
		list()
	}
	ledger.mu.Lock()
	written := len(ledger.books)
	held := ledger.books[written-1].Clusters
	ledger.mu.Unlock()
	missed := map[string]int{}
	for _, r := range held {
		if r.Held {
			missed[r.ID] = r.Missed
		}
	}
	assert.Equal(t, map[string]int{"id-c4": 3, "id-c5": 3, "id-c6": 3, "id-c7": 3}, missed, "counted up to heldListings")

	for i := range 5 {
		require.Len(t, list().Clusters, 8, "listing %d: still held", i+1)
	}
	ledger.mu.Lock()
	later := slices.Clone(ledger.books[written:])
	ledger.mu.Unlock()
	require.NotEmpty(t, later, "the book is saved after each listing")
	persisted := func(rs []Record) string { // what a ledger keeps of them
		b, err := json.Marshal(rs)
		require.NoError(t, err)
		return string(b)
	}
	for i, b := range later {
		assert.JSONEq(t, persisted(held), persisted(b.Clusters), "save %d after the count reached heldListings: nothing changed, nothing to write", i+1)
	}

	mu.Lock()
	acked = true
	mu.Unlock()
	assert.Equal(t, []string{"c0", "c1", "c2", "c3"}, names(list()), "acknowledged: confirmed at the next listing")
}
