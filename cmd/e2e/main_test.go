package e2e

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
)

var e *Env

// TestMain builds our service and starts the environment. Missing
// binaries fail the run: this suite is never skipped. The subprocesses and
// the control plane are stopped on exit and on SIGTERM/SIGINT.
func TestMain(m *testing.M) {
	var err error
	e, err = SetUp()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: e2e environment: %v\n", err)
		if e != nil {
			e.TearDown()
		}
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if s, ok := <-sig; ok {
			fmt.Fprintf(os.Stderr, "e2e: %v: stopping subprocesses and the control plane\n", s)
			e.TearDown()
			os.Exit(1)
		}
	}()
	code := m.Run()
	signal.Stop(sig)
	close(sig)
	e.TearDown()
	os.Exit(code)
}
