package aks

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testca"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestCAIsCachedUntilTTL(t *testing.T) {
	current := pages{{managedCluster(subA, "rg", "alpha"), managedCluster(subA, "rg", "bravo")}}
	f := newFakeARM(t, func(string) pages { return current })
	env := newTestEnv(t, Config{Subscriptions: []string{subA}, CATTL: sources.D(time.Hour)}, f, nil)
	ctx := context.Background()

	_, err := env.src.Clusters(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, f.Calls("credentials"))

	f.resetCalls()
	env.now = env.now.Add(47 * time.Minute) // each CA lives 48-60 minutes
	cs, err := env.src.Clusters(ctx)
	require.NoError(t, err)
	assert.Zero(t, f.Calls("credentials"), "steady state reads no credential")
	assert.Equal(t, 1, f.Calls("list"))
	assert.Equal(t, base64.StdEncoding.EncodeToString(testCAPEM(t)), byName(cs, "bravo").CA.Data())
	assert.Equal(t, 2.0, testutil.ToFloat64(env.src.metrics.caCache.WithLabelValues("hit")))
	assert.Equal(t, 2.0, testutil.ToFloat64(env.src.metrics.caCache.WithLabelValues("miss")))

	f.resetCalls()
	env.now = env.now.Add(13 * time.Minute)
	_, err = env.src.Clusters(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, f.Calls("credentials"), "read again after the TTL")

	// A new cluster costs one read; a cluster that left is forgotten.
	current = pages{{managedCluster(subA, "rg", "alpha"), managedCluster(subA, "rg", "charlie")}}
	f.resetCalls()
	_, err = env.src.Clusters(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, f.Calls("credentials"))
	assert.Len(t, env.src.cas, 2)
	assertNoSecret(t, env, cs)
}

func TestCAForbiddenListsTheClusterNotReady(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha"), managedCluster(subA, "rg", "locked")}}}))
	forbid := true
	f.creds = func(sub, rg, name string) (resp azfake.Responder[armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse], errResp azfake.ErrorResponder) {
		if name == "locked" && forbid {
			errResp.SetResponseError(http.StatusForbidden, "AuthorizationFailed")
			return resp, errResp
		}
		resp.SetResponse(http.StatusOK, credentialsResponse(kubeconfig(name, testCAPEM(t))), nil)
		return resp, errResp
	}
	env := newTestEnv(t, Config{Subscriptions: []string{subA}, CAErrorTTL: sources.D(5 * time.Minute)}, f, nil)
	ctx := context.Background()

	cs, err := env.src.Clusters(ctx)
	require.NoError(t, err, "a CA that cannot be read does not fail the listing")
	require.Equal(t, []string{"alpha", "locked"}, names(cs))
	assert.True(t, byName(cs, "alpha").Ready)
	locked := byName(cs, "locked")
	assert.False(t, locked.Ready)
	assert.True(t, locked.CA.IsZero(), "never a Secret without CA")
	assert.Equal(t, "CA unavailable: listClusterUserCredential: HTTP 403 AuthorizationFailed", locked.NotReadyReason)
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.NotReady.WithLabelValues(notReadyCA)))
	assert.Zero(t, testutil.CollectAndCount(env.src.metrics.Errors), "no listing failed")
	// The SDK fakes return errors as transport errors, without a response:
	// classified by the *azcore.ResponseError they are.
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.APIRequests.WithLabelValues("managedClusters.listClusterUserCredential", "auth")))

	// The failure is remembered: no call until caErrorTTL has passed.
	f.resetCalls()
	env.now = env.now.Add(4 * time.Minute)
	cs, err = env.src.Clusters(ctx)
	require.NoError(t, err)
	assert.Zero(t, f.Calls("credentials"))
	assert.False(t, byName(cs, "locked").Ready)
	assert.Equal(t, 1.0, testutil.ToFloat64(env.src.metrics.caCache.WithLabelValues("negative")))

	// Once the permission is granted, the next read after caErrorTTL works.
	forbid = false
	f.resetCalls()
	env.now = env.now.Add(time.Minute)
	cs, err = env.src.Clusters(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, f.Calls("credentials"))
	assert.True(t, byName(cs, "locked").Ready)
	assert.Equal(t, 0.0, testutil.ToFloat64(env.src.metrics.NotReady.WithLabelValues(notReadyCA)))
}

