package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/memrelease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testenv"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const demoConfig = "../../testdata/demo/config.yaml"

// startDemo runs `serve` on the demo configuration on a free port, as
// `make run` does, and returns its base URL and a stop function that
// returns the exit code.
func startDemo(t *testing.T, extraArgs ...string) (string, *testlog.Buffer, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	logs := &testlog.Buffer{}
	code := make(chan int, 1)
	args := append([]string{"--config", demoConfig, "--listen", "127.0.0.1:0"}, extraArgs...)
	go func() {
		code <- cmdServe(ctx, args, logs, &serveHooks{listening: func(api, _ string) { addr <- api }})
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case c := <-code:
		cancel()
		t.Fatalf("serve exited with %d:\n%s", c, logs.String())
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("serve did not start")
	}
	stop := func() int {
		cancel()
		select {
		case c := <-code:
			return c
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop")
			return -1
		}
	}
	t.Cleanup(func() { cancel() })
	return base, logs, stop
}

// waitReady polls /readyz until the process can answer, then /status
// (with the plugin token) until every source has listed once.
func waitReady(t *testing.T, base, token string) {
	t.Helper()
	waitReadyz(t, base)
	require.Eventually(t, func() bool { return testenv.SourcesSynced(http.DefaultClient, base, token) }, 10*time.Second, 20*time.Millisecond,
		"every source listed")
}

// waitReadyz polls /readyz until 200: the process can answer.
func waitReadyz(t *testing.T, base string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 10*time.Second, 20*time.Millisecond, "/readyz")
}

func post(t *testing.T, url, token, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// TestServeDemo is the README's demo: make run, then its curl.
func TestServeDemo(t *testing.T) {
	base, logs, stop := startDemo(t)
	defer http.DefaultClient.CloseIdleConnections()

	waitReady(t, base, "demo-token-change-me")

	resp, body := post(t, base+"/api/v1/getparams.execute", "demo-token-change-me", `{"applicationSetName":"demo","input":{"parameters":{"tenant":"acme"}}}`)
	require.Equal(t, 200, resp.StatusCode, string(body))
	var out struct {
		Output struct {
			Parameters []map[string]any `json:"parameters"`
		} `json:"output"`
	}
	require.NoError(t, json.Unmarshal(body, &out))
	var names []string
	for _, p := range out.Output.Parameters {
		names = append(names, p["name"].(string))
		assert.Equal(t, "acme", p["tenant"])
	}
	assert.Equal(t, []string{"acme-dev-weu", "acme-prod-eu", "acme-prod-us", "acme-staging-eu"}, names)

	resp, _ = post(t, base+"/api/v1/getparams.execute", "wrong", `{}`)
	assert.Equal(t, 401, resp.StatusCode)

	mresp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, m := range []string{
		`argocd_cluster_discovery_http_requests_total{code="200",route="/api/v1/getparams.execute"} 1`,
		`argocd_cluster_discovery_http_requests_total{code="401",route="/api/v1/getparams.execute"} 1`,
		`argocd_cluster_discovery_source_clusters{ready="true",source="demo-aws"} 6`,
		`argocd_cluster_discovery_source_synced{source="demo-azure"} 1`,
		"argocd_cluster_discovery_source_listing_duration_seconds_bucket",
		"argocd_cluster_discovery_source_last_success_timestamp_seconds",
		"argocd_cluster_discovery_http_request_duration_seconds_bucket",
		"go_goroutines",
		`argocd_cluster_discovery_build_info{goversion="` + runtime.Version() + `",version="dev"} 1`,
	} {
		assert.Contains(t, string(metrics), m)
	}

	assert.Equal(t, 0, stop(), "SIGTERM (context cancel) is a clean exit")
	assert.Contains(t, logs.String(), "shutting down")
	assert.NotContains(t, logs.String(), "demo-token-change-me", "the token is never logged")
}

// TestStaticFileChangeIsServed: editing the clusters file changes the
// answer without a restart.
func TestStaticFileChangeIsServed(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	write("token", "a-token-for-the-test\n")
	write("clusters.yaml", "clusters:\n  - name: one\n    server: https://one.example.com\n")
	write("config.yaml", `
server:
  listen: 127.0.0.1:0
  tokens: [{file: token}]
sources:
  - name: files
    provider: static
    interval: 1s
    static: {file: clusters.yaml}
`)
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan int, 1)
	go func() {
		done <- cmdServe(ctx, []string{"--config", filepath.Join(dir, "config.yaml")}, io.Discard,
			&serveHooks{listening: func(api, _ string) { addr <- api }})
	}()
	defer func() { cancel(); <-done; http.DefaultClient.CloseIdleConnections() }()
	url := "http://" + <-addr + "/api/v1/getparams.execute"
	names := func() string {
		resp, body := post(t, url, "a-token-for-the-test", `{"input":{}}`)
		if resp.StatusCode != 200 {
			return resp.Status
		}
		var out struct {
			Output struct {
				Parameters []struct{ Name string } `json:"parameters"`
			} `json:"output"`
		}
		require.NoError(t, json.Unmarshal(body, &out))
		var n []string
		for _, p := range out.Output.Parameters {
			n = append(n, p.Name)
		}
		return strings.Join(n, ",")
	}
	require.Eventually(t, func() bool { return names() == "one" }, 10*time.Second, 50*time.Millisecond)
	write("clusters.yaml", "clusters:\n  - name: one\n    server: https://one.example.com\n  - name: two\n    server: https://two.example.com\n")
	require.Eventually(t, func() bool { return names() == "one,two" }, 10*time.Second, 50*time.Millisecond)
	write("clusters.yaml", "clusters: [ this is not valid")
	time.Sleep(2500 * time.Millisecond) // two refreshes fail
	assert.Equal(t, "one,two", names(), "a broken file keeps the last good listing")
}

