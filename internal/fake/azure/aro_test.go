package azure_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redhatopenshift/armredhatopenshift"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
)

func newAROARM(t *testing.T) (*fakeazure.ARM, *arm.ClientOptions) {
	t.Helper()
	a, opts := newARM(t)
	require.NoError(t, a.ServeARO("../../../testdata/fixtures/aro"))
	return a, opts
}

func aroClient(t *testing.T, opts *arm.ClientOptions, sub string) *armredhatopenshift.OpenShiftClustersClient {
	t.Helper()
	client, err := armredhatopenshift.NewOpenShiftClustersClient(sub, &azfake.TokenCredential{}, opts)
	require.NoError(t, err)
	return client
}

// listARO drains the OpenShift clusters of sub through the SDK's pager and
// returns them with the number of pages.
func listARO(t *testing.T, opts *arm.ClientOptions, sub string) ([]*armredhatopenshift.OpenShiftCluster, int, error) {
	t.Helper()
	var out []*armredhatopenshift.OpenShiftCluster
	pages := 0
	for p := aroClient(t, opts, sub).NewListPager(nil); p.More(); {
		page, err := p.NextPage(context.Background())
		if err != nil {
			return out, pages, err
		}
		pages++
		out = append(out, page.Value...)
	}
	return out, pages, nil
}

// TestTheSDKReadsTheAROFixture: the fixture's two pages, through the
// rewritten nextLink and its $skipToken, decode into the SDK's model with
// the values of the spec example's shape; the secrets the resource provider
// blanks are absent.
func TestTheSDKReadsTheAROFixture(t *testing.T) {
	a, opts := newAROARM(t)
	cs, pages, err := listARO(t, opts, fakeazure.FixtureSubscription)
	require.NoError(t, err)
	assert.Equal(t, 2, pages)
	require.Len(t, cs, 4)
	var names, states []string
	for _, c := range cs {
		names = append(names, *c.Name)
		states = append(states, string(*c.Properties.ProvisioningState))
		assert.Equal(t, "Microsoft.RedHatOpenShift/OpenShiftClusters", *c.Type)
		assert.Nil(t, c.Properties.ClusterProfile.PullSecret, "blanked by the resource provider, absent on the wire")
		assert.Nil(t, c.Properties.ServicePrincipalProfile.ClientSecret)
	}
	assert.Equal(t, []string{"aro-payments-prod", "aro_Shared.(weu)", "aro-data-new", "aro-legacy-neu"}, names)
	assert.Equal(t, []string{"Succeeded", "Updating", "Creating", "Deleting"}, states)

	prod := cs[0].Properties
	assert.Equal(t, "https://api.p7k2m9xq.westeurope.aroapp.io:6443/", *prod.ApiserverProfile.URL)
	assert.Equal(t, armredhatopenshift.VisibilityPublic, *prod.ApiserverProfile.Visibility)
	assert.Equal(t, "4.15.27", *prod.ClusterProfile.Version)
	assert.Equal(t, "p7k2m9xq.westeurope.aroapp.io", *prod.ClusterProfile.Domain)
	assert.Equal(t, "/subscriptions/"+fakeazure.FixtureSubscription+"/resourceGroups/aro-p7k2m9xq", *prod.ClusterProfile.ResourceGroupID)
	assert.Equal(t, "https://console-openshift-console.apps.p7k2m9xq.westeurope.aroapp.io/", *prod.ConsoleProfile.URL)
	require.Len(t, prod.IngressProfiles, 1)
	assert.Equal(t, "default", *prod.IngressProfiles[0].Name)
	assert.Equal(t, "prod", *cs[0].Tags["env"])
	shared := cs[1].Properties
	assert.Equal(t, armredhatopenshift.VisibilityPrivate, *shared.ApiserverProfile.Visibility)
	assert.Equal(t, "https://api.ocp.contoso.com:6443/", *shared.ApiserverProfile.URL)
	assert.Nil(t, cs[2].Properties.ApiserverProfile.URL, "a cluster being created has no API URL yet")

	seen := a.Seen()
	require.Len(t, seen, 2)
	assert.Equal(t, "GET /subscriptions/"+fakeazure.FixtureSubscription+"/providers/Microsoft.RedHatOpenShift/openShiftClusters?api-version=2023-11-22", seen[0])
	assert.Contains(t, seen[1], "%24skipToken=", "page 2 through the fixture's nextLink, followed verbatim")
	assert.Equal(t, 2, a.AROLists())
}