func TestExpiredCAIsKeptWhenTheReadFails(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha")}}}))
	env := newTestEnv(t, explicit(subA), f, nil)
	ctx := context.Background()
	_, err := env.src.Clusters(ctx)
	require.NoError(t, err)

	f.creds = func(_, _, _ string) (resp azfake.Responder[armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse], errResp azfake.ErrorResponder) {
		errResp.SetResponseError(http.StatusInternalServerError, "InternalServerError")
		return resp, errResp
	}
	env.now = env.now.Add(2 * time.Hour)
	cs, err := env.src.Clusters(ctx)
	require.NoError(t, err)
	alpha := byName(cs, "alpha")
	assert.True(t, alpha.Ready, "a CA rotation is rare; flapping the cluster out would delete its Applications")
	assert.Equal(t, base64.StdEncoding.EncodeToString(testCAPEM(t)), alpha.CA.Data())
	assert.Contains(t, env.logs.String(), `"keptExpiredCA":true`)
}

func TestUnusableKubeconfigListsTheClusterNotReady(t *testing.T) {
	f := newFakeARM(t, staticPages(map[string]pages{subA: {{managedCluster(subA, "rg", "alpha")}}}))
	f.creds = func(_, _, _ string) (resp azfake.Responder[armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse], errResp azfake.ErrorResponder) {
		resp.SetResponse(http.StatusOK, credentialsResponse([]byte("token: "+secretToken+"\n\tnot: [yaml")), nil)
		return resp, errResp
	}
	env := newTestEnv(t, explicit(subA), f, nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.False(t, cs[0].Ready)
	assert.Equal(t, "CA unavailable: listClusterUserCredential: the kubeconfig does not parse", cs[0].NotReadyReason)
	assertNoSecret(t, env, cs)
}

func TestCAFromCredentials(t *testing.T) {
	ca := testCAPEM(t)
	caData := base64.StdEncoding.EncodeToString(ca)
	twoClusters := strings.Replace(string(kubeconfig("a", ca)), "clusters:\n", "clusters:\n- name: other\n  cluster:\n    server: https://other:443\n", 1)
	result := func(kcs ...[]byte) armcontainerservice.CredentialResults {
		var r armcontainerservice.CredentialResults
		for _, kc := range kcs {
			r.Kubeconfigs = append(r.Kubeconfigs, &armcontainerservice.CredentialResult{Name: to.Ptr("clusterUser"), Value: kc})
		}
		return r
	}
	var fromFixture armcontainerservice.CredentialResults
	require.NoError(t, fromFixture.UnmarshalJSON(fixture(t, "aks-list-cluster-user-credentials.json")))

	tests := []struct {
		name    string
		in      armcontainerservice.CredentialResults
		want    string
		wantErr string
	}{
		{"fixture (kubelogin user)", fromFixture, fixtureCAData(t), ""},
		{"token user", result(kubeconfig("a", ca)), caData, ""},
		{"current context picks the cluster", result([]byte(twoClusters)), caData, ""},
		{"first non-empty kubeconfig", result(nil, kubeconfig("a", ca)), caData, ""},
		{"no kubeconfig", result(), "", "the response holds no kubeconfig"},
		{"not yaml", result([]byte("\t" + secretToken + ": [")), "", "the kubeconfig does not parse"},
		{"no cluster", result([]byte("apiVersion: v1\nkind: Config\n")), "", "the kubeconfig names no cluster"},
		{"no ca", result([]byte(strings.Replace(string(kubeconfig("a", ca)), "certificate-authority-data", "certificate-authority", 1))), "", "no certificate-authority-data"},
		{"not a certificate", result(kubeconfig("a", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))), "", "certificate-authority-data: pem block 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := caFromCredentials(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), secretToken)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Data())
		})
	}
}

func TestCATTLSpreadsReads(t *testing.T) {
	seen := map[time.Duration]bool{}
	for i := range 100 {
		d := caTTL(time.Hour, fmt.Sprintf("/subscriptions/x/resourcegroups/rg/providers/microsoft.containerservice/managedclusters/c%d", i))
		assert.Greater(t, d, 48*time.Minute)
		assert.LessOrEqual(t, d, time.Hour)
		seen[d.Truncate(time.Minute)] = true
	}
	assert.Greater(t, len(seen), 8, "spread over the last fifth of the TTL")
	first := caTTL(time.Hour, "a")
	assert.Equal(t, first, caTTL(time.Hour, "a"), "fixed per cluster")
}

