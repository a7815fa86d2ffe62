package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/testlog"
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

// waitReady polls /readyz until every source has listed once.
func waitReady(t *testing.T, base string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 10*time.Second, 20*time.Millisecond)
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

	waitReady(t, base)

	resp, body := post(t, base+"/api/v1/getparams.execute", "demo-token", `{"applicationSetName":"demo","input":{"parameters":{"tenant":"acme"}}}`)
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
	} {
		assert.Contains(t, string(metrics), m)
	}

	assert.Equal(t, 0, stop(), "SIGTERM (context cancel) is a clean exit")
	assert.Contains(t, logs.String(), "shutting down")
	assert.NotContains(t, logs.String(), "demo-token", "the token is never logged")
}

// TestStaticFileChangeIsServed: editing the clusters file changes the
// answer without a restart.
func TestStaticFileChangeIsServed(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	write("token", "t0ken\n")
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
		resp, body := post(t, url, "t0ken", `{"input":{}}`)
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
	waitReady(t, base)
	_, api := post(t, base+"/api/v1/getparams.execute", "demo-token", `{"applicationSetName":"x","input":`+input+`}`)

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"discover", "--config", demoConfig, "--input", input}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Equal(t, string(api)+"\n", stdout.String())
	assert.Contains(t, stdout.String(), "globex-prod-us")
}

func TestCLIErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("server:\n  listen: ''\nsources: []\n"), 0o600))
	unknown := filepath.Join(dir, "unknown.yaml")
	require.NoError(t, os.WriteFile(unknown, []byte("sever: {}\n"), 0o600))
	// valid as a file, but its static file is missing and its token file
	// unreadable: problems found when the sources are built, still before
	// anything starts
	noFile := filepath.Join(dir, "no-file.yaml")
	require.NoError(t, os.WriteFile(noFile, []byte("server: {tokens: [{env: ACD_TEST_TOKEN}]}\n"+
		"sources: [{name: one, provider: static, static: {file: gone.yaml}}]\n"), 0o600))
	noToken := filepath.Join(dir, "no-token.yaml")
	require.NoError(t, os.WriteFile(noToken, []byte("server: {listen: '127.0.0.1:0', tokens: [{file: missing-token}]}\n"+
		"sources: [{name: one, provider: static, static: {clusters: [{name: a, server: 'https://a.example.com'}]}}]\n"), 0o600))
	t.Setenv("ACD_TEST_TOKEN", "t")

	cases := []struct {
		name   string
		args   []string
		code   int
		stderr []string
		stdout string
	}{
		{"no command", nil, 2, []string{"usage:"}, ""},
		{"unknown command", []string{"serv"}, 2, []string{`unknown command "serv"`}, ""},
		{"version", []string{"version"}, 0, nil, "argocd-cluster-discovery dev"},
		{"serve without config", []string{"serve"}, 2, []string{"--config is required"}, ""},
		{"invalid config names fields", []string{"serve", "--config", bad}, 2, []string{"server.listen: Required value", "server.tokens: Required value", "sources: Required value: at least one source"}, ""},
		{"unknown key", []string{"discover", "--config", unknown}, 2, []string{"sever: Forbidden: unknown key"}, ""},
		{"validate a valid file", []string{"validate", "--config", demoConfig}, 0, nil, "configuration is valid: 2 source(s)"},
		{"validate reports every problem", []string{"validate", "--config", bad}, 2, []string{"server.listen: Required value", "sources: Required value"}, ""},
		{"validate builds the sources", []string{"validate", "--config", noFile}, 2, []string{"invalid configuration", "sources[0] (one)", filepath.Join(dir, "gone.yaml")}, ""},
		{"validate without credentials still reads static files", []string{"validate", "--config", noFile, "--no-credentials"}, 2, []string{filepath.Join(dir, "gone.yaml")}, ""},
		{"validate without credentials reads no token", []string{"validate", "--config", noToken, "--no-credentials"}, 0, nil, "configuration is valid: 1 source(s)"},
		{"serve: a missing static file is a configuration error", []string{"serve", "--config", noFile}, 2, []string{"invalid configuration", filepath.Join(dir, "gone.yaml")}, ""},
		{"serve: an unreadable token file exits 2 before starting", []string{"serve", "--config", noToken}, 2, []string{"invalid configuration", "server.tokens"}, ""},
		{"missing file", []string{"serve", "--config", filepath.Join(dir, "nope.yaml")}, 2, []string{"read config"}, ""},
		{"discover bad input", []string{"discover", "--config", demoConfig, "--input", `{"parameters":{"tennant":"x"}}`}, 2, []string{`unknown key "tennant"`}, ""},
		{"discover unknown source", []string{"discover", "--config", demoConfig, "--input", `{"parameters":{"source":"x"}}`}, 2, []string{`no source named "x"`}, ""},
		{"discover not json", []string{"discover", "--config", demoConfig, "--input", `tenant=acme`}, 2, []string{"--input must be a JSON object"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			assert.Equal(t, tc.code, code, stderr.String())
			for _, s := range tc.stderr {
				assert.Contains(t, stderr.String(), s)
			}
			if tc.code == 2 {
				assert.NotContains(t, stderr.String(), "starting", "a configuration error stops everything before the start")
			}
			assert.Contains(t, stdout.String(), tc.stdout)
		})
	}
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
	assert.Equal(t, `{"output":{"parameters":[]}}`+"\n", stdout.String(), "an empty but complete listing is a true empty answer")

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

