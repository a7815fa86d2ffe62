package clusterprofile

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// restConfig points at the real kube-apiserver + etcd of this package's
// tests, with the chart's ClusterProfile CRD installed.
var restConfig *rest.Config

// crdPath is the CRD the chart installs.
var crdPath = filepath.Join("..", "..", "..", "deploy", "helm", "argocd-cluster-discovery", "files", "clusterprofile-crd.yaml")

// TestMain starts one control plane from the binaries `make testbin`
// builds. Missing binaries fail the run: these tests are never skipped.
func TestMain(m *testing.M) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets, _ = filepath.Abs(filepath.Join("..", "..", "..", "bin", "testbin"))
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %s not found in %s: run `make testbin` (builds kube-apiserver and etcd offline)\n", b, assets)
			os.Exit(1)
		}
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ControlPlaneStopTimeout: 30 * time.Second,
		CRDInstallOptions: envtest.CRDInstallOptions{Paths: []string{crdPath}, ErrorIfPathMissing: true}}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: start kube-apiserver and etcd: %v\n", err)
		os.Exit(1)
	}
	restConfig = cfg
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if _, ok := <-sig; ok {
			_ = env.Stop()
			os.Exit(1)
		}
	}()
	code := m.Run()
	signal.Stop(sig)
	close(sig)
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
	}
	os.Exit(code)
}

// counter counts the requests that change something, and the lists.
type counter struct {
	rt     http.RoundTripper
	writes atomic.Int64
	lists  atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case r.Method != http.MethodGet:
		c.writes.Add(1)
	case r.URL.Query().Get("watch") != "true" && !strings.Contains(r.URL.RawQuery, "watch=1"):
		c.lists.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// cluster is one test's namespace and clients, the ledger's counted.
type cluster struct {
	ns      string
	dyn     dynamic.Interface
	core    kubernetes.Interface
	admin   kubernetes.Interface
	adminDy dynamic.Interface
	counter *counter
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	admin, err := kubernetes.NewForConfig(restConfig)
	require.NoError(t, err)
	adminDy, err := dynamic.NewForConfig(restConfig)
	require.NoError(t, err)
	ns := fmt.Sprintf("ledger-%d", time.Now().UnixNano()%1_000_000_000)
	_, err = admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	c := &cluster{ns: ns, admin: admin, adminDy: adminDy, counter: &counter{}}
	cfg := rest.CopyConfig(restConfig)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { c.counter.rt = rt; return c.counter }
	c.dyn, err = dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	c.core, err = kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// ledger opens the ledger of owner in the cluster's namespace.
func (c *cluster) ledger(t *testing.T, owner string) *Ledger {
	t.Helper()
	l, err := New(c.dyn, c.core, Options{Namespace: c.ns, OwnerID: owner})
	require.NoError(t, err)
	return l
}
