// Package testenv starts the real kube-apiserver and etcd that `make
// testbin` builds, once per test package, for the packages whose tests
// talk to the Kubernetes API. Missing binaries fail the run: those tests
// are never skipped.
package testenv

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Main starts a control plane with the CRDs of crdPaths installed, sets
// *cfg to its configuration, runs the package's tests and stops it, on
// SIGTERM and SIGINT too, so that an interrupted run leaves no
// kube-apiserver or etcd behind. It exits the process. root is the path of
// the repository's root from the package's directory ("../..").
func Main(m *testing.M, root string, cfg **rest.Config, crdPaths ...string) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets, _ = filepath.Abs(filepath.Join(root, "bin", "testbin"))
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %s not found in %s: run `make testbin` (builds kube-apiserver and etcd offline)\n", b, assets)
			os.Exit(1)
		}
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ControlPlaneStopTimeout: 30 * time.Second,
		// MaxTime: envtest waits 10s for the CRDs by default, too short on two
		// busy cores, where the test packages start their control planes at once
		CRDInstallOptions: envtest.CRDInstallOptions{Paths: crdPaths, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute}}
	c, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: start kube-apiserver and etcd: %v\n", err)
		_ = env.Stop() // a start that failed after the control plane came up leaves it running
		os.Exit(1)
	}
	*cfg = c
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
