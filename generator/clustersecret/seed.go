package clustersecret

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
)

// OwnedSelector is the label selector of the cluster Secrets that the
// installation ownerID owns.
func OwnedSelector(ownerID string) string {
	return LabelSecretType + "=cluster," + LabelManagedBy + "=" + ManagedByValue + "," + LabelOwner + "=" + ownerID
}

// ServedBefore returns what names the clusters of a source that the
// installation ownerID has Secrets for in namespace: their identities (the
// cluster-id annotation, else the cluster name, as Cluster.Key). It is the
// inventory's Options.Seed: a version without a ledger left nothing else.
// It reads the Secrets' metadata from the API at each call (only while the
// ledger holds no listing of the source) and never their data.
func ServedBefore(client kubeclient.Interface, namespace, ownerID string) func(ctx context.Context, source string) ([]string, error) {
	return func(ctx context.Context, source string) ([]string, error) {
		var ids []string
		opts := metav1.ListOptions{LabelSelector: OwnedSelector(ownerID) + "," + LabelSource + "=" + source, Limit: 500}
		for {
			list, err := client.CoreV1().Secrets(namespace).List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("list the cluster Secrets of source %s: %w", source, err)
			}
			for i := range list.Items {
				a := list.Items[i].Annotations
				if id := a[AnnotationClusterID]; id != "" {
					ids = append(ids, id)
				} else if name := a[AnnotationCluster]; name != "" {
					ids = append(ids, name)
				}
			}
			if opts.Continue = list.Continue; opts.Continue == "" {
				return ids, nil
			}
		}
	}
}
