package clustersecret

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
)

// faultyTransport fails or stalls requests on demand, as an unreachable or
// hung kube-apiserver would.
type faultyTransport struct {
	rt http.RoundTripper
	// down fails every request with a connection error.
	down atomic.Bool
	// failWritesAfter fails every write after this many (0: never).
	failWritesAfter atomic.Int64
	// holdWrites, when set, makes writes wait until it is closed.
	holdWrites chan struct{}
	writes     atomic.Int64
}

func (f *faultyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.down.Load() {
		return nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	}
	if r.Method != http.MethodGet {
		n := f.writes.Add(1)
		if after := f.failWritesAfter.Load(); after > 0 && n > after {
			return nil, errors.New("connection reset by peer")
		}
		if f.holdWrites != nil {
			select {
			case <-f.holdWrites:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
	}
	return f.rt.RoundTrip(r)
}

func faultyClient(t testing.TB) (kubernetes.Interface, *faultyTransport) {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.QPS, cfg.Burst = 500, 1000
	ft := &faultyTransport{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { ft.rt = rt; return ft })
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c, ft
}

func TestAPIServerUnavailableDuringReconcile(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a", "b", "c", "d")
	client, ft := faultyClient(t)
	r, err := New(defaulted(Config{Options: Options{Namespace: e.ns, OwnerID: "test-owner"}, Policy: PolicySync,
		Prune: PruneOptions{AfterListings: 1, MaxDeletions: 5}}), client, f.inv, nil, nil)
	require.NoError(t, err)

	ft.down.Store(true)
	_, err = r.Pass(context.Background())
	require.ErrorContains(t, err, "list cluster secrets")
	assert.Contains(t, r.Status().LastError, "connection refused")
	assert.Empty(t, e.secrets())

	// back, but it drops the connection after two writes: a partial apply
	ft.down.Store(false)
	ft.failWritesAfter.Store(2)
	_, err = r.Pass(context.Background())
	require.Error(t, err)
	assert.Len(t, e.secrets(), 2)

	// healthy again: the next pass converges, no duplicates
	ft.failWritesAfter.Store(0)
	ch, err := r.Pass(context.Background())
	require.NoError(t, err)
	assert.Len(t, ch.Create, 2)
	assert.Equal(t, []string{sn("a"), sn("b"), sn("c"), sn("d")}, e.secretNames())

	// the cluster list shrinks, and the API server goes away mid-way: the
	// listing failure stops the pass before any delete
	f.write("a")
	require.NoError(t, f.refresh())
	ft.down.Store(true)
	_, err = r.Pass(context.Background())
	require.Error(t, err)
	assert.Len(t, e.secrets(), 4, "nothing deleted without a successful listing of Secrets")
}

// TestLeaderLostMidPass: the lease passes while a pass is writing. The
// writes in flight finish (they started within the lease), and no write
// starts after it, although the context is not cancelled (a frozen leader,
// or one whose renewals fail while client-go still retries).
func TestLeaderLostMidPass(t *testing.T) {
	e := newEnv(t)
	names := numbered("c%02d", 20)
	f := newFleet(t, names...)
	client, ft := faultyClient(t)
	r, err := New(defaulted(Config{Options: Options{Namespace: e.ns, OwnerID: "test-owner"}, Concurrency: 2}), client, f.inv, nil, nil)
	require.NoError(t, err)

	ft.holdWrites = make(chan struct{})
	t0 := time.Now()
	clock, late := lateClock(t0) // the lease ends when late is set
	ctx := lease.WithDeadline(context.Background(), t0.Add(time.Minute), clock)
	done := make(chan error, 1)
	go func() { _, err := r.Pass(ctx); done <- err }()
	require.Eventually(t, func() bool { return ft.writes.Load() >= 2 }, 10*time.Second, time.Millisecond)
	late.Store(true)     // the lease passes while two writes are in flight
	close(ft.holdWrites) // they go through
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the leader lease was not renewed")
	case <-time.After(10 * time.Second):
		t.Fatal("the pass did not stop at the fence")
	}
	assert.Equal(t, int64(2), ft.writes.Load(), "bounded concurrency: two writes started within the lease, none after it")
	assert.Len(t, e.secrets(), 2, "the writes in flight completed; the other 18 never started")
}

// TestKilledMidReconcileAndRestarted runs a reconcile pass in a child
// process (this test binary), kills it with SIGKILL part-way through its
// writes, and checks that a fresh reconciler converges: every Secret once,
// nothing deleted.
func TestKilledMidReconcileAndRestarted(t *testing.T) {
	e := newEnv(t)
	names := numbered("k%03d", 200)
	f := newFleet(t, names...)
	kubeconfig := writeKubeconfig(t, restConfig)

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReconcileProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "ACD_HELPER_KUBECONFIG="+kubeconfig, "ACD_HELPER_NAMESPACE="+e.ns, "ACD_HELPER_CLUSTERS="+f.path)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return len(e.secrets()) >= 20 }, 60*time.Second, 5*time.Millisecond, out.String())
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	partial := len(e.secrets())
	require.Less(t, partial, len(names), "killed before it finished")
	t.Logf("killed after %d of %d Secrets", partial, len(names))

	r := newReconciler(t, e, f)
	ch := pass(t, r)
	assert.Empty(t, ch.Delete)
	assert.Len(t, ch.Create, len(names)-partial)
	assert.Len(t, e.secrets(), len(names), "converged, no duplicates")
	ch = pass(t, r)
	assert.Equal(t, len(names), ch.Unchanged)
}

// TestHelperReconcileProcess is the child of
// TestKilledMidReconcileAndRestarted; it does nothing in a normal run.
func TestHelperReconcileProcess(t *testing.T) {
	kubeconfig := os.Getenv("ACD_HELPER_KUBECONFIG")
	if kubeconfig == "" {
		return // not a child process: nothing to do
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cfg.QPS, cfg.Burst = 50, 50 // slow enough to be killed part-way
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	f := fleetAt(t, os.Getenv("ACD_HELPER_CLUSTERS"))
	r, err := New(defaulted(Config{Options: Options{Namespace: os.Getenv("ACD_HELPER_NAMESPACE"), OwnerID: "test-owner"}, Concurrency: 1}), client, f.inv, nil, nil)
	require.NoError(t, err)
	_, err = r.Pass(context.Background())
	require.NoError(t, err)
}

func writeKubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	path := t.TempDir() + "/kubeconfig"
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}
