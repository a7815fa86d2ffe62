package inventory

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestOneClusterIsServedOnce(t *testing.T) {
	withProvider := func(c sources.Cluster, cloudID string) sources.Cluster {
		c.CloudID = cloudID
		return c
	}
	// the same EKS cluster seen by Rancher (hosted, through its proxy) and by
	// the EKS source; and two static entries pointing at one server
	rancherEKS := withProvider(cluster("rancher-payments"), sources.EKSCloudID("111", "eu-west-1", "payments"))
	rancherEKS.Server = "https://rancher.example.com/k8s/clusters/c-7qgnz"
	eksPayments := withProvider(cluster("payments"), sources.EKSCloudID("111", "EU-WEST-1", "payments"))
	sameServerA, sameServerB := cluster("alias-a"), cluster("alias-b")
	sameServerB.Server = sameServerA.Server

	specs := func() []SourceSpec {
		r := spec("rancher", &scripted{steps: []step{{clusters: []sources.Cluster{rancherEKS}}}})
		r.Provider = sources.ProviderRancher
		e := spec("eks", &scripted{steps: []step{{clusters: []sources.Cluster{eksPayments}}}})
		e.Provider = sources.ProviderEKS
		s := spec("files", &scripted{steps: []step{{clusters: []sources.Cluster{sameServerA, sameServerB}}}})
		return []SourceSpec{r, e, s}
	}
	for _, tc := range []struct {
		prefer Preference
		served string
		dup    Duplicate
	}{
		{PreferCloud, "payments", Duplicate{Name: "rancher-payments", Source: "rancher", KeptName: "payments", KeptSource: "eks", Reason: "cloudID"}},
		{PreferRancher, "rancher-payments", Duplicate{Name: "payments", Source: "eks", KeptName: "rancher-payments", KeptSource: "rancher", Reason: "cloudID"}},
	} {
		t.Run(string(tc.prefer), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			inv, err := New(specs(), Options{Prefer: tc.prefer, Registerer: reg})
			require.NoError(t, err)
			require.NoError(t, inv.RefreshAll(context.Background()))
			snap := inv.Snapshot()
			assert.Equal(t, []string{"alias-a", tc.served}, names(snap))
			assert.Equal(t, []Duplicate{
				{Name: "alias-b", Source: "files", KeptName: "alias-a", KeptSource: "files", Reason: "server"},
				tc.dup,
			}, snap.Duplicates)
			assert.True(t, snap.Present(tc.dup.Name), "a duplicate is not gone")
			assert.True(t, snap.Present("alias-b"))
			assert.False(t, snap.Present("never-listed"))
			assert.Equal(t, 2.0, testutil.ToFloat64(inv.metrics.duplicates))
			assert.Len(t, inv.Status().Duplicates, 2)
		})
	}
	_, err := New(nil, Options{Prefer: "both"})
	assert.ErrorContains(t, err, "prefer")
}
