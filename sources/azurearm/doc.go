// Package azurearm is the Azure Resource Manager plumbing shared by the
// Azure providers (sources/aks, sources/aro): the ARM client and its
// credential (workload identity, managed identity, the default chain),
// the cloud and the Resource Manager endpoint, the request counter and
// the classification of ARM errors into the kinds of sources/upstream,
// the subscriptions (configured or discovered, and their states), the
// tag filters, label tags and scope tags, and the configuration keys the
// providers have in common.
//
// It holds no provider's resources: each provider lists its own clusters
// (managed clusters, OpenShift clusters) with the pieces here, and keeps
// its own configuration section, metric prefix and operation names. No
// provider imports another; both import this package.
package azurearm
