package aks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	csfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	subfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions/fake"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	subA = "9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41"
	subB = "3e1f7a2c-8d4b-4c6e-9f0a-5b2d7c1e8a94"
	subC = "0b1f6471-1bf0-4dda-aec3-000000000003"
	// secretToken is put in every fake kubeconfig; it must never appear
	// in a log line, an error or a cluster.
	secretToken = "s3cr3t-kubeconfig-token-do-not-leak"
)

// fixture reads a file of testdata/fixtures/aks.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", "aks", name))
	require.NoError(t, err)
	return b
}

var (
	caOnce sync.Once
	caPEM  []byte
)

// testCAPEM returns a PEM CA certificate generated once per run.
func testCAPEM(t testing.TB) []byte {
	t.Helper()
	caOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "aks-test-ca"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	})
	return caPEM
}

// kubeconfig is a user kubeconfig as listClusterUserCredential returns it
// (decoded), for a cluster with local accounts: a token user beside the CA.
func kubeconfig(name string, ca []byte) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    certificate-authority-data: %[2]s
    server: https://%[1]s-dns.hcp.westeurope.azmk8s.io:443
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: clusterUser_%[1]s
current-context: %[1]s
users:
- name: clusterUser_%[1]s
  user:
    token: %[3]s
`, name, base64.StdEncoding.EncodeToString(ca), secretToken)
}

// managedCluster is a running, public, Entra ID cluster; mutate changes it.
func managedCluster(sub, rg, name string, mutate ...func(*armcontainerservice.ManagedCluster)) *armcontainerservice.ManagedCluster {
	mc := &armcontainerservice.ManagedCluster{
		ID:       to.Ptr(fmt.Sprintf("/subscriptions/%s/resourcegroups/%s/providers/Microsoft.ContainerService/managedClusters/%s", sub, rg, name)),
		Name:     to.Ptr(name),
		Location: to.Ptr("westeurope"),
		Tags:     map[string]*string{"env": to.Ptr("prod")},
		Properties: &armcontainerservice.ManagedClusterProperties{
			ProvisioningState:        to.Ptr("Succeeded"),
			PowerState:               &armcontainerservice.PowerState{Code: to.Ptr(armcontainerservice.CodeRunning)},
			KubernetesVersion:        to.Ptr("1.31"),
			CurrentKubernetesVersion: to.Ptr("1.31.4"),
			Fqdn:                     to.Ptr(name + "-dns.hcp.westeurope.azmk8s.io"),
			AADProfile:               &armcontainerservice.ManagedClusterAADProfile{Managed: to.Ptr(true)},
			APIServerAccessProfile:   &armcontainerservice.ManagedClusterAPIServerAccessProfile{EnablePrivateCluster: to.Ptr(false)},
		},
	}
	for _, m := range mutate {
		m(mc)
	}
	return mc
}

func stopped(mc *armcontainerservice.ManagedCluster) {
	mc.Properties.PowerState.Code = to.Ptr(armcontainerservice.CodeStopped)
}

func private(publicFQDN bool) func(*armcontainerservice.ManagedCluster) {
	return func(mc *armcontainerservice.ManagedCluster) {
		mc.Properties.APIServerAccessProfile = &armcontainerservice.ManagedClusterAPIServerAccessProfile{
			EnablePrivateCluster: to.Ptr(true), EnablePrivateClusterPublicFQDN: to.Ptr(publicFQDN),
		}
		mc.Properties.PrivateFQDN = to.Ptr(*mc.Name + "-dns.privatelink.westeurope.azmk8s.io")
	}
}

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
	subsTr     *subfake.ServerTransport
	calls      map[string]int
}

func newFakeARM(t testing.TB, pages func(sub string) [][]*armcontainerservice.ManagedCluster) *fakeARM {
	return &fakeARM{t: t, pages: pages, transports: map[string]*csfake.ManagedClustersServerTransport{}, calls: map[string]int{}}
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

// testEnv is a Source wired to a transport, with its registry and logs.
type testEnv struct {
	src  *Source
	reg  *prometheus.Registry
	logs *testlog.Buffer
	now  time.Time
}

// fastRetry keeps the SDK's retry policy but with tiny delays.
var fastRetry = policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: 10 * time.Millisecond}

func newTestEnv(t testing.TB, cfg Config, tr policy.Transporter, cred azcore.TokenCredential) *testEnv {
	t.Helper()
	co := &arm.ClientOptions{}
	co.Transport = tr
	co.Retry = fastRetry
	return newTestEnvWithOptions(t, cfg, co, cred)
}

func newTestEnvWithOptions(t testing.TB, cfg Config, co *arm.ClientOptions, cred azcore.TokenCredential) *testEnv {
	t.Helper()
	if cred == nil {
		cred = &azfake.TokenCredential{}
	}
	env := &testEnv{reg: prometheus.NewRegistry(), logs: &testlog.Buffer{}, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	log := slog.New(slog.NewJSONHandler(env.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	src, err := New("azure-prod", cfg, Options{Logger: log, Registerer: env.reg, Credential: cred, ClientOptions: co})
	require.NoError(t, err)
	src.now = func() time.Time { return env.now }
	env.src = src
	return env
}

// assertNoSecret checks that the kubeconfig token reached neither the logs
// nor the clusters.
func assertNoSecret(t testing.TB, env *testEnv, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NotContains(t, string(b), secretToken)
	require.NotContains(t, env.logs.String(), secretToken)
}