func TestDiscoverPrintsWhatTheAPIServes(t *testing.T) {
	base, _, stop := startDemo(t)
	defer stop()
	defer http.DefaultClient.CloseIdleConnections()
	input := `{"parameters":{"tenant":["globex"],"labelSelector":"env=prod"}}`
	waitReady(t, base, "demo-token-change-me")
	_, api := post(t, base+"/api/v1/getparams.execute", "demo-token-change-me", `{"applicationSetName":"x","input":`+input+`}`)

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"discover", "--config", demoConfig, "--input", input}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Equal(t, string(api)+"\n", stdout.String())
	assert.Contains(t, stdout.String(), "globex-prod-us")
}

// TestDiscoverEmptyVersusBroken: a complete listing with no clusters is a
// true empty answer; a source that cannot be listed makes discover fail and
// print nothing on stdout, never an empty list.
func TestDiscoverEmptyVersusBroken(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "clusters.yaml"), []byte("clusters: []\n"), 0o600))
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("server: {tokens: [{file: token}]}\nsources: [{name: s, provider: static, static: {file: clusters.yaml}}]\n"), 0o600))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"discover", "--config", cfg}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Equal(t, `{"output":{"parameters":[]}}`+"\n", stdout.String(), "an empty but complete listing is a true empty answer") //nolint:testifylint // the exact bytes are the contract

	require.NoError(t, os.WriteFile(filepath.Join(dir, "clusters.yaml"), []byte("clusters: {not: a list}\n"), 0o600))
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"discover", "--config", cfg}, &stdout, &stderr)
	assert.NotEqual(t, 0, code)
	assert.Empty(t, stdout.String())
}

