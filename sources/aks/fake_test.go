package aks

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	csfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v3"
	rgfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v3/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	subfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions/fake"
	"github.com/stretchr/testify/require"

	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
)

// Two fakes of Azure Resource Manager: fakeARM serves the SDK's own fake
// server transports (typed answers, injected errors), armServer (the
// shared internal/fake/azure) serves the upstream-shaped fixtures of
// testdata/fixtures/aks over HTTP.

// fakeARM serves the SDK's own fake server transports: the subscriptions
// fake for GET /subscriptions and one managed clusters fake per
// subscription. It counts requests by operation.
type fakeARM struct {
	t    testing.TB
	subs subfake.Server
	// pages returns the list pages of a subscription (nil: a 404).
	pages func(sub string) [][]*armcontainerservice.ManagedCluster
	// pager, when set, replaces pages (to inject errors between pages).
	pager func(sub string) azfake.PagerResponder[armcontainerservice.ManagedClustersClientListResponse]
	// creds answers listClusterUserCredential; nil serves kubeconfig().
	creds func(sub, rg, name string) (azfake.Responder[armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse], azfake.ErrorResponder)

	// latency delays every answer, to measure concurrency.
	latency time.Duration

	mu         sync.Mutex
	transports map[string]*csfake.ManagedClustersServerTransport
	groupsTr   map[string]*rgfake.ResourceGroupsServerTransport
	subsTr     *subfake.ServerTransport
	calls      map[string]int
}

func newFakeARM(t testing.TB, pages func(sub string) [][]*armcontainerservice.ManagedCluster) *fakeARM {
	return &fakeARM{t: t, pages: pages, transports: map[string]*csfake.ManagedClustersServerTransport{},
		groupsTr: map[string]*rgfake.ResourceGroupsServerTransport{}, calls: map[string]int{}}
}

// staticPages serves the same pages on every listing.
func staticPages(bySub map[string][][]*armcontainerservice.ManagedCluster) func(string) [][]*armcontainerservice.ManagedCluster {
	return func(sub string) [][]*armcontainerservice.ManagedCluster { return bySub[sub] }
}

// withSubscriptions makes GET /subscriptions answer these (id → state).
func (f *fakeARM) withSubscriptions(states map[string]armsubscriptions.SubscriptionState) *fakeARM {
	f.subs.NewListPager = func(*armsubscriptions.ClientListOptions) (resp azfake.PagerResponder[armsubscriptions.ClientListResponse]) {
		var page armsubscriptions.ClientListResponse
		for _, id := range sortedKeys(states) {
			page.Value = append(page.Value, &armsubscriptions.Subscription{
				ID: to.Ptr("/subscriptions/" + id), SubscriptionID: to.Ptr(id), State: to.Ptr(states[id]),
			})
		}
		resp.AddPage(http.StatusOK, page, nil)
		return resp
	}
	return f
}

func (f *fakeARM) count(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
}

// Calls returns the requests seen for op: subscriptions, list or
// credentials.
func (f *fakeARM) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *fakeARM) totalCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

func (f *fakeARM) resetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.calls)
}

