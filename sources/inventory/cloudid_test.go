package inventory

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestCloudIdentityOnceKnownIsKept: a cluster listed by a cluster manager
// (s1) and by its cloud's own source (s2) is served once, from the listing
// established first. When s1 lists it without its cloud identity (a
// credential it could not read), before and after a restart, it keeps the
// identity of its last rendering, and the label its source puts the
// account in: the cloud's listing stays a duplicate, never served as a
// second cluster, and a selector on that label keeps the cluster.
func TestCloudIdentityOnceKnownIsKept(t *testing.T) {
	ready := sources.PhaseReady
	manager, cloud := &listings{}, &listings{}
	p := newProcess(t, Departure{AfterListings: 3, GracePeriod: -1}, manager, cloud)
	cloudID := sources.AKSCloudID("0b1f6471-1bf0-4dda-aec3-cb9272f09590", "rg", "payments")
	const subLabel = "manager/aks-subscription"
	viaManager := inPhase("aks-payments", ready)
	viaManager.Server, viaManager.CloudID, viaManager.Account = "https://rancher.example.com/k8s/clusters/c-1", cloudID, "sub"
	viaManager.AccountLabel, viaManager.Labels = subLabel, map[string]string{"team": "payments", subLabel: "sub"}
	viaCloud := inPhase("payments", ready)
	viaCloud.CloudID, viaCloud.Account = cloudID, "sub"
	anonymous := viaManager
	anonymous.CloudID, anonymous.Account = "", ""
	anonymous.Labels = map[string]string{"team": "payments"}

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
			assert.Equal(t, map[string]string{"team": "payments", subLabel: "sub"}, snap.Clusters[0].Labels,
				"the label the account is in is kept with it: a selector on it keeps the cluster")
			assert.Empty(t, snap.Clusters[0].AccountLabel, "not part of a rendering: one decoded from the ledger has none")
		}
		assert.Equal(t, []Duplicate{{Name: "payments", Source: "s2", ID: "id-payments", KeptName: "aks-payments", KeptSource: "s1", Reason: "cloudID"}},
			snap.Duplicates)
	}
	t.Run("listed without its identity", func(t *testing.T) {
		manager.set(anonymous)
		check(t, p.list())
		check(t, p.list())
		assert.Equal(t, map[string]string{"team": "payments"}, anonymous.Labels, "the source's labels are not modified")
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
	const k = "sub-label"
	prev := &sources.Cluster{CloudID: "aks/sub-a/rg/x", Account: "sub-a", Labels: map[string]string{k: "sub-a"}}
	for _, tc := range []struct {
		name          string
		prev          *sources.Cluster
		cloud, acct   string
		label         string            // the cluster's AccountLabel
		labels        map[string]string // the cluster's labels
		wantC, wantAc string
		wantLabels    map[string]string
	}{
		{name: "none: the last one", prev: prev, wantC: "aks/sub-a/rg/x", wantAc: "sub-a"},
		{name: "the same account, no cloud id: the last one", prev: prev, acct: "SUB-A", wantC: "aks/sub-a/rg/x", wantAc: "sub-a"},
		{name: "another account: taken as it is", prev: prev, acct: "sub-b", wantAc: "sub-b"},
		{name: "another cloud id: taken", prev: prev, cloud: "aks/sub-a/rg/y", acct: "sub-a", wantC: "aks/sub-a/rg/y", wantAc: "sub-a"},
		{name: "no last rendering", wantC: "", wantAc: ""},
		{name: "the account's label, with the account", prev: prev, label: k, labels: map[string]string{"team": "t"},
			wantC: "aks/sub-a/rg/x", wantAc: "sub-a", wantLabels: map[string]string{"team": "t", k: "sub-a"}},
		{name: "the account's label, on a cluster without labels", prev: prev, label: k,
			wantC: "aks/sub-a/rg/x", wantAc: "sub-a", wantLabels: map[string]string{k: "sub-a"}},
		{name: "the account's label, when the last rendering had none (an older version)", label: k,
			prev:  &sources.Cluster{CloudID: "aks/sub-a/rg/x", Account: "sub-a"},
			wantC: "aks/sub-a/rg/x", wantAc: "sub-a", wantLabels: map[string]string{k: "sub-a"}},
		{name: "another account: no label added", prev: prev, label: k, acct: "sub-b", wantAc: "sub-b"},
		{name: "no label named: none added", prev: prev, labels: map[string]string{"team": "t"},
			wantC: "aks/sub-a/rg/x", wantAc: "sub-a", wantLabels: map[string]string{"team": "t"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			labels := maps.Clone(tc.labels)
			c := &sources.Cluster{CloudID: tc.cloud, Account: tc.acct, AccountLabel: tc.label, Labels: labels}
			keepCloudIdentity(c, tc.prev)
			assert.Equal(t, []string{tc.wantC, tc.wantAc}, []string{c.CloudID, c.Account})
			assert.Equal(t, tc.wantLabels, c.Labels)
			assert.Equal(t, tc.labels, labels, "the listing's own map is not modified")
		})
	}
}
