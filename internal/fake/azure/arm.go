// Package azure is a fake Azure Resource Manager for tests, in ARM's wire
// shapes: the subscription list, the AKS managed clusters of a
// subscription (paged by nextLink), listClusterUserCredential, the Azure
// Red Hat OpenShift clusters of a subscription (aro.go), and an App
// Service managed identity endpoint that hands out the ARM token. Answers
// are the upstream fixtures of testdata/fixtures/aks with a test's names
// and states. See README.md for what it models and what it does not.
package azure

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
)

// FixtureSubscription is the subscription of the fixture's cluster pages:
// without a model of its own it lists them.
const FixtureSubscription = "9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41"

// ManagedCluster is an AKS cluster as ARM lists it: the fixture's first
// cluster moved to Sub, RG and Name, in these states.
type ManagedCluster struct {
	Sub, RG, Name            string
	Provisioning, PowerState string
	// Tags replace the fixture's tags (nil: the fixture's).
	Tags map[string]string
	// NoFQDN drops the API server's FQDN (a private cluster's answer to a
	// reader without access to its private DNS zone).
	NoFQDN bool
	// Tenant is its Entra ID tenant (the fixture's when empty);
	// LegacyServerApp makes its Entra ID integration legacy, with that
	// server application.
	Tenant, LegacyServerApp string
}

// ID is the cluster's ARM resource id, as ARM spells it.
func (c ManagedCluster) ID() string {
	return "/subscriptions/" + c.Sub + "/resourcegroups/" + c.RG + "/providers/Microsoft.ContainerService/managedClusters/" + c.Name
}

// FQDN is the cluster's API server host name.
func (c ManagedCluster) FQDN() string { return c.Name + "-dns-5f3c1a9e.hcp.westeurope.azmk8s.io" }

// Server is the cluster's API server URL as the aks source renders it.
func (c ManagedCluster) Server() string { return "https://" + c.FQDN() + ":443" }

// ARM is the fake. Its state is changed through its methods, safe to call
// while it serves.
type ARM struct {
	srv *httptest.Server

	subsFixture, listFixture, list2Fixture, credFixture []byte
	clusterFixture, subFixture                          map[string]any

	mu sync.Mutex
	// model: subscriptions (lower-case id → state) and their clusters;
	// a subscription in neither falls back to the fixtures
	subs     map[string]string
	subOrder []string
	subsSet  bool // SetSubscriptions was called: the model lists them
	clusters map[string][]ManagedCluster
	pageSize int
	// overrides
	throttle   int
	listStatus int
	listBody   string
	lists      map[string]string
	subsBody   string
	credStatus int
	credBody   string
	credCA     []byte
	readOnly   map[string]bool
	// aro is the Azure Red Hat OpenShift model (aro.go)
	aro aroState
	// groups is the resource group model (groups.go)
	groups groupsState
	// auth
	token, miHeader string
	// what was asked
	requests, authz, badAuth []string
	subLists, tokenReqs      int
}

// NewARM starts a fake answering from the AKS fixtures in dir
// (testdata/fixtures/aks), over TLS when tls is true (the SDK refuses a
// bearer token over plain HTTP unless told otherwise: ClientOptions).
func NewARM(dir string, useTLS bool) (*ARM, error) {
	a := &ARM{subs: map[string]string{}, clusters: map[string][]ManagedCluster{}, lists: map[string]string{}, readOnly: map[string]bool{}}
	for _, f := range []struct {
		name string
		into *[]byte
	}{{"azure-subscriptions-list.json", &a.subsFixture}, {"aks-managed-clusters-list.json", &a.listFixture},
		{"aks-managed-clusters-list-page2.json", &a.list2Fixture}, {"aks-list-cluster-user-credentials.json", &a.credFixture}} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return nil, fmt.Errorf("fake arm: %w", err)
		}
		*f.into = b
	}
	var clusters, subs struct {
		Value []map[string]any `json:"value"`
	}
	if err := json.Unmarshal(a.listFixture, &clusters); err != nil || len(clusters.Value) == 0 {
		return nil, fmt.Errorf("fake arm: the cluster list fixture: %v", err) //nolint:errorlint // err may be nil
	}
	if err := json.Unmarshal(a.subsFixture, &subs); err != nil || len(subs.Value) == 0 {
		return nil, fmt.Errorf("fake arm: the subscription list fixture: %v", err) //nolint:errorlint // err may be nil
	}
	a.clusterFixture, a.subFixture = clusters.Value[0], subs.Value[0]
	if useTLS {
		a.srv = httptest.NewTLSServer(http.HandlerFunc(a.serve))
	} else {
		a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	}
	return a, nil
}

// URL is the fake's base URL: the Resource Manager endpoint.
func (a *ARM) URL() string { return a.srv.URL }

// Client is an HTTP client for the fake (trusting its certificate).
func (a *ARM) Client() *http.Client { return a.srv.Client() }

// Certificate is the TLS certificate of a fake started with TLS.
func (a *ARM) Certificate() *tls.Certificate {
	if a.srv.TLS == nil || len(a.srv.TLS.Certificates) == 0 {
		return nil
	}
	return &a.srv.TLS.Certificates[0]
}

// Close stops the fake.
func (a *ARM) Close() { a.srv.Close() }

// ClientOptions are the SDK's client options for the fake: Resource
// Manager at its URL, its client as the transport, bearer tokens allowed
// over plain HTTP.
func (a *ARM) ClientOptions() *arm.ClientOptions {
	co := &arm.ClientOptions{}
	co.Cloud = cloud.Configuration{
		ActiveDirectoryAuthorityHost: "https://login.microsoftonline.com/",
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: a.srv.URL, Audience: "https://management.core.windows.net/"},
		},
	}
	co.InsecureAllowCredentialWithHTTP = true
	co.Transport = a.srv.Client()
	return co
}

