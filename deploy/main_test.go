// Tests of the Helm chart in helm/argocd-cluster-discovery and of the example manifests in examples/: helm lint and
// helm template (the helm built into bin/testbin) for the default values and every provider's example values, the
// rendered manifests applied to a real kube-apiserver with strict field validation and the restricted Pod Security
// profile enforced, the Role checked both as written and as the API server authorizes it, and the cluster Secret
// reconciler run under exactly that Role.
//
// One control plane (kube-apiserver + etcd, Argo CD's CRDs and minimal ServiceMonitor and PrometheusRule CRDs) is
// shared by the package (TestMain). The chart's alerts are checked and unit-tested with promtool (.ci/promtool).
// Missing binaries fail the run: run `make testbin`.
package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	chartDir = "helm/argocd-cluster-discovery"
	// release is the release name the README uses; its full name, and so the plugin ConfigMap's name, is
	// argocd-cluster-discovery.
	release = "argocd-cluster-discovery"
)

var (
	assets     string // bin/testbin
	helmBin    string
	helmHome   string // HELM_*_HOME and the kubeconfig helm uses
	restConfig *rest.Config
	kubeconfig string
)

// TestMain starts one control plane for the package. Missing binaries are a
// failure, never a skip.
func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	assets = os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets, _ = filepath.Abs(filepath.Join("..", "bin", "testbin"))
	}
	helmBin = filepath.Join(assets, "helm")
	var missing []string
	for _, f := range []string{"kube-apiserver", "etcd", "helm", "promtool", "argocd-crds/application-crd.yaml",
		"argocd-crds/applicationset-crd.yaml", "argocd-crds/appproject-crd.yaml"} {
		if _, err := os.Stat(filepath.Join(assets, f)); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %s not found in %s: run `make testbin` (builds kube-apiserver, etcd, helm, promtool and Argo CD's CRDs offline)\n",
			strings.Join(missing, ", "), assets)
		return 1
	}
	var err error
	helmHome, err = os.MkdirTemp("", "deploy-test-helm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(helmHome)

	env := &envtest.Environment{
		BinaryAssetsDirectory:   assets,
		ControlPlaneStopTimeout: 30 * time.Second,
		CRDDirectoryPaths:       []string{filepath.Join(assets, "argocd-crds"), filepath.Join("testdata", "crds")},
		ErrorIfCRDPathMissing:   true,
		// envtest waits 10s for the CRDs by default: too short on two busy
		// cores, where the test packages start their control planes at once
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 2 * time.Minute},
	}
	restConfig, err = env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: start kube-apiserver and etcd: %v\n", err)
		_ = env.Stop() // a start that failed after the control plane came up leaves it running
		return 1
	}
	// stop the control plane on SIGTERM/SIGINT too: an interrupted run must
	// not leave kube-apiserver and etcd behind
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if _, ok := <-sig; ok {
			_ = env.Stop()
			os.Exit(1)
		}
	}()
	defer func() {
		signal.Stop(sig)
		close(sig)
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
		}
	}()
	user, err := env.AddUser(envtest.User{Name: "helm", Groups: []string{"system:masters"}}, nil)
	if err == nil {
		var kc []byte
		if kc, err = user.KubeConfig(); err == nil {
			kubeconfig = filepath.Join(helmHome, "kubeconfig")
			err = os.WriteFile(kubeconfig, kc, 0o600)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: kubeconfig for helm: %v\n", err)
		return 1
	}
	return m.Run()
}

// helm runs bin/testbin/helm with its own home directories and the test
// control plane as its cluster; it returns stdout and, on failure, an error
// holding stderr.
func helm(args ...string) (string, error) {
	cmd := exec.Command(helmBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + helmHome, "KUBECONFIG=" + kubeconfig,
		"HELM_CACHE_HOME=" + filepath.Join(helmHome, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME=" + filepath.Join(helmHome, "data")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}
