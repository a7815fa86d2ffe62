package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/opskit"
)

// opsKitExported scrapes the cloud deployment's /metrics (the built binary
// with every kind of source, Secrets, the refresh trigger) once its
// clusters are served, and fails when an alert of the chart's
// PrometheusRule or a panel of its dashboard names a metric or a label the
// binary does not export: the kit would show nothing, or never fire.
func opsKitExported(t *testing.T, c *CloudEnv) {
	t.Helper()
	queries, err := opskit.ChartQueries(filepath.Join("..", "..", "deploy", "helm", "argocd-cluster-discovery"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.Addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	exported, err := opskit.ParseScrape(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	missing, err := exported.Missing(queries)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range missing {
		t.Errorf("%s: not exported by the binary", f)
	}
	t.Logf("%d queries of the chart's alerts and dashboard checked against the binary's /metrics", len(queries))
}