func TestDiscoverSecretsRedacts(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"discover", "--config", demoConfig, "--secrets"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Equal(t, 12, strings.Count(stdout.String(), "kind: Secret"))
	assert.Contains(t, stdout.String(), "argocd.argoproj.io/secret-type: cluster")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("plugin-token"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rancher-token"), []byte("token-abcde:s3cr3t"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`
server: {tokens: [{file: token}]}
sources:
  - name: one
    provider: static
    static:
      clusters:
        - name: with-token
          server: https://k8s.example.com
          auth: {bearerToken: {file: `+filepath.Join(dir, "rancher-token")+`}}
secrets: {ownerID: fleet-a}
`), 0o600))
	stdout.Reset()
	code = run(context.Background(), []string{"discover", "--config", filepath.Join(dir, "config.yaml"), "--secrets"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Contains(t, stdout.String(), `"bearerToken":"<redacted>"`)
	assert.NotContains(t, stdout.String(), "s3cr3t")
	assert.Contains(t, stdout.String(), "argocd-cluster-discovery.io/owner: fleet-a")
}

func TestApplyRuntimeSetsGCPercent(t *testing.T) {
	restore := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(restore) })

	t.Setenv("GOGC", "") // restored after the test
	os.Unsetenv("GOGC")
	applyRuntime(config.Runtime{GCPercent: 25}, slog.New(slog.DiscardHandler))
	assert.Equal(t, 25, debug.SetGCPercent(100), "runtime.gcPercent applied")

	var logs bytes.Buffer
	t.Setenv("GOGC", "80")
	applyRuntime(config.Runtime{GCPercent: 25}, slog.New(slog.NewTextHandler(&logs, nil)))
	assert.Equal(t, 100, debug.SetGCPercent(100), "GOGC set in the environment wins")
	assert.Contains(t, logs.String(), "GOGC=80")
}

// sink keeps an allocation reachable until a test drops it.
var sink []byte

// TestServeReleasesTheFreeHeap: the service hands its free heap back to
// the system once at rest (memrelease), without being asked: 64 MiB
// allocated and dropped beside the demo are back within seconds.
func TestServeReleasesTheFreeHeap(t *testing.T) {
	base, _, stop := startDemo(t)
	defer http.DefaultClient.CloseIdleConnections()
	waitReady(t, base, "demo-token-change-me")
	sink = make([]byte, 64<<20)
	for i := range sink {
		sink[i] = 1
	}
	sink = nil
	runtime.GC()
	require.Greater(t, memrelease.Free(), uint64(32<<20), "64 MiB collected are free, not released yet")
	assert.Eventually(t, func() bool { return memrelease.Free() <= memrelease.Above }, 2*memrelease.Every+5*time.Second,
		50*time.Millisecond, "the free heap released")
	assert.Equal(t, 0, stop())
}

// TestReadyMeansTheReplicaCanAnswer: a source that cannot list (its
// Rancher refuses connections) keeps every answer a 503 with our message,
// and /readyz is 200 all the same, so that the message reaches Argo CD
// instead of a connection refused by a replica taken out of the Service.
func TestReadyMeansTheReplicaCanAnswer(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("a-token-for-the-test\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rancher-token"), []byte("token-x:y\n"), 0o600))
	cfg := `log: {level: error}
server: {listen: "127.0.0.1:0", tokens: [{file: token}]}
sources:
  - name: down
    provider: rancher
    rancher: {url: "http://127.0.0.1:1", token: {file: rancher-token}}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	code := make(chan int, 1)
	logs := &testlog.Buffer{}
	go func() {
		code <- cmdServe(ctx, []string{"--config", filepath.Join(dir, "config.yaml")}, logs, &serveHooks{listening: func(api, _ string) { addr <- api }})
	}()
	defer func() { cancel(); <-code; http.DefaultClient.CloseIdleConnections() }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(10 * time.Second):
		t.Fatalf("serve did not start:\n%s", logs.String())
	}
	waitReadyz(t, base) // ready once the ledger is read
	resp, body := post(t, base+"/api/v1/getparams.execute", "a-token-for-the-test", `{"applicationSetName":"x","input":{"parameters":{}}}`)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Contains(t, string(body), "source(s) down have not completed a listing yet")
}

// TestDrainOnSIGTERM: with server.drainDelay, SIGTERM first turns /readyz
// to 503 while the plugin API goes on answering (the Service still sends
// requests to a pod being deleted for a moment), then the process stops.
func TestDrainOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("a-token-for-the-test\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "clusters.yaml"), []byte("clusters:\n  - name: one\n    server: https://one.example.com\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`
server:
  listen: 127.0.0.1:0
  drainDelay: 5s
  tokens: [{file: token}]
sources:
  - {name: files, provider: static, static: {file: clusters.yaml}}
`), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan int, 1)
	logs := &testlog.Buffer{}
	go func() {
		done <- cmdServe(ctx, []string{"--config", filepath.Join(dir, "config.yaml")}, logs,
			&serveHooks{listening: func(api, _ string) { addr <- api }})
	}()
	defer func() { cancel(); http.DefaultClient.CloseIdleConnections() }()
	base := "http://" + <-addr
	waitReady(t, base, "a-token-for-the-test")

	cancel() // SIGTERM
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}, 3*time.Second, 10*time.Millisecond, "/readyz turns 503 at once")
	resp, body := post(t, base+"/api/v1/getparams.execute", "a-token-for-the-test", `{"input":{}}`)
	assert.Equal(t, 200, resp.StatusCode, "the plugin API still answers: %s", body)
	select {
	case <-done:
		t.Fatal("stopped before the drain delay")
	default:
	}
	select {
	case code := <-done:
		assert.Equal(t, 0, code)
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop after the drain delay")
	}
	assert.Contains(t, logs.String(), "still answering while the Service stops sending requests here")
}