// TestDiscoverEKSThroughTheRealSDK wires an eks source from the
// configuration file to an HTTP fake of the EKS API serving the upstream
// fixtures, and prints what the plugin API would answer.
func TestDiscoverEKSThroughTheRealSDK(t *testing.T) {
	describe, err := os.ReadFile("../../testdata/fixtures/eks/eks-describe-cluster.json")
	require.NoError(t, err)
	var calls sync.Map
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Store(r.Method+" "+r.URL.Path, true)
		assert.Contains(t, r.Header.Get("Authorization"), "AKIDEXAMPLE/", "signed with the configured credentials")
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/clusters":
			_, _ = io.WriteString(w, `{"clusters":["payments-prod"]}`)
		case "/clusters/payments-prod":
			_, _ = w.Write(describe)
		case "/": // the Resource Groups Tagging API (AWS JSON 1.1), tags read at every listing
			assert.Equal(t, "ResourceGroupsTaggingAPI_20170126.GetResources", r.Header.Get("X-Amz-Target"))
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			_, _ = io.WriteString(w, `{"PaginationToken":"","ResourceTagMappingList":[{"ResourceARN":"arn:aws:eks:eu-west-1:123456789012:cluster/payments-prod","Tags":[{"Key":"env","Value":"prod"}]}]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer fake.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`
server: {tokens: [{file: token}]}
sources:
  - name: aws-prod
    provider: eks
    eks:
      regions: [eu-west-1]
      accounts: [{id: "123456789012", argocdRoleARN: "arn:aws:iam::123456789012:role/argocd-deployer"}]
      endpoint: `+fake.URL+`
      taggingEndpoint: `+fake.URL+`
      maxAttempts: 1
`), 0o600))
	params, stdout, stderr := discoverParams(t, filepath.Join(dir, "config.yaml"))
	require.Len(t, params, 1)
	p := params[0]
	assert.Equal(t, "payments-prod", p["name"])
	assert.Equal(t, "prod", p["metadata"].(map[string]any)["labels"].(map[string]any)["env"], "tags from the tagging API")
	assert.Equal(t, "ready", p["phase"])
	assert.Equal(t, "eks", p["provider"])
	assert.Equal(t, "aws-prod", p["source"])
	assert.Equal(t, "eu-west-1", p["region"])
	_, listed := calls.Load("GET /clusters")
	assert.True(t, listed)

	stdout.Reset()
	code := run(context.Background(), []string{"discover", "--config", filepath.Join(dir, "config.yaml"), "--secrets"}, stdout, stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Contains(t, stdout.String(), `"awsAuthConfig":{"clusterName":"payments-prod","roleARN":"arn:aws:iam::123456789012:role/argocd-deployer"}`)
}

// discoverParams runs discover on a configuration file and decodes the
// parameters it prints; stdout and stderr are returned for more checks.
func discoverParams(t *testing.T, config string) ([]map[string]any, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"discover", "--config", config}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	var out struct {
		Output struct {
			Parameters []map[string]any `json:"parameters"`
		} `json:"output"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	return out.Output.Parameters, &stdout, &stderr
}

// fakeRancher serves the upstream-shaped /v3 fixtures: the API root with
// X-Api-Schemas, the schemas, two pages of clusters and the cacerts
// setting, with the fixtures' absolute links pointing at the fake.
func fakeRancher(t *testing.T, token string) *httptest.Server {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("../../testdata/fixtures/rancher", name))
		require.NoError(t, err)
		return b
	}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v3/settings/cacerts" && r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"type":"error","status":"401","message":"must authenticate"}`)
			return
		}
		serve := func(name string) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(bytes.ReplaceAll(read(name), []byte("https://rancher.example.com"), []byte(srv.URL)))
		}
		switch {
		case r.URL.Path == "/v3":
			w.Header().Set("X-Api-Schemas", srv.URL+"/v3/schemas")
			_, _ = io.WriteString(w, `{"type":"apiRoot"}`)
		case r.URL.Path == "/v3/schemas":
			serve("rancher-schemas-min.json")
		case r.URL.Path == "/v3/settings/cacerts":
			serve("rancher-settings-cacerts.json")
		case r.URL.Path == "/v3/clusters" && r.URL.Query().Get("marker") == "c-m-2x7kqz4b":
			serve("rancher-clusters-page2.json")
		case r.URL.Path == "/v3/clusters":
			serve("rancher-clusters-page1.json")
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDiscoverRancherThroughNorman wires a rancher source from the
// configuration file to a fake Rancher serving the upstream fixtures.
func TestDiscoverRancherThroughNorman(t *testing.T) {
	const token = "token-abcde:k8vq5x2m9lzt7wbr4c6nhp8sd2jfk4gqx9mt5vwl2rzc7b8nq4xsdh"
	fake := fakeRancher(t, token)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rancher-token"), []byte(token+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`
server: {tokens: [{file: token}]}
sources:
  - name: rancher-eu
    provider: rancher
    rancher:
      url: `+fake.URL+`
      token: {file: rancher-token}
      namePrefix: eu-
secrets: {ownerID: fleet-a}
`), 0o600))
	params, stdout, stderr := discoverParams(t, filepath.Join(dir, "config.yaml"))
	var got []string
	for _, p := range params {
		got = append(got, p["name"].(string)+" "+p["server"].(string))
		assert.Equal(t, "rancher", p["provider"])
	}
	assert.Equal(t, []string{
		"eu-edge-k3s-01 " + fake.URL + "/k8s/clusters/c-5tbxq",
		"eu-prod-eu-west " + fake.URL + "/k8s/clusters/c-m-2x7kqz4b",
		"eu-staging-eks " + fake.URL + "/k8s/clusters/c-7qgnz",
	}, got, "clusters across both pages, the unavailable one too (degraded, still served); the local one is left out (includeLocal: false)")
	assert.NotContains(t, stdout.String()+stderr.String(), "k8vq5x2m9", "the Rancher token is in no output")

	stdout.Reset()
	code := run(context.Background(), []string{"discover", "--config", filepath.Join(dir, "config.yaml"), "--secrets"}, stdout, stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Contains(t, stdout.String(), `"bearerToken":"<redacted>"`)
	assert.NotContains(t, stdout.String(), "k8vq5x2m9")
}

// TestDiscoverUnresolvableUpstream: a source whose host does not resolve
// fails the listing with a clear error, and nothing is printed as if there
// were no clusters.
func TestDiscoverUnresolvableUpstream(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rancher-token"), []byte("token-abcde:secretvalue"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`
server: {tokens: [{file: token}]}
sources:
  - name: rancher-gone
    provider: rancher
    timeout: 10s
    rancher: {url: "https://rancher.invalid", token: {file: rancher-token}}
`), 0o600))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"discover", "--config", filepath.Join(dir, "config.yaml")}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout.String(), "no empty answer")
	assert.Contains(t, stderr.String(), "rancher-gone")
	assert.Contains(t, stderr.String(), "have not completed a listing")
	assert.Contains(t, stderr.String(), "rancher.invalid")
	assert.NotContains(t, stderr.String(), "secretvalue")
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
