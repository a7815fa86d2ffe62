//go:build !argocdv2

package main

import (
	"context"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/argo"
	"github.com/argoproj/argo-cd/v3/util/db"
)

// destinationCluster resolves an Application's destination name as Argo CD
// 3.x's controllers do: util/argo's GetDestinationCluster
// (db.GetClusterServersByName, exactly one server, then db.GetCluster).
func destinationCluster(ctx context.Context, name string, argoDB db.ArgoDB) (*v1alpha1.Cluster, error) {
	return argo.GetDestinationCluster(ctx, v1alpha1.ApplicationDestination{Name: name}, argoDB)
}