// TestTheSDKDrainsTheAROModel: the model pages at 10 as the resource
// provider does, with an opaque $skipToken, in every provisioningState,
// custom and managed domains, Private visibility and tags.
func TestTheSDKDrainsTheAROModel(t *testing.T) {
	a, opts := newAROARM(t)
	a.RequireToken(token)
	states := []string{"Creating", "Succeeded", "Updating", "AdminUpdating", "Canceled", "Failed", "Deleting", "Maintenance"}
	var want []fakeazure.OpenShiftCluster
	for i := range 23 {
		c := fakeazure.OpenShiftCluster{Sub: sub, RG: "rg-" + fmt.Sprint(i%3), Name: fmt.Sprintf("aro-%02d", i), Provisioning: states[i%len(states)]}
		switch i {
		case 1:
			c.Domain, c.Private = "ocp.example.com", true
		case 2:
			c.Tags = map[string]string{"tenant": "acme"}
		case 3:
			c.NoURL = true
		}
		want = append(want, c)
	}
	a.SetOpenShiftClusters(want...)
	cs, pages, err := listARO(t, opts, sub)
	require.NoError(t, err)
	assert.Equal(t, 3, pages, "10, 10 and 3")
	require.Len(t, cs, len(want))
	for i, c := range cs {
		w := want[i]
		assert.Equal(t, w.ID(), *c.ID)
		assert.Equal(t, w.Provisioning, string(*c.Properties.ProvisioningState))
		if w.NoURL {
			assert.Nil(t, c.Properties.ApiserverProfile.URL)
			continue
		}
		assert.Equal(t, w.APIURL(), *c.Properties.ApiserverProfile.URL)
		assert.True(t, strings.HasSuffix(*c.Properties.ApiserverProfile.URL, ":6443/"))
	}
	assert.Equal(t, "ocp.example.com", *cs[1].Properties.ClusterProfile.Domain)
	assert.Equal(t, armredhatopenshift.VisibilityPrivate, *cs[1].Properties.ApiserverProfile.Visibility)
	assert.True(t, strings.HasSuffix(*cs[0].Properties.ClusterProfile.Domain, ".westeurope.aroapp.io"), "a managed domain")
	assert.Equal(t, map[string]*string{"tenant": ptr("acme")}, cs[2].Tags)

	seen := a.Seen()
	require.Len(t, seen, 3)
	for _, s := range seen[1:] {
		u, err := url.Parse(strings.TrimPrefix(s, "GET "))
		require.NoError(t, err)
		tok := u.Query().Get("$skipToken")
		assert.NotEmpty(t, tok)
		_, err = strconv.Atoi(tok)
		assert.Error(t, err, "the token is opaque, not an offset")
		assert.Equal(t, "2023-11-22", u.Query().Get("api-version"))
	}
	bad, _ := a.BadAuth()
	assert.Empty(t, bad)

	a.RemoveOpenShiftClusters(sub, "ARO-00")
	cs, _, err = listARO(t, opts, sub)
	require.NoError(t, err)
	assert.Len(t, cs, len(want)-1, "names compare case-insensitively")
}

// TestAROSubscriptions: a subscription of the subscription model (here
// Disabled: GETs still work) without ARO clusters lists none; one neither
// modelled nor in the fixtures is not found.
func TestAROSubscriptions(t *testing.T) {
	const other = "0b1f6471-1bf0-4dda-aec3-000000000002"
	a, opts := newAROARM(t)
	a.SetSubscriptions([]string{sub}, map[string]string{sub: "Disabled"})
	cs, pages, err := listARO(t, opts, sub)
	require.NoError(t, err)
	assert.Empty(t, cs)
	assert.Equal(t, 1, pages)
	_, _, err = listARO(t, opts, other)
	assert.Equal(t, "SubscriptionNotFound", errorCode(t, err))
}

// TestAROErrorsInARMShapes: what the SDK makes of the fake's faults is
// what it makes of ARM's: the error code of the body, a retried 429 and
// 5xx, a wrong api-version refused.
func TestAROErrorsInARMShapes(t *testing.T) {
	a, opts := newAROARM(t)
	a.SetOpenShiftClusters(fakeazure.OpenShiftCluster{Sub: sub, RG: "rg", Name: "a", Provisioning: "Succeeded"})

	a.FailARO(sub, http.StatusForbidden, "AuthorizationFailed", "The client 'x' does not have authorization to perform action 'Microsoft.RedHatOpenShift/openShiftClusters/read'.", 1)
	_, _, err := listARO(t, opts, sub)
	assert.Equal(t, "AuthorizationFailed", errorCode(t, err))
	assert.Len(t, a.Seen(), 1, "a 403 is not retried")

	a.FailARO(sub, http.StatusTooManyRequests, "TooManyRequests", "Rate limit exceeded.", 1)
	cs, _, err := listARO(t, opts, sub)
	require.NoError(t, err, "one 429, retried after Retry-After")
	assert.Len(t, cs, 1)
	assert.Len(t, a.Seen(), 3, "the 429 and its retry")

	a.FailARO("", http.StatusServiceUnavailable, "ServiceUnavailable", "The service is unavailable.", -1)
	_, _, err = listARO(t, opts, sub)
	assert.Equal(t, "ServiceUnavailable", errorCode(t, err), "beyond the retries")

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, a.URL()+"/subscriptions/"+sub+"/providers/Microsoft.RedHatOpenShift/openShiftClusters?api-version=2020-04-30", nil)
	require.NoError(t, err)
	resp, err := a.Client().Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestAROCredentialActionsAreRefusedAndRecorded: listCredentials and
// listAdminCredentials hand out admin material; the fake refuses them and
// records every call, for tests to fail on.
func TestAROCredentialActionsAreRefusedAndRecorded(t *testing.T) {
	a, opts := newAROARM(t)
	client := aroClient(t, opts, sub)
	_, err := client.ListCredentials(context.Background(), "rg", "a", nil)
	assert.Equal(t, "AuthorizationFailed", errorCode(t, err))
	_, err = client.ListAdminCredentials(context.Background(), "rg", "a", nil)
	assert.Equal(t, "AuthorizationFailed", errorCode(t, err))
	assert.Equal(t, []string{
		"POST /subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/a/listCredentials",
		"POST /subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters/a/listAdminCredentials",
	}, a.AROCredentialCalls())
}

func ptr[T any](v T) *T { return &v }
