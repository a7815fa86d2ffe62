package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
)

// TestServeDryRunNeverShowsTheBearerToken protects dry-run output from
// credentials on the command that makes dry runs: `serve --dry-run`, with
// cluster Secrets enabled (on an API server that holds none) and a cluster
// whose bearer token is read from a file, logs at debug level the plan
// that creates the cluster's Secret and shows it on /status; the token is
// in neither its output (the log, on stderr: serve writes nothing to
// stdout) nor /status. (`discover --secrets` is TestDiscoverSecretsRedacts'.)
func TestServeDryRunNeverShowsTheBearerToken(t *testing.T) {
	const secretPart = "DryRunBearerFromTheFile"
	fk := &fakeKube{requests: map[string]int{}}
	api := httptest.NewServer(fk)
	t.Cleanup(api.Close) // after serve has stopped (its watch holds a connection)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "cluster-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("sha256~"+secretPart+"-9c1e\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("plugin-token-of-the-test\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`log: {level: debug}
server: {listen: "127.0.0.1:0", opsListen: "localhost:0", tokens: [{file: token}]}
sources:
  - name: one
    provider: static
    static: {clusters: [{name: with-token, server: "https://k8s.example.com", auth: {bearerToken: {file: `+tokenFile+`}}}]}
secrets: {enabled: true, ownerID: fleet-a, namespace: argo, kubeconfig: `+writeFakeKubeconfig(t, dir, api.URL)+`, leaderElection: {enabled: false}}
`), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	logs := &testlog.Buffer{}
	listening, exited := make(chan string, 1), make(chan int, 1)
	hooks := &serveHooks{listening: func(_, ops string) { listening <- ops }}
	go func() {
		exited <- cmdServe(ctx, []string{"--config", filepath.Join(dir, "config.yaml"), "--dry-run"}, logs, hooks)
	}()
	t.Cleanup(func() { cancel(); <-exited; http.DefaultClient.CloseIdleConnections() })
	var ops string // the operations endpoints: /status without the plugin token
	require.Eventually(t, func() bool {
		select {
		case a := <-listening:
			ops = "http://" + a
			return true
		default:
			return false
		}
	}, 10*time.Second, 10*time.Millisecond, "serve listens: %s", logs)

	var status string
	require.Eventually(t, func() bool {
		resp, err := http.Get(ops + "/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		status = string(b)
		var st struct {
			Secrets struct {
				DryRun  bool `json:"dryRun"`
				Created int  `json:"created"`
			} `json:"secrets"`
		}
		return err == nil && json.Unmarshal(b, &st) == nil && st.Secrets.DryRun && st.Secrets.Created == 1
	}, 10*time.Second, 20*time.Millisecond, "the dry run planned the create")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "dry run: plan computed") }, 5*time.Second, 10*time.Millisecond)

	for where, text := range map[string]string{"the log": logs.String(), "/status": status} {
		assert.NotContains(t, text, secretPart, "%s holds the token", where)
	}
}

// TestDryRunReachesTheInventory: secrets.dryRun (what --dry-run sets)
// makes the inventory confirm no departure; without it, it confirms them.
func TestDryRunReachesTheInventory(t *testing.T) {
	for _, dryRun := range []bool{false, true} {
		cfg := &config.Config{}
		cfg.Secrets.DryRun = dryRun
		assert.Equal(t, dryRun, inventoryOptions(cfg, slog.New(slog.DiscardHandler), nil).DryRun)
	}
}