// Do routes a request by its path. The SDK fakes answer at once; they see
// a context that is never cancelled because their dispatcher can send on a
// closed channel when the request's context ends mid-call (v8.2.0
// dispatchToMethodFake). Cancellation is still checked first.
func (f *fakeARM) Do(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	req = req.WithContext(context.WithoutCancel(req.Context()))
	if f.latency > 0 {
		time.Sleep(f.latency)
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(parts) == 1 && parts[0] == "subscriptions" {
		f.count("subscriptions")
		f.mu.Lock()
		if f.subsTr == nil {
			f.subsTr = subfake.NewServerTransport(&f.subs)
		}
		tr := f.subsTr
		f.mu.Unlock()
		return tr.Do(req)
	}
	if len(parts) == 3 && strings.EqualFold(parts[2], "resourcegroups") {
		f.count("groups")
		return f.groups(strings.ToLower(parts[1])).Do(req)
	}
	if strings.HasSuffix(req.URL.Path, "/listClusterUserCredential") {
		f.count("credentials")
	} else {
		f.count("list")
	}
	return f.transport(strings.ToLower(parts[1])).Do(req)
}

func (f *fakeARM) transport(sub string) *csfake.ManagedClustersServerTransport {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tr, ok := f.transports[sub]; ok {
		return tr
	}
	srv := &csfake.ManagedClustersServer{
		NewListPager: func(*armcontainerservice.ManagedClustersClientListOptions) (resp azfake.PagerResponder[armcontainerservice.ManagedClustersClientListResponse]) {
			if f.pager != nil {
				return f.pager(sub)
			}
			pages := f.pages(sub)
			if pages == nil {
				resp.AddResponseError(http.StatusNotFound, "SubscriptionNotFound")
			}
			for _, p := range pages {
				resp.AddPage(http.StatusOK, listPage(p...), nil)
			}
			return resp
		},
		ListClusterUserCredentials: func(_ context.Context, rg, name string, _ *armcontainerservice.ManagedClustersClientListClusterUserCredentialsOptions) (resp azfake.Responder[armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse], errResp azfake.ErrorResponder) {
			if f.creds != nil {
				return f.creds(sub, rg, name)
			}
			resp.SetResponse(http.StatusOK, credentialsResponse(kubeconfig(name, testCAPEM(f.t))), nil)
			return resp, errResp
		},
	}
	tr := csfake.NewManagedClustersServerTransport(srv)
	f.transports[sub] = tr
	return tr
}

// groups serves the resource groups of sub: those of the clusters its
// pages list (none when a pager replaces them).
func (f *fakeARM) groups(sub string) *rgfake.ResourceGroupsServerTransport {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tr, ok := f.groupsTr[sub]; ok {
		return tr
	}
	srv := &rgfake.ResourceGroupsServer{
		NewListPager: func(*armresources.ResourceGroupsClientListOptions) (resp azfake.PagerResponder[armresources.ResourceGroupsClientListResponse]) {
			var page armresources.ResourceGroupsClientListResponse
			seen := map[string]bool{}
			if f.pager == nil {
				for _, p := range f.pages(sub) {
					for _, mc := range p {
						parts := strings.Split(strings.ToLower(*mc.ID), "/")
						if len(parts) > 4 && !seen[parts[4]] {
							seen[parts[4]] = true
							page.Value = append(page.Value, &armresources.ResourceGroup{Name: to.Ptr(parts[4]), Location: to.Ptr("westeurope")})
						}
					}
				}
			}
			resp.AddPage(http.StatusOK, page, nil)
			return resp
		},
	}
	tr := rgfake.NewResourceGroupsServerTransport(srv)
	f.groupsTr[sub] = tr
	return tr
}

func listPage(clusters ...*armcontainerservice.ManagedCluster) armcontainerservice.ManagedClustersClientListResponse {
	return armcontainerservice.ManagedClustersClientListResponse{
		ManagedClusterListResult: armcontainerservice.ManagedClusterListResult{Value: clusters},
	}
}

func credentialsResponse(kc []byte) armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse {
	return armcontainerservice.ManagedClustersClientListClusterUserCredentialsResponse{
		CredentialResults: armcontainerservice.CredentialResults{
			Kubeconfigs: []*armcontainerservice.CredentialResult{{Name: to.Ptr("clusterUser"), Value: kc}},
		},
	}
}

// armServer is the shared fake ARM (internal/fake/azure) over plain
// HTTP, serving the fixtures with nextLink rewritten to it.
type armServer struct{ *fakeazure.ARM }

func newARMServer(t testing.TB) *armServer {
	a, err := fakeazure.NewARM(filepath.Join("..", "..", "testdata", "fixtures", "aks"), false)
	require.NoError(t, err)
	t.Cleanup(a.Close)
	return &armServer{a}
}

// clientOptions are the fake's client options with fast retries.
func (a *armServer) clientOptions() *arm.ClientOptions {
	co := a.ClientOptions()
	co.Retry = fastRetry
	return co
}

// armCluster is the fixture's aks-payments-prod-weu cluster as ARM lists
// it, moved to sub/rg/name, with these states and, when fqdn is false,
// without an API server FQDN.
func armCluster(t testing.TB, sub, rg, name, provisioningState, powerState string, fqdn bool) map[string]any {
	t.Helper()
	var page struct{ Value []map[string]any }
	require.NoError(t, json.Unmarshal(fixture(t, "aks-managed-clusters-list.json"), &page))
	mc := page.Value[0]
	require.Equal(t, "aks-payments-prod-weu", mc["name"])
	mc["id"] = "/subscriptions/" + sub + "/resourcegroups/" + rg + "/providers/Microsoft.ContainerService/managedClusters/" + name
	mc["name"] = name
	props := mc["properties"].(map[string]any)
	props["provisioningState"] = provisioningState
	props["powerState"] = map[string]any{"code": powerState}
	props["fqdn"] = name + "-dns-5f3c1a9e.hcp.westeurope.azmk8s.io"
	if !fqdn {
		delete(props, "fqdn")
		delete(props, "azurePortalFQDN")
	}
	return mc
}

// listJSON is one list page holding these clusters.
func listJSON(t testing.TB, clusters ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"value": clusters})
	require.NoError(t, err)
	return string(b)
}

// subscriptionsJSON is the fixture's subscription list with these
// subscriptions (id → state) added, each a copy of the fixture's first.
func subscriptionsJSON(t testing.TB, extra map[string]string) string {
	t.Helper()
	var list struct {
		Value []map[string]any `json:"value"`
	}
	require.NoError(t, json.Unmarshal(fixture(t, "azure-subscriptions-list.json"), &list))
	for _, id := range sortedKeys(extra) {
		sub := maps.Clone(list.Value[0])
		sub["id"], sub["subscriptionId"], sub["displayName"], sub["state"] = "/subscriptions/"+id, id, "sub-"+extra[id], extra[id]
		list.Value = append(list.Value, sub)
	}
	b, err := json.Marshal(list)
	require.NoError(t, err)
	return string(b)
}

// fixtureCAData is certificate-authority-data of the decoded fixture.
func fixtureCAData(t testing.TB) string {
	m := regexp.MustCompile(`certificate-authority-data: (\S+)`).FindSubmatch(fixture(t, "aks-user-kubeconfig.decoded.yaml"))
	require.NotNil(t, m)
	return string(m[1])
}
