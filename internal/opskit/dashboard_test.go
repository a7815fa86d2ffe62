package opskit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chartDir is the chart whose kit this package reads.
var chartDir = filepath.Join("..", "..", "deploy", "helm", "argocd-cluster-discovery")

const goodDashboard = `{
  "uid": "u", "title": "T",
  "templating": {"list": [
    {"name": "datasource", "type": "datasource", "query": "prometheus"},
    {"name": "job", "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
     "query": {"query": "label_values(up{namespace=~\"$namespace\"}, job)", "refId": "job"}},
    {"name": "ns", "type": "query", "datasource": "$datasource", "query": "label_values(namespace)"},
    {"name": "names", "type": "query", "datasource": "$datasource", "query": "label_names()"},
    {"name": "r", "type": "query", "datasource": "$datasource", "query": "query_result(topk(1, up))"},
    {"name": "interval", "type": "interval", "query": "1m,5m"}
  ]},
  "panels": [
    {"id": 1, "type": "row", "title": "Row", "gridPos": {"h": 1, "w": 24, "x": 0, "y": 0}, "panels": [
      {"id": 3, "type": "stat", "title": "In a row", "datasource": "${datasource}", "gridPos": {"h": 4, "w": 4, "x": 20, "y": 1},
       "targets": [{"refId": "A", "expr": "b"}]}
    ]},
    {"id": 2, "type": "timeseries", "title": "A", "datasource": {"type": "prometheus", "uid": "${datasource}"},
     "gridPos": {"h": 8, "w": 12, "x": 0, "y": 1},
     "targets": [{"refId": "A", "expr": "sum(a)", "datasource": {"type": "prometheus", "uid": "${datasource}"}}, {"refId": "B", "expr": "c"}]}
  ]
}`

func TestValidateDashboard(t *testing.T) {
	require.NoError(t, ValidateDashboard([]byte(goodDashboard)))

	qs, err := DashboardQueries([]byte(goodDashboard))
	require.NoError(t, err)
	assert.Equal(t, []Query{
		{Where: `panel 3 "In a row" target A`, Expr: "b"},
		{Where: `panel 2 "A" target A`, Expr: "sum(a)"},
		{Where: `panel 2 "A" target B`, Expr: "c"},
		{Where: "variable job", Expr: `up{namespace=~"$namespace"}`, Labels: []string{"job"}},
		{Where: "variable ns", Labels: []string{"namespace"}},
		{Where: "variable r", Expr: "topk(1, up)"},
	}, qs)

	breaks := map[string]func(d map[string]any){
		"needs a uid and a title": func(d map[string]any) { delete(d, "uid") },
		`no variable "datasource"`: func(d map[string]any) {
			list := d["templating"].(map[string]any)["list"].([]any)
			list[0].(map[string]any)["query"] = "loki"
		},
		"variable job: its datasource is not ${datasource}": func(d map[string]any) {
			variables(d)[1]["datasource"] = map[string]any{"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}
		},
		`panel 2 "A": its datasource is not ${datasource}`: func(d map[string]any) { panels(d)[1]["datasource"] = "Prometheus" },
		`panel 2 "A" target B: no expr`:                    func(d map[string]any) { targets(d, 1)[1]["expr"] = "  " },
		`panel 2 "A" target A: its datasource is not ${datasource}`: func(d map[string]any) {
			targets(d, 1)[0]["datasource"] = map[string]any{"type": "loki", "uid": "${datasource}"}
		},
		`panel 2 "A": target refId "A" is empty or not unique`: func(d map[string]any) { targets(d, 1)[1]["refId"] = "A" },
		`panel 2 "A": no target`:                               func(d map[string]any) { panels(d)[1]["targets"] = []any{} },
		`panel 2 "A": its id is not unique`: func(d map[string]any) {
			panels(d)[0]["panels"].([]any)[0].(map[string]any)["id"] = 2
		},
		`panel 3 "In a row": gridPos is outside`: func(d map[string]any) {
			panels(d)[0]["panels"].([]any)[0].(map[string]any)["gridPos"] = map[string]any{"h": 4, "w": 8, "x": 20}
		},
		"no panel": func(d map[string]any) { d["panels"] = []any{} },
	}
	for want, change := range breaks {
		t.Run(want, func(t *testing.T) {
			var d map[string]any
			require.NoError(t, json.Unmarshal([]byte(goodDashboard), &d))
			change(d)
			b, err := json.Marshal(d)
			require.NoError(t, err)
			err = ValidateDashboard(b)
			require.Error(t, err)
			assert.Contains(t, err.Error(), want)
		})
	}
}

func variables(d map[string]any) []map[string]any {
	var out []map[string]any
	for _, v := range d["templating"].(map[string]any)["list"].([]any) {
		out = append(out, v.(map[string]any))
	}
	return out
}

func panels(d map[string]any) []map[string]any {
	var out []map[string]any
	for _, p := range d["panels"].([]any) {
		out = append(out, p.(map[string]any))
	}
	return out
}

func targets(d map[string]any, panel int) []map[string]any {
	var out []map[string]any
	for _, t := range panels(d)[panel]["targets"].([]any) {
		out = append(out, t.(map[string]any))
	}
	return out
}

func TestVariableQuery(t *testing.T) {
	for in, want := range map[string]Query{
		`label_values(m{a="x,y", b=~'(c|d),'}, source)`: {Expr: `m{a="x,y", b=~'(c|d),'}`, Labels: []string{"source"}},
		"label_values(m{a=`\\`,b=\"\\\",\"}, le)":       {Expr: "m{a=`\\`,b=\"\\\",\"}", Labels: []string{"le"}},
		" label_values( job ) ":                         {Labels: []string{"job"}},
		"query_result(max(up) by (job))":                {Expr: "max(up) by (job)"},
		"sum(up)":                                       {Expr: "sum(up)"},
	} {
		got, ok := variableQuery(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"label_names()", "metrics(argocd_.*)", "  "} {
		_, ok := variableQuery(in)
		assert.False(t, ok, in)
	}
}

// TestChartKit: the chart's dashboard is valid, and every query of its
// alerts and its dashboard parses and names this service's metrics.
func TestChartKit(t *testing.T) {
	dash, err := os.ReadFile(filepath.Join(chartDir, DashboardFile))
	require.NoError(t, err)
	require.NoError(t, ValidateDashboard(dash))

	qs, err := ChartQueries(chartDir)
	require.NoError(t, err)
	alerts := 0
	for _, q := range qs {
		if strings.HasPrefix(q.Where, "alert ") {
			alerts++
		}
		uses, err := Parse(q.Expr)
		require.NoError(t, err, q.Where)
		if q.Expr != "" {
			assert.NotEmpty(t, uses.Selectors, "%s selects nothing", q.Where)
		}
		for _, s := range uses.Selectors {
			name := s.Metric + s.NameRegex
			ours := strings.HasPrefix(name, "argocd_cluster_discovery_") || name == "process_resident_memory_bytes" || name == "go_goroutines"
			assert.True(t, ours, "%s: %s is not a metric of this service", q.Where, name)
		}
	}
	assert.GreaterOrEqual(t, alerts, 10)
}