// TestCAReadAgainAfterAnOperationOrANewServer: within its TTL, a cached CA
// is read again once an operation on the cluster ends (it may have rotated
// the certificates; the cached CA serves meanwhile) and when the cluster's
// API server changes (deleted and created again under its id), and not
// otherwise.
func TestCAReadAgainAfterAnOperationOrANewServer(t *testing.T) {
	rotated, err := testca.SelfSignedPEM("aks-rotated-ca")
	require.NoError(t, err)
	state, fqdn := "Succeeded", "alpha-dns.hcp.westeurope.azmk8s.io"
	f := newFakeARM(t, func(string) pages {
		return pages{{managedCluster(subA, "rg", "alpha", func(mc *armcontainerservice.ManagedCluster) {
			mc.Properties.ProvisioningState, mc.Properties.Fqdn = to.Ptr(state), to.Ptr(fqdn)
		})}}
	})
	ca, fail := testCAPEM(t), false
	f.creds = func(_, _, name string) (resp azfake.Responder[armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse], errResp azfake.ErrorResponder) {
		if fail {
			errResp.SetResponseError(http.StatusForbidden, "AuthorizationFailed")
			return resp, errResp
		}
		resp.SetResponse(http.StatusOK, credentialsResponse(kubeconfig(name, ca)), nil)
		return resp, errResp
	}
	env := newTestEnv(t, Config{Subscriptions: []string{subA}, CATTL: sources.D(time.Hour), CAErrorTTL: sources.D(5 * time.Minute)}, f, nil)
	list := func(t *testing.T, wait time.Duration) (sources.Cluster, int) {
		t.Helper()
		f.resetCalls()
		env.now = env.now.Add(wait)
		cs, err := env.src.Clusters(context.Background())
		require.NoError(t, err)
		return byName(cs, "alpha"), f.Calls("credentials")
	}
	pem := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

	_, calls := list(t, 0)
	require.Equal(t, 1, calls)
	ca0 := ca
	for _, step := range []struct {
		name        string
		state, fqdn string
		ca          []byte        // what listClusterUserCredential answers from now on
		fail        bool          // it answers 403 instead
		notReady    bool          // the cluster is listed not ready (no CA)
		wait        time.Duration // since the last listing (default a minute, well within the TTL)
		calls       int
		want        []byte
	}{
		{name: "unchanged: the cache", state: "Succeeded", fqdn: fqdn, calls: 0, want: ca},
		{name: "an operation: the cached CA meanwhile", state: "Updating", fqdn: fqdn, ca: rotated, calls: 0, want: ca},
		{name: "still in one", state: "Upgrading", fqdn: fqdn, calls: 0, want: ca},
		{name: "the operation ended: read again", state: "Succeeded", fqdn: fqdn, calls: 1, want: rotated},
		{name: "then the cache again", state: "Succeeded", fqdn: fqdn, calls: 0, want: rotated},
		{name: "another API server: read again", state: "Succeeded", fqdn: "alpha-9f2c1e.hcp.westeurope.azmk8s.io", ca: ca, calls: 1, want: ca},
		{name: "the TTL runs out during an operation: read then", state: "Updating", fqdn: "alpha-9f2c1e.hcp.westeurope.azmk8s.io",
			wait: time.Hour, calls: 1, want: ca},
		{name: "and again once it ended", state: "Succeeded", fqdn: "alpha-9f2c1e.hcp.westeurope.azmk8s.io", ca: rotated, calls: 1, want: rotated},
		{name: "the TTL runs out during another operation and the read fails: the expired CA", state: "Updating",
			fqdn: "alpha-9f2c1e.hcp.westeurope.azmk8s.io", fail: true, wait: time.Hour, calls: 1, want: rotated},
		{name: "within the error TTL: no read", state: "Updating", fqdn: "alpha-9f2c1e.hcp.westeurope.azmk8s.io", fail: true,
			calls: 0, want: rotated},
		{name: "after it, still in the operation, the read succeeds", state: "Updating", fqdn: "alpha-9f2c1e.hcp.westeurope.azmk8s.io",
			ca: ca0, wait: 5 * time.Minute, calls: 1, want: ca0},
		{name: "read again once that operation ended", state: "Succeeded", fqdn: "alpha-9f2c1e.hcp.westeurope.azmk8s.io", ca: rotated,
			calls: 1, want: rotated},
		{name: "another API server and the read fails: not ready, never the other server's CA", state: "Succeeded",
			fqdn: "alpha-3b7d0a.hcp.westeurope.azmk8s.io", fail: true, calls: 1, notReady: true},
		{name: "within the error TTL: still not ready", state: "Succeeded", fqdn: "alpha-3b7d0a.hcp.westeurope.azmk8s.io", fail: true,
			calls: 0, notReady: true},
		{name: "another API server during an operation: read then", state: "Creating", fqdn: "alpha-5e9a44.hcp.westeurope.azmk8s.io",
			ca: ca0, wait: 5 * time.Minute, calls: 1, want: ca0},
	} {
		t.Run(step.name, func(t *testing.T) {
			state, fqdn, fail = step.state, step.fqdn, step.fail
			if step.ca != nil {
				ca = step.ca
			}
			got, calls := list(t, cmp.Or(step.wait, time.Minute))
			assert.Equal(t, step.calls, calls)
			assert.Equal(t, pem(step.want), got.CA.Data())
			assert.Equal(t, !step.notReady, got.Ready, got.NotReadyReason)
		})
	}
}
