package opskit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const scrape = `# HELP acd_source_synced 1 once a source has completed a listing.
# TYPE acd_source_synced gauge
acd_source_synced{source="demo"} 1
# HELP acd_eks_errors_total Listings that failed.
# TYPE acd_eks_errors_total counter
acd_eks_errors_total{kind="auth",operation="ListClusters",source="eks"} 0
# HELP acd_duration_seconds Duration.
# TYPE acd_duration_seconds histogram
acd_duration_seconds_bucket{source="demo",le="0.1"} 1
acd_duration_seconds_bucket{source="demo",le="+Inf"} 1
acd_duration_seconds_sum{source="demo"} 0.01
acd_duration_seconds_count{source="demo"} 1
# HELP acd_rpc_seconds A summary.
# TYPE acd_rpc_seconds summary
acd_rpc_seconds{quantile="0.5"} 0.1
acd_rpc_seconds_sum 1
acd_rpc_seconds_count 10
# HELP acd_empty_total Declared, never observed.
# TYPE acd_empty_total counter
`

func TestParseScrape(t *testing.T) {
	e, err := ParseScrape(strings.NewReader(scrape))
	require.NoError(t, err)
	assert.Equal(t, []string{"acd_duration_seconds_bucket", "acd_duration_seconds_count", "acd_duration_seconds_sum",
		"acd_eks_errors_total", "acd_rpc_seconds", "acd_rpc_seconds_count", "acd_rpc_seconds_sum", "acd_source_synced"}, e.Names())
	assert.False(t, e.Has("acd_empty_total"), "a family without a sample selects nothing")
	assert.False(t, e.Has("acd_duration_seconds"), "a classic histogram is its _bucket, _sum and _count")

	_, err = ParseScrape(strings.NewReader("a{b=} 1\n"))
	assert.Error(t, err)
}

func TestMissing(t *testing.T) {
	e, err := ParseScrape(strings.NewReader(scrape))
	require.NoError(t, err)
	qs := []Query{
		{Where: "alert Fine", Expr: `max by (namespace, job, source) (acd_source_synced{source=~"$source", pod="p"}) == 0`},
		{Where: "alert Histogram", Expr: `histogram_quantile(0.9, sum by (source, le) (rate(acd_duration_seconds_bucket[5m])))`},
		{Where: "alert Summary", Expr: `acd_rpc_seconds{quantile="0.5"} > acd_rpc_seconds_sum / acd_rpc_seconds_count`},
		{Where: "alert Regex", Expr: `sum by (kind) (rate({__name__=~"acd_(eks|aks)_errors_total", operation="x"}[5m]))`},
		{Where: "alert Gone", Expr: `sum by (whatever) (acd_empty_total) + acd_source_synced`},
		{Where: "alert BadLabel", Expr: `acd_source_synced{phase="ready"}`},
		{Where: "alert BadGrouping", Expr: `sum by (phase) (acd_source_synced)`},
		{Where: "alert NoRegexMatch", Expr: `{__name__=~"acd_(rancher)_errors_total"}`},
		{Where: "alert Typo", Expr: `acd_duration_seconds_buckets`},
		{Where: "variable source", Expr: `acd_source_synced{namespace=~"$namespace"}`, Labels: []string{"source"}},
		{Where: "variable kind", Labels: []string{"kind"}},
		{Where: "variable phase", Labels: []string{"phase"}},
	}
	got, err := e.Missing(qs)
	require.NoError(t, err)
	var lines []string
	for _, f := range got {
		lines = append(lines, f.String())
	}
	assert.Equal(t, []string{
		"alert Gone: metric acd_empty_total is not exported",
		"alert BadLabel: metric acd_source_synced has no label phase",
		"alert BadGrouping: label phase is on none of the query's metrics",
		`alert NoRegexMatch: metric {__name__=~"acd_(rancher)_errors_total"} is not exported`,
		"alert Typo: metric acd_duration_seconds_buckets is not exported",
		"variable phase: label phase is on none of the query's metrics",
	}, lines)
	assert.Equal(t, []string{"acd_duration_seconds_buckets", "acd_empty_total", `{__name__=~"acd_(rancher)_errors_total"}`}, MissingMetrics(got))

	got, err = e.Missing([]Query{{Where: "alert Broken", Expr: "sum(a"}, {Where: "alert Bad regex", Expr: `{__name__=~"("}`},
		{Where: "alert Gone", Expr: "b"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "alert Broken: unbalanced (")
	assert.Contains(t, err.Error(), "alert Bad regex")
	assert.Equal(t, []Finding{{Where: "alert Gone", Metric: "b"}}, got, "the other queries are still checked")
}
