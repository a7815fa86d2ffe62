package azure_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
)

const (
	sub   = "0b1f6471-1bf0-4dda-aec3-000000000001"
	token = "fake_token" // what azfake.TokenCredential hands out
)

func newARM(t *testing.T) (*fakeazure.ARM, *arm.ClientOptions) {
	t.Helper()
	a, err := fakeazure.NewARM("../../../testdata/fixtures/aks", false)
	require.NoError(t, err)
	t.Cleanup(a.Close)
	opts := a.ClientOptions()
	opts.Retry = policy.RetryOptions{MaxRetries: 2, RetryDelay: 1, MaxRetryDelay: 1}
	return a, opts
}

// list drains the managed clusters of sub through the SDK's pager.
func list(t *testing.T, opts *arm.ClientOptions, sub string) ([]string, error) {
	t.Helper()
	client, err := armcontainerservice.NewManagedClustersClient(sub, &azfake.TokenCredential{}, opts)
	require.NoError(t, err)
	var names []string
	for p := client.NewListPager(nil); p.More(); {
		page, err := p.NextPage(context.Background())
		if err != nil {
			return names, err
		}
		for _, mc := range page.Value {
			names = append(names, *mc.Name+" "+string(*mc.Properties.PowerState.Code)+" "+*mc.Properties.ProvisioningState)
		}
	}
	return names, nil
}

// TestTheSDKReadsTheModel: the SDK's pagers drain the model's pages and
// read each cluster's states; the subscription list has the model's
// states; the user credentials name the cluster's server and the CA set.
func TestTheSDKReadsTheModel(t *testing.T) {
	a, opts := newARM(t)
	a.RequireToken(token)
	a.SetPageSize(2)
	a.SetSubscriptions([]string{sub}, map[string]string{sub: "Warned"})
	a.SetClusters(
		fakeazure.ManagedCluster{Sub: sub, RG: "rg", Name: "a", Provisioning: "Succeeded", PowerState: "Running"},
		fakeazure.ManagedCluster{Sub: sub, RG: "rg", Name: "b", Provisioning: "Upgrading", PowerState: "Running"},
		fakeazure.ManagedCluster{Sub: sub, RG: "rg", Name: "c", Provisioning: "Succeeded", PowerState: "Stopped"})

	names, err := list(t, opts, sub)
	require.NoError(t, err)
	assert.Equal(t, []string{"a Running Succeeded", "b Running Upgrading", "c Stopped Succeeded"}, names)

	subs, err := armsubscriptions.NewClient(&azfake.TokenCredential{}, opts)
	require.NoError(t, err)
	page, err := subs.NewListPager(nil).NextPage(context.Background())
	require.NoError(t, err)
	require.Len(t, page.Value, 1)
	assert.Equal(t, armsubscriptions.SubscriptionStateWarned, *page.Value[0].State)
	assert.Equal(t, 1, a.SubscriptionLists())

	a.SetCredentialCA([]byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"))
	client, err := armcontainerservice.NewManagedClustersClient(sub, &azfake.TokenCredential{}, opts)
	require.NoError(t, err)
	creds, err := client.ListClusterUserCredentials(context.Background(), "rg", "b", nil)
	require.NoError(t, err)
	kc := string(creds.Kubeconfigs[0].Value)
	assert.Contains(t, kc, "server: "+fakeazure.ManagedCluster{Name: "b"}.Server())
	assert.Contains(t, kc, base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")))
	_, err = client.ListClusterUserCredentials(context.Background(), "rg", "gone", nil)
	assert.Equal(t, "ResourceNotFound", errorCode(t, err))
	bad, _ := a.BadAuth()
	assert.Empty(t, bad)
}

// TestErrorsInARMShapes: what the SDK makes of the fake's errors is what
// it makes of ARM's: the error code of the body, retries on 429.
func TestErrorsInARMShapes(t *testing.T) {
	a, opts := newARM(t)

	_, err := list(t, opts, sub)
	assert.Equal(t, "SubscriptionNotFound", errorCode(t, err), "a subscription of neither the model nor the fixture")
	names, err := list(t, opts, fakeazure.FixtureSubscription)
	require.NoError(t, err)
	assert.Len(t, names, 3, "the fixture's two pages, the second empty")
	assert.Len(t, a.Seen(), 3, "the unknown subscription's list, then the fixture's two pages")

	a.Throttle(1)
	_, err = list(t, opts, fakeazure.FixtureSubscription)
	require.NoError(t, err, "one 429, retried")

	a.SetReadOnly(fakeazure.FixtureSubscription)
	client, err := armcontainerservice.NewManagedClustersClient(fakeazure.FixtureSubscription, &azfake.TokenCredential{}, opts)
	require.NoError(t, err)
	_, err = client.ListClusterUserCredentials(context.Background(), "rg-payments-prod", "aks-payments-prod-weu", nil)
	assert.Equal(t, "ReadOnlyDisabledSubscription", errorCode(t, err))

	a.RequireToken("another-token")
	_, err = list(t, opts, fakeazure.FixtureSubscription)
	assert.Equal(t, "InvalidAuthenticationToken", errorCode(t, err))
	bad, _ := a.BadAuth()
	assert.Len(t, bad, 1)
}

// TestManagedIdentity: the token endpoint answers as App Service's does,
// and only with its header.
func TestManagedIdentity(t *testing.T) {
	a, _ := newARM(t)
	a.RequireToken("arm-token")
	a.ManagedIdentity("the-header")
	get := func(header string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, a.URL()+"/msi/token?resource=https://management.azure.com/&api-version=2019-08-01", nil)
		require.NoError(t, err)
		req.Header.Set("X-Identity-Header", header)
		resp, err := a.Client().Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	assert.Equal(t, http.StatusOK, get("the-header").StatusCode)
	assert.Equal(t, http.StatusUnauthorized, get("wrong").StatusCode)
	bad, tokens := a.BadAuth()
	assert.Equal(t, 1, tokens)
	require.Len(t, bad, 1)
	assert.True(t, strings.HasPrefix(bad[0], "GET /msi/token"))
}

func errorCode(t *testing.T, err error) string {
	t.Helper()
	var re *azcore.ResponseError
	require.ErrorAs(t, err, &re)
	return re.ErrorCode
}
