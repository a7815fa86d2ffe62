package aro

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// TestLostResourceGroupIsAHeldDrop: a Reader role removed from a resource
// group takes its clusters out of the subscription's 200 (ARM lists what
// the identity can read), as a deletion would; the resource group list
// no longer names it either, so the inventory holds their departure.
// A cluster deleted in a resource group still visible departs as usual,
// and the hidden group's cluster is served again once the role is back.
func TestLostResourceGroupIsAHeldDrop(t *testing.T) {
	a := newARMServer(t)
	a.SetSubscriptions([]string{subA}, nil)
	all := []fakeazure.OpenShiftCluster{
		cluster(subA, "rg-apps", "a1"), cluster(subA, "rg-apps", "a2"), cluster(subA, "rg-apps", "a3"), cluster(subA, "rg-apps", "a4"),
		cluster(subA, "rg-data", "d1"),
	}
	a.SetOpenShiftClusters(all...)
	env, inv := listedOnce(t, a, all, 0)

	a.HideResourceGroups(subA, "RG-Data") // d1's group went out of sight
	a.RemoveOpenShiftClusters(subA, "a4") // a4 was deleted
	cs, accounts, err := env.src.ClustersAndAccounts(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"a1", "a2", "a3"}, names(cs))
	assert.Equal(t, []string{azurearm.Scope(subA, "rg-apps")}, accounts)
	for range 3 {
		require.NoError(t, inv.RefreshAll(t.Context()))
	}
	snap := inv.Snapshot()
	assert.Equal(t, []string{"a1", "a2", "a3", "d1"}, servedNames(snap), "d1 is held, a4 departed")
	st, ok := snap.Source("aro-prod")
	require.True(t, ok)
	assert.Equal(t, 1, st.HeldDepartures)

	a.ShowResourceGroups(subA, "rg-data")
	require.NoError(t, inv.RefreshAll(t.Context()))
	snap = inv.Snapshot()
	assert.Equal(t, []string{"a1", "a2", "a3", "d1"}, servedNames(snap))
	st, _ = snap.Source("aro-prod")
	assert.Zero(t, st.HeldDepartures, "listed again: nothing held")
}

// TestResourceGroupListErrors: a resource group list that fails fails
// the listing with its kind and operation, as a cluster list's failure
// does: the inventory keeps the last good listing.
func TestResourceGroupListErrors(t *testing.T) {
	a := newARMServer(t)
	a.SetSubscriptions([]string{subA}, nil)
	a.SetOpenShiftClusters(cluster(subA, "rg", "a1"))
	a.SetResourceGroupsAnswer(http.StatusForbidden, `{"error":{"code":"AuthorizationFailed","message":"The client 'x' does not have authorization to perform action 'Microsoft.Resources/subscriptions/resourceGroups/read'."}}`)
	env := newTestEnv(t, Config{}, a.clientOptions(), boundAll(cluster(subA, "rg", "a1")), nil)
	_, _, err := env.src.ClustersAndAccounts(t.Context())
	require.Error(t, err)
	assert.Equal(t, azurearm.OpResourceGroups, upstream.OperationOf(err))
	assert.Equal(t, upstream.KindAuth, upstream.KindOf(err))
	assert.Contains(t, err.Error(), "subscription "+subA+": list resource groups: ")
	assert.Contains(t, err.Error(), "AuthorizationFailed")
}

// listedOnce returns the source of the fake's clusters all, and an
// inventory of it (departures confirmed after one listing, a mass drop
// over half, held ones released after heldListings: 0 never) that has
// listed them once.
func listedOnce(t *testing.T, a *armServer, all []fakeazure.OpenShiftCluster, heldListings int) (*testEnv, *inventory.Inventory) {
	t.Helper()
	env := newTestEnv(t, Config{}, a.clientOptions(), boundAll(all...), nil)
	inv, err := inventory.New([]inventory.SourceSpec{{Name: "aro-prod", Provider: sources.ProviderARO, Kind: sources.KindCloud, Source: env.src,
		Interval: time.Hour, Timeout: 30 * time.Second}},
		inventory.Options{Departure: inventory.Departure{AfterListings: 1, GracePeriod: -1, MaxFraction: 0.5, HeldListings: heldListings}})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(t.Context()))
	require.Len(t, inv.Snapshot().Clusters, len(all))
	return env, inv
}
