package aks

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// armClient is the part of Azure Resource Manager the source calls: the
// subscription list, one paged cluster list per subscription and
// listClusterUserCredential. Every call is a read.
type armClient struct {
	*azurearm.Client
	clusters *azurearm.Clients[armcontainerservice.ManagedClustersClient]
}

// newARMClient builds the clients; it makes no call to Azure.
func newARMClient(cfg *Config, h azurearm.Hooks, m *upstream.Metrics) (*armClient, error) {
	c, err := azurearm.NewClient(cfg.identity(), len(cfg.Subscriptions) == 0, h, azurearm.NewCountingPolicy(m, map[string]string{
		"ManagedClustersClient.NewListPager":               opClusters,
		"ManagedClustersClient.ListClusterUserCredentials": opCredentials,
	}))
	if err != nil {
		return nil, err
	}
	return &armClient{Client: c, clusters: azurearm.NewClients(c, armcontainerservice.NewManagedClustersClient)}, nil
}

// identity is the section's identity keys: how the client reaches ARM,
// and what Validate checks first.
func (c *Config) identity() azurearm.Identity {
	return azurearm.Identity{TenantID: c.TenantID, ClientID: c.ClientID, Cloud: c.Cloud, ARMEndpoint: c.ARMEndpoint}
}

// listClusters calls each on every managed cluster of subscription sub.
// A failure is an *upstream.Error of managedClusters.list.
func (c *armClient) listClusters(ctx context.Context, sub string, each func(*armcontainerservice.ManagedCluster) error) error {
	return azurearm.List(ctx, opClusters, c.clusters, sub,
		func(mc *armcontainerservice.ManagedClustersClient) *runtime.Pager[armcontainerservice.ManagedClustersClientListResponse] {
			return mc.NewListPager(nil)
		},
		func(p armcontainerservice.ManagedClustersClientListResponse) ([]*armcontainerservice.ManagedCluster, *string) {
			return p.Value, p.NextLink
		},
		each)
}

// readCA reads a cluster's CA with listClusterUserCredential. The error
// is one line, for the cluster's not-ready reason.
func (c *armClient) readCA(ctx context.Context, sub, rg, name string) (sources.CA, error) {
	client, err := c.clusters.Get(sub)
	if err != nil {
		return sources.CA{}, err
	}
	resp, err := client.ListClusterUserCredentials(ctx, rg, name, nil)
	if err != nil {
		return sources.CA{}, fmt.Errorf("listClusterUserCredential: %s", azurearm.Describe(err))
	}
	ca, err := caFromCredentials(resp.CredentialResults)
	if err != nil {
		return sources.CA{}, fmt.Errorf("listClusterUserCredential: %w", err)
	}
	return ca, nil
}

// caFromCredentials returns the CA of the user kubeconfig returned by
// listClusterUserCredential. The SDK has already decoded the kubeconfig
// from base64. The kubeconfig may hold credentials (for clusters with
// local accounts): it is parsed here and dropped, and no error quotes it.
func caFromCredentials(res armcontainerservice.CredentialResults) (sources.CA, error) {
	var raw []byte
	for _, kc := range res.Kubeconfigs {
		if kc != nil && len(kc.Value) > 0 {
			raw = kc.Value
			break
		}
	}
	if raw == nil {
		return sources.CA{}, errors.New("the response holds no kubeconfig")
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		// The parser's message may quote the input; leave it out.
		return sources.CA{}, errors.New("the kubeconfig does not parse")
	}
	clusterName := ""
	if ctx, ok := cfg.Contexts[cfg.CurrentContext]; ok && ctx != nil {
		clusterName = ctx.Cluster
	} else if len(cfg.Clusters) == 1 {
		for name := range cfg.Clusters {
			clusterName = name
		}
	}
	cluster, ok := cfg.Clusters[clusterName]
	if !ok || cluster == nil {
		return sources.CA{}, errors.New("the kubeconfig names no cluster")
	}
	if len(cluster.CertificateAuthorityData) == 0 {
		return sources.CA{}, errors.New("the kubeconfig has no certificate-authority-data")
	}
	ca, err := sources.ParsePEMCA(cluster.CertificateAuthorityData)
	if err != nil {
		return sources.CA{}, fmt.Errorf("certificate-authority-data: %w", err)
	}
	return ca, nil
}