// SetSubscriptions sets the subscriptions GET /subscriptions lists (id →
// state: Enabled, Disabled, Warned, PastDue, Deleted), in the order given
// by ids, and returns the count of subscription lists answered so far.
func (a *ARM) SetSubscriptions(ids []string, states map[string]string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.subs, a.subOrder, a.subsSet = map[string]string{}, nil, true
	for _, id := range ids {
		state := states[id]
		if state == "" {
			state = "Enabled"
		}
		a.subs[strings.ToLower(id)] = state
		a.subOrder = append(a.subOrder, id)
	}
	return a.subLists
}

// SetClusters replaces the clusters of cs's subscriptions that have their
// names and appends the others, and returns the count of subscription
// lists answered so far. A subscription with clusters lists them whether
// or not GET /subscriptions lists it.
func (a *ARM) SetClusters(cs ...ManagedCluster) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range cs {
		sub := strings.ToLower(c.Sub)
		list := slices.DeleteFunc(a.clusters[sub], func(o ManagedCluster) bool { return o.Name == c.Name })
		a.clusters[sub] = append(list, c)
	}
	return a.subLists
}

// RemoveClusters takes clusters out of a subscription.
func (a *ARM) RemoveClusters(sub string, names ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	sub = strings.ToLower(sub)
	a.clusters[sub] = slices.DeleteFunc(a.clusters[sub], func(c ManagedCluster) bool { return slices.Contains(names, c.Name) })
}

// SetPageSize pages the model's cluster lists (0: one page).
func (a *ARM) SetPageSize(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pageSize = n
}

// Throttle answers the next n cluster list requests with 429.
func (a *ARM) Throttle(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.throttle = n
}

// SetListBody answers every cluster list request with body (empty: no
// override); {{URL}} becomes the fake's URL.
func (a *ARM) SetListBody(body string) { a.SetListAnswer(http.StatusOK, body) }

// SetListAnswer answers every cluster list request with status and body
// (an empty body: no override).
func (a *ARM) SetListAnswer(status int, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.listStatus, a.listBody = status, body
}

// SetList answers the cluster list requests of sub with body.
func (a *ARM) SetList(sub, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lists[strings.ToLower(sub)] = body
}

// SetSubscriptionsBody answers GET /subscriptions with body.
func (a *ARM) SetSubscriptionsBody(body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.subsBody = body
}

// SetCredentials answers listClusterUserCredential with status and body
// (status 0: the fixture).
func (a *ARM) SetCredentials(status int, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.credStatus, a.credBody = status, body
}

// SetCredentialCA makes listClusterUserCredential's kubeconfig name the
// cluster's server and this CA (PEM) instead of the fixture's.
func (a *ARM) SetCredentialCA(pem []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.credCA = slices.Clone(pem)
}

// SetReadOnly makes the POSTs of these subscriptions fail as in a
// Disabled subscription.
func (a *ARM) SetReadOnly(subs ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range subs {
		a.readOnly[strings.ToLower(s)] = true
	}
}

// RequireToken refuses a request without "Authorization: Bearer token"
// (401 InvalidAuthenticationToken) and records it (BadAuth).
func (a *ARM) RequireToken(token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token = token
}

// ManagedIdentity serves GET /msi/token as App Service's managed identity
// endpoint (IDENTITY_ENDPOINT, IDENTITY_HEADER) does: with header as
// X-Identity-Header, it hands out the token RequireToken set.
func (a *ARM) ManagedIdentity(header string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.miHeader = header
}

// Seen returns the requests so far, as "METHOD path?query".
func (a *ARM) Seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.requests)
}

// Authorizations returns the Authorization header of each request.
func (a *ARM) Authorizations() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.authz)
}

// BadAuth returns the requests refused for their credentials, and how
// many tokens the managed identity endpoint handed out.
func (a *ARM) BadAuth() ([]string, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.badAuth), a.tokenReqs
}

// SubscriptionLists counts the GET /subscriptions answered: the listings
// begun.
func (a *ARM) SubscriptionLists() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.subLists
}

// modelCluster is c as ARM lists it.
func (a *ARM) modelCluster(c ManagedCluster) map[string]any {
	mc := maps.Clone(a.clusterFixture)
	mc["id"], mc["name"] = c.ID(), c.Name
	if c.Tags != nil {
		mc["tags"] = c.Tags
	}
	props := maps.Clone(mc["properties"].(map[string]any))
	props["provisioningState"] = c.Provisioning
	props["powerState"] = map[string]any{"code": c.PowerState}
	props["fqdn"] = c.FQDN()
	props["azurePortalFQDN"] = c.Name + "-dns-5f3c1a9e.portal.hcp.westeurope.azmk8s.io"
	if c.NoFQDN {
		delete(props, "fqdn")
		delete(props, "azurePortalFQDN")
	}
	aad := maps.Clone(props["aadProfile"].(map[string]any))
	if c.Tenant != "" {
		aad["tenantID"] = c.Tenant
	}
	if c.LegacyServerApp != "" {
		aad["managed"], aad["serverAppID"] = false, c.LegacyServerApp
	}
	props["aadProfile"] = aad
	mc["properties"] = props
	return mc
}

// modelSubscription is subscription id as ARM lists it.
func (a *ARM) modelSubscription(i int, id, state string) map[string]any {
	s := maps.Clone(a.subFixture)
	s["id"], s["subscriptionId"], s["displayName"], s["state"] = "/subscriptions/"+id, id, fmt.Sprintf("sub-%d", i), state
	return s
}
