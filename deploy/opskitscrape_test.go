package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/opskit"
)

// demoAbsent are the metrics the alerts and the dashboard use that the
// demo binary (make run: two static sources, no Secret sync, no refresh
// trigger, the in-memory ledger) does not export. Each needs a part of the
// service the demo leaves off; the e2e suite's deployment, with every
// source and Secret sync on, checks them (opskit.Missing on its scrape).
var demoAbsent = []string{
	// Secret sync (secrets.enabled)
	"argocd_cluster_discovery_secrets_blocked_deletions",
	"argocd_cluster_discovery_secrets_foreign_clashes",
	"argocd_cluster_discovery_secrets_leader",
	"argocd_cluster_discovery_secrets_pass_duration_seconds_bucket",
	"argocd_cluster_discovery_secrets_passes_total",
	"argocd_cluster_discovery_secrets_pending_deletions",
	"argocd_cluster_discovery_secrets_writes_total",
	// the refresh trigger (applicationSetRefresh.enabled)
	"argocd_cluster_discovery_appset_refresh_leader",
	"argocd_cluster_discovery_appset_refresh_patches_total",
	// a rancher source (tokens: with Secret sync on)
	"argocd_cluster_discovery_rancher_token_request_failures_total",
	"argocd_cluster_discovery_rancher_tokens_live",
	"argocd_cluster_discovery_rancher_tokens_minted_total",
	// an upstream source (rancher, eks, aks, aro)
	`{__name__=~"argocd_cluster_discovery_(rancher|eks|aks|aro)_api_requests_total"}`,
	`{__name__=~"argocd_cluster_discovery_(rancher|eks|aks|aro)_errors_total"}`,
}

// TestOpsKitNamesExportedMetrics starts the built binary with the demo
// configuration, waits for its two sources' first listings, asks the
// plugin API once (the request metrics exist from the first request on),
// scrapes /metrics and compares every metric and label the alerts and the
// dashboard name with it: only the metrics of demoAbsent may be missing,
// and no label.
func TestOpsKitNamesExportedMetrics(t *testing.T) {
	base := startDemo(t)
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) string {
		resp, err := client.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, b)
		return string(b)
	}
	require.Eventually(t, func() bool {
		m := get("/metrics")
		return strings.Contains(m, `argocd_cluster_discovery_source_synced{source="demo-aws"} 1`) &&
			strings.Contains(m, `argocd_cluster_discovery_source_synced{source="demo-azure"} 1`)
	}, 60*time.Second, 200*time.Millisecond, "the demo sources list")

	token, err := os.ReadFile(filepath.Join("..", "testdata", "demo", "token"))
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/api/v1/getparams.execute",
		strings.NewReader(`{"applicationSetName":"opskit","input":{"parameters":{}}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	exported, err := opskit.ParseScrape(strings.NewReader(get("/metrics")))
	require.NoError(t, err)
	qs, err := opskit.ChartQueries(chartDir)
	require.NoError(t, err)
	findings, err := exported.Missing(qs)
	require.NoError(t, err)
	var labels []string
	for _, f := range findings {
		if f.Label != "" {
			labels = append(labels, f.String())
		}
	}
	assert.Empty(t, labels, "labels the kit names and the binary does not export")
	missing := opskit.MissingMetrics(findings)
	t.Logf("not exported by the demo binary (need Secret sync, the refresh trigger or an upstream source): %s",
		strings.Join(missing, ", "))
	for _, f := range findings {
		if f.Label == "" && !slices.Contains(demoAbsent, f.Metric) {
			t.Errorf("%s: a typo, or a metric the demo does not export, to add to demoAbsent with why", f)
		}
	}
	for _, m := range demoAbsent {
		if !slices.Contains(missing, m) {
			t.Errorf("demoAbsent: the demo binary exports %s now: take it off the list", m)
		}
	}
}

// startDemo builds the binary, starts it with testdata/demo/config.yaml on
// a free loopback port, and returns its base URL once it listens. It is
// stopped when the test ends.
func startDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "argocd-cluster-discovery")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/argocd-cluster-discovery").CombinedOutput()
	require.NoError(t, err, string(out))

	cmd := exec.Command(bin, "serve", "--config", filepath.Join("..", "testdata", "demo", "config.yaml"),
		"--listen", "127.0.0.1:0", "--log-format", "text")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var logs bytes.Buffer
	done := make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		defer close(done)
		re := regexp.MustCompile(`msg=listening api=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("the demo binary's log:\n%s", logs.String())
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case <-done:
		t.Fatalf("the demo binary exited before it listened")
	case <-time.After(60 * time.Second):
		t.Fatalf("the demo binary did not listen within 60 s")
	}
	return ""
}
