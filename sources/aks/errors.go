package aks

import "github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"

// The operations this source calls: the operation label of
// api_requests_total and errors_total, and upstream.Error.Operation. Their
// errors are classified and told in one line by sources/azurearm.
const (
	opSubscriptions = azurearm.OpSubscriptions
	opClusters      = "managedClusters.list"
	opCredentials   = "managedClusters.listClusterUserCredential"
)
