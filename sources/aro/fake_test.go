package aro

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
)

// armServer is the shared fake ARM (internal/fake/azure) over plain HTTP,
// serving the ARO fixtures of testdata/fixtures/aro with nextLink
// rewritten to it, and the subscriptions of testdata/fixtures/aks. The
// real SDK talks to it. At the end of every test it checks that no
// credential action (listCredentials, listAdminCredentials) was called.
type armServer struct{ *fakeazure.ARM }

func newARMServer(t testing.TB) *armServer {
	t.Helper()
	a, err := fakeazure.NewARM(filepath.Join("..", "..", "testdata", "fixtures", "aks"), false)
	require.NoError(t, err)
	require.NoError(t, a.ServeARO(filepath.Join("..", "..", "testdata", "fixtures", "aro")))
	t.Cleanup(func() {
		assert.Empty(t, a.AROCredentialCalls(), "the source must never call listCredentials or listAdminCredentials")
		a.Close()
	})
	return &armServer{a}
}

// fastRetry keeps the SDK's retry policy but with tiny delays.
var fastRetry = policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: 10 * time.Millisecond}

// clientOptions are the fake's client options with fast retries.
func (a *armServer) clientOptions() *arm.ClientOptions {
	co := a.ClientOptions()
	co.Retry = fastRetry
	return co
}

// cluster is a ready-to-be cluster of the model: Succeeded, on a managed
// domain.
func cluster(sub, rg, name string) fakeazure.OpenShiftCluster {
	return fakeazure.OpenShiftCluster{Sub: sub, RG: rg, Name: name, Provisioning: "Succeeded"}
}

// boundAll binds one token Secret, named token-<name>, to each cluster.
func boundAll(cs ...fakeazure.OpenShiftCluster) tokenSecrets {
	t := tokenSecrets{}
	for _, c := range cs {
		t = t.bind(c.ID(), "token-"+c.Name)
	}
	return t
}
