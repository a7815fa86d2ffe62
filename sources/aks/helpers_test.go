package aks

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testca"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
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
		var err error
		if caPEM, err = testca.SelfSignedPEM("aks-test-ca"); err != nil {
			panic(err)
		}
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

// testEnv is a Source wired to a transport, with its registry and logs.
// Its configuration is defaulted, as the service does before NewSource.
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
	// The service gives every source a logger that names it.
	log := slog.New(slog.NewJSONHandler(env.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("source", "azure-prod")
	cfg.Default()
	src, err := newSource(cfg, sources.SourceOptions{Name: "azure-prod", Logger: log, Registerer: env.reg},
		azurearm.Hooks{Credential: cred, Options: co})
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

type pages = [][]*armcontainerservice.ManagedCluster

func names(cs []sources.Cluster) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

func byName(cs []sources.Cluster, name string) sources.Cluster {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return sources.Cluster{}
}

func explicit(subs ...string) Config { return Config{Subscriptions: subs} }
