package inventory

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestSavedBookSaysWhoIsContested: the book the leader saves says, of
// each served cluster that another contests, how the answer has it (the
// ClusterProfile's Served and Conflict conditions show it): the holder of
// a name keeps it, a newcomer under a name Argo CD normalizes alike is not
// served, a second listing of one cluster is a duplicate. A cluster
// nobody contests has none, and the ledger keeps none of it.
func TestSavedBookSaysWhoIsContested(t *testing.T) {
	ctx := context.Background()
	ready := sources.PhaseReady
	s1, s2, s3 := &listings{}, &listings{}, &listings{}
	ledger := &savesLedger{Memory: NewMemory()}
	inv, err := New([]SourceSpec{spec("s1", s1), spec("s2", s2), spec("s3", s3)},
		Options{Registerer: prometheus.NewRegistry(), Ledger: ledger})
	require.NoError(t, err)
	require.True(t, inv.load(ctx))
	s1.set(inPhase("prod", ready), inPhase("solo", ready))
	s2.set()
	s3.set()
	require.NoError(t, inv.RefreshAll(ctx))

	newcomer := inPhase("Prod", ready)
	newcomer.ID, newcomer.Server = "id-newcomer", "https://newcomer.example.com/"
	again := inPhase("solo-again", ready) // solo, listed again by another source
	again.Server = "https://solo.example.com/"
	sameName := inPhase("solo-again", ready) // one source may list a name twice
	sameName.ID, sameName.Server = "id-solo-again-2", "https://solo-again-2.example.com/"
	s2.set(newcomer)
	s3.set(again, sameName)
	require.NoError(t, inv.RefreshAll(ctx))

	ledger.mu.Lock()
	saved := ledger.books[len(ledger.books)-1]
	ledger.mu.Unlock()
	got := map[string]*Contest{}
	for _, r := range saved.Clusters {
		got[r.Source+"/"+r.ID] = r.Contest
	}
	conflict := &Conflict{Name: "prod", Names: []string{"Prod"}, Sources: []string{"s1", "s2"}, KeptSource: "s1"}
	assert.Equal(t, map[string]*Contest{
		"s1/id-prod":         {Answered: true, Conflict: conflict},
		"s2/id-newcomer":     {Conflict: conflict},
		"s1/id-solo":         nil,
		"s3/id-solo-again":   {Duplicate: &Duplicate{Name: "solo-again", Source: "s3", ID: "id-solo-again", KeptName: "solo", KeptSource: "s1", Reason: "server"}},
		"s3/id-solo-again-2": nil, // the same name, listed again by the same source: not the duplicate
	}, got)

	loaded, err := ledger.Load(ctx)
	require.NoError(t, err)
	require.Len(t, loaded.Clusters, 5)
	for _, r := range loaded.Clusters {
		assert.Nil(t, r.Contest, "%s/%s: derived from the snapshot, never kept", r.Source, r.ID)
	}
}
