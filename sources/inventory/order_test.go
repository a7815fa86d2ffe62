package inventory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// gated is a source whose listings wait until the test lets one through:
// it orders the concurrent listings of RefreshAll.
type gated struct {
	*listings
	pass chan struct{}
}

func (g gated) Clusters(ctx context.Context) ([]sources.Cluster, error) {
	select {
	case <-g.pass:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.listings.Clusters(ctx)
}

// TestNewcomerNeverServedUnderAnEstablishedName: whichever source lists
// first, no snapshot ever serves a newcomer under a name an established
// cluster holds, not even the one published between the two listings of
// a refresh (the order is forced, so that one run shows it).
func TestNewcomerNeverServedUnderAnEstablishedName(t *testing.T) {
	for _, newcomerFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("newcomer's source lists first: %v", newcomerFirst), func(t *testing.T) {
			l1, l2 := &listings{}, &listings{}
			g1, g2 := gated{l1, make(chan struct{}, 1)}, gated{l2, make(chan struct{}, 1)}
			inv, err := New([]SourceSpec{spec("s1", g1), spec("s2", g2)}, Options{Registerer: prometheus.NewRegistry()})
			require.NoError(t, err)
			l1.set(inPhase("prod", sources.PhaseReady))
			g1.pass <- struct{}{}
			g2.pass <- struct{}{}
			require.NoError(t, inv.RefreshAll(context.Background()))
			require.Equal(t, "s1", inv.Snapshot().Clusters[0].Source)

			newcomer := inPhase("prod", sources.PhaseReady)
			newcomer.ID, newcomer.Server = "id-newcomer", "https://newcomer.example.com"
			l2.set(newcomer)
			listed, cancel := inv.SubscribeListings()
			defer cancel()
			var snaps []*Snapshot
			first, second := g2, g1
			if !newcomerFirst {
				first, second = g1, g2
			}
			done := make(chan error, 1)
			go func() { done <- inv.RefreshAll(context.Background()) }()
			first.pass <- struct{}{}
			select { // the first listing's snapshot, the other listing still waiting
			case <-listed:
				snaps = append(snaps, inv.Snapshot())
			case <-time.After(5 * time.Second):
				t.Fatal("no complete listing")
			}
			second.pass <- struct{}{}
			require.NoError(t, <-done)
			snaps = append(snaps, inv.Snapshot())
			for i, snap := range snaps {
				require.Len(t, snap.Clusters, 1, "snapshot %d", i)
				assert.Equal(t, "s1", snap.Clusters[0].Source, "snapshot %d: the established cluster keeps its name", i)
				assert.Equal(t, "https://prod.example.com", snap.Clusters[0].Server, "snapshot %d", i)
			}
		})
	}
}
