package e2e

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
)

var e *Env

// TestMain builds our service and starts the environment, with the Argo
// CD version ARGOCD names (default: .ci/testbin's ARGOCD_DEFAULT). Missing
// binaries fail the run: this suite is never skipped. The subprocesses and
// the control plane are stopped on exit and on SIGTERM/SIGINT. A failed
// run ends with a line naming the Argo CD version, which go test prints
// with the failing tests' output.
func TestMain(m *testing.M) {
	var err error
	e, err = SetUp()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: e2e environment (Argo CD %s): %v\n", ArgoCDVersion(), err)
		if e != nil {
			e.TearDown()
		}
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if s, ok := <-sig; ok {
			fmt.Fprintf(os.Stderr, "e2e (Argo CD %s): %v: stopping subprocesses and the control plane\n", ArgoCDVersion(), s)
			e.TearDown()
			os.Exit(1)
		}
	}()
	code := m.Run()
	signal.Stop(sig)
	close(sig)
	e.TearDown()
	if code != 0 {
		fmt.Printf("FAIL: the e2e suite against Argo CD %s (ARGOCD=%s)\n", ArgoCDVersion(), strings.TrimPrefix(ArgoCDVersion(), "v"))
	}
	os.Exit(code)
}
