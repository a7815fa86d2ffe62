package clustersecret

// The shared control plane of the tests, and each test's namespace and
// fleet of clusters on it.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testenv"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// restConfig points at the real kube-apiserver + etcd shared by the tests
// of this package (started in TestMain).
var restConfig *rest.Config

// TestMain starts one control plane for the package's tests.
func TestMain(m *testing.M) {
	if os.Getenv("ACD_HELPER_KUBECONFIG") != "" {
		// a child process of TestKilledMidReconcileAndRestarted: it uses the
		// parent's control plane and must not start one it cannot stop
		os.Exit(m.Run())
	}
	testenv.Main(m, filepath.Join("..", ".."), &restConfig)
}

// writeCounter counts the requests that change something on the server,
// and the lists and watches of Secrets.
type writeCounter struct {
	rt      http.RoundTripper
	writes  atomic.Int64
	lists   atomic.Int64
	watches atomic.Int64
}

func (w *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		if strings.Contains(r.URL.Path, "/secrets") {
			w.writes.Add(1)
		}
	case http.MethodGet:
		switch {
		case !strings.HasSuffix(r.URL.Path, "/secrets"):
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			w.watches.Add(1)
		default:
			w.lists.Add(1)
		}
	}
	return w.rt.RoundTrip(r)
}

// env is one test's namespace on the shared control plane.
type env struct {
	t       testing.TB
	ns      string
	client  kubernetes.Interface // counted
	admin   kubernetes.Interface // what people and Argo CD do, not counted
	counter *writeCounter
}

func newEnv(t testing.TB) *env {
	t.Helper()
	admin, err := kubernetes.NewForConfig(restConfig)
	require.NoError(t, err)
	ns := fmt.Sprintf("argocd-%d", time.Now().UnixNano()%1_000_000_000)
	_, err = admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := rest.CopyConfig(restConfig)
	cfg.QPS, cfg.Burst = 500, 1000
	counter := &writeCounter{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter })
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return &env{t: t, ns: ns, client: client, admin: admin, counter: counter}
}

func (e *env) secrets() []corev1.Secret {
	e.t.Helper()
	l, err := e.admin.CoreV1().Secrets(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelSecretType + "=cluster"})
	require.NoError(e.t, err)
	return l.Items
}

func (e *env) secretNames() []string {
	var out []string
	for _, s := range e.secrets() {
		out = append(out, s.Name)
	}
	return out
}

// fleet is a static source backed by a file the test rewrites, behind a
// real inventory.
type fleet struct {
	t    testing.TB
	path string
	inv  *inventory.Inventory
}

func newFleet(t testing.TB, clusters ...string) *fleet {
	t.Helper()
	f := &fleet{t: t, path: filepath.Join(t.TempDir(), "clusters.yaml")}
	f.write(clusters...)
	return fleetAt(t, f.path)
}

// fleetAt is a fleet over an existing clusters file.
func fleetAt(t testing.TB, path string) *fleet {
	t.Helper()
	f := &fleet{t: t, path: path}
	src, err := static.New(static.Config{File: f.path}, "")
	require.NoError(t, err)
	// departures are confirmed after two listings; no grace period or
	// mass-drop hold, so that the tests' small fleets can leave
	f.inv, err = inventory.New([]inventory.SourceSpec{{Name: "fleet", Provider: sources.ProviderStatic, Source: src, Interval: time.Hour, Timeout: 5 * time.Second}},
		inventory.Options{Departure: inventory.Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 1}})
	require.NoError(t, err)
	require.NoError(t, f.inv.RefreshAll(context.Background()))
	return f
}

// numbered returns n cluster names made by format (with a %d verb) of 0 … n-1.
func numbered(format string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf(format, i)
	}
	return names
}

func (f *fleet) write(clusters ...string) {
	var b strings.Builder
	b.WriteString("clusters:\n")
	for _, c := range clusters {
		fmt.Fprintf(&b, "  - name: %s\n    server: https://%s.example.com\n    tenant: acme\n    labels: {env: prod}\n    auth: {aws: {clusterName: %s, roleARN: 'arn:aws:iam::1:role/argocd'}}\n", c, c, c)
	}
	if len(clusters) == 0 {
		b.WriteString("  []\n")
	}
	require.NoError(f.t, os.WriteFile(f.path, []byte(b.String()), 0o600))
}

func (f *fleet) refresh() error { return f.inv.RefreshAll(context.Background()) }

// testConfig is the reconciler configuration of the tests, changed by mut.
// defaulted is c with the defaults of what it leaves unset, as New needs
// it.
func defaulted(c Config) Config {
	c.Defaults()
	return c
}

func testConfig(e *env, mut ...func(*Config)) Config {
	cfg := Config{Options: Options{Namespace: e.ns, OwnerID: "test-owner"}, Policy: PolicySync,
		Prune: PruneOptions{AfterListings: 2, MaxDeletions: 5, MaxDeletionsPercent: 10}, Concurrency: 4, Debounce: 10 * time.Millisecond}
	cfg.Defaults() // New takes the configuration as given
	for _, m := range mut {
		m(&cfg)
	}
	return cfg
}

// newReconciler is a reconciler reading the service's cache of cluster
// Secrets (NewInformer), synced.
func newReconciler(t testing.TB, e *env, f *fleet, mut ...func(*Config)) *Reconciler {
	t.Helper()
	r, err := New(testConfig(e, mut...), e.client, f.inv, nil, nil, WithInformer(informerFor(t, e.client, e.ns)))
	require.NoError(t, err)
	return r
}

// pass makes a pass once the reconciler's cache shows what the API server
// holds (see caughtUp).
func pass(t testing.TB, r *Reconciler) Changes {
	t.Helper()
	caughtUp(t, r)
	ch, err := r.Pass(context.Background())
	require.NoError(t, err)
	return ch
}
