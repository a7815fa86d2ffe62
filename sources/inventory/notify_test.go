package inventory

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestUnchangedListingKeepsVersion(t *testing.T) {
	src := &scripted{steps: []step{{clusters: []sources.Cluster{cluster("a")}}}}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{})
	require.NoError(t, err)
	ch, cancel := inv.Subscribe()
	defer cancel()
	require.NoError(t, inv.RefreshAll(context.Background()))
	require.Len(t, ch, 1, "first listing notifies")
	<-ch
	require.NoError(t, inv.RefreshAll(context.Background()))
	assert.Equal(t, uint64(1), inv.Snapshot().Version, "same content, same version (the response cache stays warm)")
	assert.Empty(t, ch, "no notification without a change")
}

func TestSubscribeListingsHearsUnchangedListings(t *testing.T) {
	src := &scripted{steps: []step{{clusters: []sources.Cluster{cluster("a")}}, {clusters: []sources.Cluster{cluster("a")}}, {err: errors.New("down")}}}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{})
	require.NoError(t, err)
	changes, c1 := inv.Subscribe()
	defer c1()
	listings, c2 := inv.SubscribeListings()
	defer c2()
	require.NoError(t, inv.RefreshAll(context.Background()))
	require.Len(t, changes, 1)
	require.Len(t, listings, 1)
	<-changes
	<-listings
	require.NoError(t, inv.RefreshAll(context.Background())) // same content
	assert.Empty(t, changes, "no change, no notification")
	assert.Len(t, listings, 1, "but one more complete listing")
	<-listings
	require.Error(t, inv.RefreshAll(context.Background())) // fails: now stale, a change
	assert.Len(t, changes, 1)
}
