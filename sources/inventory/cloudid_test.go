package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestCloudIdentityOnceKnownIsKept: a cluster listed by a cluster manager
// (s1) and by its cloud's own source (s2) is served once, from the listing
// established first. When s1 lists it without its cloud identity (a
// credential it could not read), before and after a restart, it keeps the
// identity of its last rendering: the cloud's listing stays a duplicate,
// never served as a second cluster.
func TestCloudIdentityOnceKnownIsKept(t *testing.T) {
	ready := sources.PhaseReady
	manager, cloud := &listings{}, &listings{}
	p := newProcess(t, Departure{AfterListings: 3, GracePeriod: -1}, manager, cloud)
	cloudID := sources.AKSCloudID("0b1f6471-1bf0-4dda-aec3-cb9272f09590", "rg", "payments")
	viaManager := inPhase("aks-payments", ready)
	viaManager.Server, viaManager.CloudID, viaManager.Account = "https://rancher.example.com/k8s/clusters/c-1", cloudID, "sub"
	viaCloud := inPhase("payments", ready)
	viaCloud.CloudID, viaCloud.Account = cloudID, "sub"
	anonymous := viaManager
	anonymous.CloudID, anonymous.Account = "", ""

	manager.set(viaManager)
	p.list()
	cloud.set(viaCloud)
	snap := p.list()
	require.Equal(t, []string{"aks-payments"}, names(snap))
	require.Len(t, snap.Duplicates, 1)

	check := func(t *testing.T, snap *Snapshot) {
		t.Helper()
		assert.Equal(t, []string{"aks-payments"}, names(snap), "one cluster, never its cloud listing beside it")
		if assert.Len(t, snap.Clusters, 1) {
			assert.Equal(t, cloudID, snap.Clusters[0].CloudID)
			assert.Equal(t, "sub", snap.Clusters[0].Account)
		}
		assert.Equal(t, []Duplicate{{Name: "payments", Source: "s2", KeptName: "aks-payments", KeptSource: "s1", Reason: "cloudID"}},
			snap.Duplicates)
	}
	t.Run("listed without its identity", func(t *testing.T) {
		manager.set(anonymous)
		check(t, p.list())
		check(t, p.list())
	})
	t.Run("after a restart, still without it", func(t *testing.T) {
		p.restart()
		check(t, p.list())
	})
	t.Run("its identity back", func(t *testing.T) {
		manager.set(viaManager)
		check(t, p.list())
	})
	t.Run("another identity is taken", func(t *testing.T) {
		moved := viaManager
		moved.CloudID = sources.AKSCloudID("0b1f6471-1bf0-4dda-aec3-cb9272f09590", "rg", "other")
		manager.set(moved)
		snap := p.list()
		assert.Equal(t, []string{"aks-payments", "payments"}, names(snap), "two clusters now: the cloud's listing is no duplicate")
		assert.Equal(t, moved.CloudID, snap.Clusters[0].CloudID)
	})
}

// TestKeepCloudIdentity: the identity of the last rendering fills only a
// listing that has none, and not one that names another account.
func TestKeepCloudIdentity(t *testing.T) {
	prev := &sources.Cluster{CloudID: "aks/sub-a/rg/x", Account: "sub-a"}
	for _, tc := range []struct {
		name          string
		prev          *sources.Cluster
		cloud, acct   string
		wantC, wantAc string
	}{
		{name: "none: the last one", prev: prev, wantC: "aks/sub-a/rg/x", wantAc: "sub-a"},
		{name: "the same account, no cloud id: the last one", prev: prev, acct: "SUB-A", wantC: "aks/sub-a/rg/x", wantAc: "sub-a"},
		{name: "another account: taken as it is", prev: prev, acct: "sub-b", wantAc: "sub-b"},
		{name: "another cloud id: taken", prev: prev, cloud: "aks/sub-a/rg/y", acct: "sub-a", wantC: "aks/sub-a/rg/y", wantAc: "sub-a"},
		{name: "no last rendering", wantC: "", wantAc: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &sources.Cluster{CloudID: tc.cloud, Account: tc.acct}
			keepCloudIdentity(c, tc.prev)
			assert.Equal(t, []string{tc.wantC, tc.wantAc}, []string{c.CloudID, c.Account})
		})
	}
}
