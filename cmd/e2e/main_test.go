package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/authn"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
)

// Names shared by the manifests and the service configuration.
const (
	argoNS      = "argocd"
	pluginToken = "e2e-plugin-token-3f9a1c"
	rancherTok  = "token-e2e01:t4k9q2xw8m5zr7vbc3nlh6pd1sgf0jyk2ex9wa4tq7mu5rb3c8nvz"
	ownerID     = "e2e"
	// interval is the refresh interval of both sources.
	interval = 2 * time.Second
	// departureListings and departureGrace are the service's departure
	// rule: a served cluster leaves the answer, and its Secret may be
	// pruned, once absent from (or leaving in) this many consecutive
	// complete listings of its source and this long after it was first
	// missed.
	departureListings = 3
	departureGrace    = time.Second
	// departureMaxFraction and departureHeldListings are the mass-drop
	// rule: a listing that makes more than this fraction of a source's
	// served clusters (and more than one) missing holds their departures
	// for this many listings.
	departureMaxFraction  = 0.25
	departureHeldListings = 8
	// steadyListings is how many listings a cluster that has not left must
	// keep its Application and Secret through a change of state.
	steadyListings = 5
)

// env is the one environment every scenario shares: a control plane, one
// ApplicationSet controller, one fake Rancher and, at a time, one process
// of our service.
type env struct {
	root, dir  string
	testEnv    *envtest.Environment
	rest       *rest.Config
	kubeconfig string
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	binary     string
	rancher    *fakerancher.Fake
	staticFile string
	apiAddr    string // our service
	controller *proc
	// cloudAuthn is the apiserver's token webhook for EKS and AKS tokens
	cloudAuthn *authn.Webhook

	// lateSource: testLateSource added its source to the configuration
	lateSource bool
	// rolling: the replicas are being restarted in turn (see
	// testLifecycleRolling)
	rolling atomic.Bool

	mu      sync.Mutex
	service *proc
}

var e *env

// TestMain builds our service and starts the environment. Missing
// binaries fail the run: this suite is never skipped. The subprocesses and
// the control plane are stopped on exit and on SIGTERM/SIGINT.
func TestMain(m *testing.M) {
	var err error
	e, err = setUp()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: e2e environment: %v\n", err)
		if e != nil {
			e.tearDown()
		}
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if s, ok := <-sig; ok {
			fmt.Fprintf(os.Stderr, "e2e: %v: stopping subprocesses and the control plane\n", s)
			e.tearDown()
			os.Exit(1)
		}
	}()
	code := m.Run()
	signal.Stop(sig)
	close(sig)
	e.tearDown()
	os.Exit(code)
}

func setUp() (*env, error) {
	start := time.Now()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "testbin")
	}
	crds := filepath.Join(assets, "argocd-crds")
	var missing []string
	for _, p := range []string{"kube-apiserver", "etcd", "argocd-applicationset-controller",
		filepath.Join("argocd-crds", "applicationset-crd.yaml"), filepath.Join("argocd-crds", "application-crd.yaml"),
		filepath.Join("argocd-crds", "appproject-crd.yaml")} {
		if _, err := os.Stat(filepath.Join(assets, p)); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("not found in %s: %s: run `make testbin` (builds them offline from the Go module proxy)", assets, strings.Join(missing, ", "))
	}
	dir, err := os.MkdirTemp("", "acd-e2e-")
	if err != nil {
		return nil, err
	}
	x := &env{root: root, dir: dir}

	// our binary, built while the control plane starts
	built := make(chan error, 1)
	go func() { built <- x.build() }()

	// Argo CD's CRDs, and the ClusterProfile CRD the chart installs for the
	// ledger
	profileCRD := filepath.Join(root, "deploy", "helm", "argocd-cluster-discovery", "files", "clusterprofile-crd.yaml")
	x.testEnv = &envtest.Environment{BinaryAssetsDirectory: assets, CRDDirectoryPaths: []string{crds, profileCRD},
		ErrorIfCRDPathMissing: true, ControlPlaneStopTimeout: 30 * time.Second,
		// the CRDs become served while our binary builds beside: give them time
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 2 * time.Minute}}
	if x.rest, err = x.startControlPlane(); err != nil {
		// tearDown stops what did start
		<-built //nolint:errcheck // the start failed already; its error is the one returned
		return x, fmt.Errorf("start kube-apiserver and etcd: %w", err)
	}
	x.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(x.kubeconfig, x.testEnv.KubeConfig, 0o600); err != nil {
		<-built //nolint:errcheck // the start failed already; its error is the one returned
		return x, err
	}
	if x.kube, err = kubernetes.NewForConfig(x.rest); err != nil {
		<-built //nolint:errcheck // the start failed already; its error is the one returned
		return x, err
	}
	if x.dyn, err = dynamic.NewForConfig(x.rest); err != nil {
		<-built //nolint:errcheck // the start failed already; its error is the one returned
		return x, err
	}
	if err := <-built; err != nil {
		return x, err
	}
	if x.rancher, err = fakerancher.New(filepath.Join(root, "testdata", "fixtures", "rancher"), rancherTok); err != nil {
		return x, err
	}
	// the auth proxy and the authorized endpoints forward to the suite's apiserver
	if err := x.rancher.SetKube(x.rest); err != nil {
		return x, err
	}
	port, err := freePort()
	if err != nil {
		return x, err
	}
	x.apiAddr = fmt.Sprintf("127.0.0.1:%d", port)
	if err := x.installArgoCD(); err != nil {
		return x, err
	}
	if err := x.startController(filepath.Join(assets, "argocd-applicationset-controller")); err != nil {
		return x, err
	}
	fmt.Printf("e2e: environment up in %s (control plane, Argo CD CRDs, applicationset controller, our binary built)\n",
		time.Since(start).Round(100*time.Millisecond))
	return x, nil
}

