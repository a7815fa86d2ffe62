package aro

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redhatopenshift/armredhatopenshift"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// armClient is the part of Azure Resource Manager the source calls: the
// subscription list and one paged OpenShift cluster list per
// subscription. Every call is a GET: the credential actions
// (listCredentials, listAdminCredentials) hand out admin material and are
// never called.
type armClient struct {
	*azurearm.Client
	clusters *azurearm.Clients[armredhatopenshift.OpenShiftClustersClient]
}

// newARMClient builds the clients; it makes no call to Azure.
func newARMClient(cfg *Config, h azurearm.Hooks, m *upstream.Metrics) (*armClient, error) {
	c, err := azurearm.NewClient(cfg.identity(), len(cfg.Subscriptions) == 0, h, azurearm.NewCountingPolicy(m, map[string]string{
		"OpenShiftClustersClient.NewListPager": opClusters,
	}))
	if err != nil {
		return nil, err
	}
	return &armClient{Client: c, clusters: azurearm.NewClients(c, armredhatopenshift.NewOpenShiftClustersClient)}, nil
}

// identity is the section's identity keys: how the client reaches ARM,
// and what Validate checks first.
func (c *Config) identity() azurearm.Identity {
	return azurearm.Identity{TenantID: c.TenantID, ClientID: c.ClientID, Cloud: c.Cloud, ARMEndpoint: c.ARMEndpoint}
}

// listClusters calls each on every OpenShift cluster of subscription sub,
// draining the pager to its last page (the resource provider pages at 10).
// A failure is an *upstream.Error of openShiftClusters.list.
func (c *armClient) listClusters(ctx context.Context, sub string, each func(*armredhatopenshift.OpenShiftCluster) error) error {
	return azurearm.List(ctx, opClusters, c.clusters, sub,
		func(oc *armredhatopenshift.OpenShiftClustersClient) *runtime.Pager[armredhatopenshift.OpenShiftClustersClientListResponse] {
			return oc.NewListPager(nil)
		},
		func(p armredhatopenshift.OpenShiftClustersClientListResponse) ([]*armredhatopenshift.OpenShiftCluster, *string) {
			return p.Value, p.NextLink
		},
		each)
}
