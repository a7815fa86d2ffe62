package clusterprofile

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testenv"
)

// restConfig points at the real kube-apiserver + etcd of this package's
// tests, with the chart's ClusterProfile CRD installed.
var restConfig *rest.Config

// crdPath is the CRD the chart installs.
var crdPath = filepath.Join("..", "..", "..", "deploy", "helm", "argocd-cluster-discovery", "files", "clusterprofile-crd.yaml")

// TestMain starts one control plane for the package's tests.
func TestMain(m *testing.M) { testenv.Main(m, filepath.Join("..", "..", ".."), &restConfig, crdPath) }

// counter counts the requests that change something, and the lists. With
// failAfter set, every write past that count fails as a dead process's
// would: it never reaches the server.
type counter struct {
	writes    atomic.Int64
	lists     atomic.Int64
	failAfter atomic.Int64
	// beforeWrite, when set, runs before each write is sent: what another
	// process does while the write is on its way
	beforeWrite atomic.Pointer[func(*http.Request)]

	mu sync.Mutex
	// reads is the Accept header of each GET of ClusterProfiles
	reads []string
}

// profileReads returns the Accept header of each GET of ClusterProfiles
// (lists, watches, gets) so far.
func (c *counter) profileReads() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reads)
}

// counted is one client's transport, counted by a counter shared by every
// client of a test's ledgers (each client has its own: no transport is
// written while another's requests are in flight).
type counted struct {
	*counter
	rt http.RoundTripper
}

func (c counted) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/"+Resource.Resource) {
		c.mu.Lock()
		c.reads = append(c.reads, r.Header.Get("Accept"))
		c.mu.Unlock()
	}
	switch {
	case r.Method != http.MethodGet:
		if f := c.beforeWrite.Load(); f != nil {
			(*f)(r)
		}
		if n := c.writes.Add(1); c.failAfter.Load() > 0 && n > c.failAfter.Load() {
			return nil, errors.New("connection cut: the leader died")
		}
	case r.URL.Query().Get("watch") != "true" && !strings.Contains(r.URL.RawQuery, "watch=1"):
		c.lists.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// cluster is one test's namespace and clients, the ledger's counted.
type cluster struct {
	ns      string
	cfg     *rest.Config // the ledger's, its requests counted
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
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return counted{counter: c.counter, rt: rt} }
	c.cfg = cfg
	return c
}

// ledgerThrough opens the ledger of owner in the cluster's namespace, its
// requests going through wrap of the cluster's counted transport.
func (c *cluster) ledgerThrough(t *testing.T, owner string, wrap func(http.RoundTripper) http.RoundTripper) *Ledger {
	t.Helper()
	cfg := rest.CopyConfig(c.cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return wrap(c.cfg.WrapTransport(rt)) }
	l, err := New(cfg, Options{Namespace: c.ns, OwnerID: owner})
	require.NoError(t, err)
	return l
}

// ledger opens the ledger of owner in the cluster's namespace.
func (c *cluster) ledger(t *testing.T, owner string) *Ledger {
	t.Helper()
	l, err := New(c.cfg, Options{Namespace: c.ns, OwnerID: owner})
	require.NoError(t, err)
	return l
}