// build compiles our service, with the race detector when this test binary
// has it.
func (x *env) build() error {
	x.binary = filepath.Join(x.dir, "argocd-cluster-discovery")
	args := []string{"build", "-o", x.binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/argocd-cluster-discovery")
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build our binary: %w", err)
	}
	cmd := exec.Command(gobin, args...)
	cmd.Dir = x.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/argocd-cluster-discovery: %w\n%s", err, out)
	}
	return nil
}

var teardownOnce sync.Once

// tearDown stops our service, the controller, the fake Rancher and the
// control plane. It may run from the signal handler and from TestMain.
func (x *env) tearDown() {
	teardownOnce.Do(func() {
		x.mu.Lock()
		svc := x.service
		x.mu.Unlock()
		if svc != nil {
			svc.stop()
		}
		if x.controller != nil {
			x.controller.stop()
		}
		if x.rancher != nil {
			x.rancher.Close()
		}
		if x.testEnv != nil {
			if err := x.testEnv.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: stop control plane: %v\n", err)
			}
		}
		if x.cloudAuthn != nil {
			x.cloudAuthn.Close()
		}
		if os.Getenv("E2E_KEEP") == "" {
			_ = os.RemoveAll(x.dir)
		} else {
			fmt.Fprintf(os.Stderr, "e2e: logs and configuration kept in %s\n", x.dir)
		}
	})
}

// startController runs Argo CD's ApplicationSet controller against the
// control plane, watching the argocd namespace, its ports on loopback.
func (x *env) startController(bin string) error {
	ports := make([]int, 3)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", ports[0])
	p, err := startProc("argocd-applicationset-controller", filepath.Join(x.dir, "applicationset-controller.log"),
		[]string{"KUBECONFIG=" + x.kubeconfig}, bin,
		"--kubeconfig", x.kubeconfig, "--namespace", argoNS,
		"--metrics-addr", metrics, "--probe-addr", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--webhook-addr", fmt.Sprintf("127.0.0.1:%d", ports[2]),
		"--loglevel", "info", "--logformat", "text")
	if err != nil {
		return err
	}
	x.controller = p
	// it registers no health checks: its metrics server answering means
	// the manager runs
	if err := waitHTTP(p, "http://"+metrics+"/metrics", 60*time.Second); err != nil {
		return fmt.Errorf("applicationset controller not ready: %w\n%s", err, p.tail(30))
	}
	return nil
}

// proc is a subprocess in its own process group, killed with its parent.
type proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
	err       error
}

func startProc(name, logPath string, env []string, bin string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// its own group, so that stop reaches its children; and killed if this
	// test process dies without running its clean-up
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after 15 s.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- last %d lines of %s (%s) ---\n%s", len(lines), p.name, p.log, strings.Join(lines, "\n"))
}

// waitHTTP waits for url to answer 200 while p runs.
func waitHTTP(p *proc, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		if p.exited() {
			return fmt.Errorf("%s exited: %w", p.name, p.err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			drain(resp.Body)
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Join(ctx.Err(), last)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
