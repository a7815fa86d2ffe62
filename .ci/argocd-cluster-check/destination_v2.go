//go:build argocdv2

// Built only for Argo CD 2.x (.ci/testbin rewrites the imports to
// github.com/argoproj/argo-cd/v2 and sets the tag argocdv2): 2.x has no
// util/argo.GetDestinationCluster.

package main

import (
	"context"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/argo"
	"github.com/argoproj/argo-cd/v3/util/db"
)

// destinationCluster resolves an Application's destination name as Argo CD
// 2.x's controllers do: util/argo's ValidateDestination infers the server
// from the name (db.GetClusterServersByName, exactly one server), then
// db.GetCluster reads that server's cluster.
func destinationCluster(ctx context.Context, name string, argoDB db.ArgoDB) (*v1alpha1.Cluster, error) {
	dest := v1alpha1.ApplicationDestination{Name: name}
	if err := argo.ValidateDestination(ctx, &dest, argoDB); err != nil {
		return nil, err
	}
	return argoDB.GetCluster(ctx, dest.Server)
}
