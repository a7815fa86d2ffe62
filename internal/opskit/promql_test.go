package opskit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		expr     string
		want     []Selector
		grouping []string
	}{
		{name: "a bare metric", expr: "up", want: []Selector{{Metric: "up"}}},
		{name: "matchers, functions and a range",
			expr: `sum by (source, le) (rate(a_bucket{namespace=~"$namespace", source!="x"}[$__rate_interval]))`,
			want: []Selector{{Metric: "a_bucket", Labels: []string{"namespace", "source"}}}, grouping: []string{"source", "le"}},
		{name: "aggregation clause after its argument", expr: `max(a) without (instance)`,
			want: []Selector{{Metric: "a"}}, grouping: []string{"instance"}},
		{name: "binary operators with on, unless, bool and group_left",
			expr: "a > bool 0 unless on (namespace, job) (b == 0) * on (x) group_left (y, z) c and d offset 5m",
			want: []Selector{{Metric: "a"}, {Metric: "b"}, {Metric: "c"}, {Metric: "d"}}, grouping: []string{"namespace", "job", "x", "y", "z"}},
		{name: "group_left without a list", expr: "a * on (x) group_left b",
			want: []Selector{{Metric: "a"}, {Metric: "b"}}, grouping: []string{"x"}},
		{name: "__name__ matchers", expr: `rate({__name__=~"a_(x|y)_total", source="s"}[5m]) + {__name__="b"}`,
			want: []Selector{{NameRegex: "a_(x|y)_total", Labels: []string{"source"}}, {Metric: "b"}}},
		{name: "a quoted metric name", expr: `{"my.metric", le="1"}`,
			want: []Selector{{Metric: "my.metric", Labels: []string{"le"}}}},
		{name: "numbers, durations, strings and a subquery are no names",
			expr: "histogram_quantile(0.95, x) > 1e-3 or label_replace(y, \"dst\", 'v', \"src\", `(.*)`) or max_over_time(z[1h:5m]) @ start()",
			want: []Selector{{Metric: "x"}, {Metric: "y"}, {Metric: "z"}}},
		{name: "keywords in any case, inf and nan", expr: "A > Inf OR B < NaN", want: []Selector{{Metric: "A"}, {Metric: "B"}}},
		{name: "time() and vector() name nothing", expr: "time() - max by (source) (t) or vector(0)",
			want: []Selector{{Metric: "t"}}, grouping: []string{"source"}},
		{name: "a comment", expr: "a # b c\n+ d", want: []Selector{{Metric: "a"}, {Metric: "d"}}},
		{name: "a recording rule's name", expr: "job:up:sum", want: []Selector{{Metric: "job:up:sum"}}},
		{name: "a label value with an escaped dot", expr: `a{route=~".*/getparams\\.execute"}`,
			want: []Selector{{Metric: "a", Labels: []string{"route"}}}},
		{name: "grafana variables in braces", expr: `a{job=~"${job:regex}", x=$v}`,
			want: []Selector{{Metric: "a", Labels: []string{"job", "x"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.expr)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Selectors)
			assert.Equal(t, tt.grouping, got.Grouping)
		})
	}
}

func TestParseRejects(t *testing.T) {
	for expr, want := range map[string]string{
		`sum(a`:             "unbalanced (",
		`sum(a))`:           "unbalanced )",
		`a{b="c"`:           "unterminated selector",
		`a{b="c}`:           "unterminated string",
		`a{b}`:              "not followed by a match operator",
		`a{b=c}`:            "no string value",
		`rate(a[5m)`:        "unterminated [",
		`{job="x"}`:         "without a metric name",
		`sum by (a b) (c)`:  "",
		`sum by (a, "b") c`: "",
		`a ; b`:             "unexpected",
		`a{b="c"}]`:         "unbalanced ]",
		`by (a`:             "unterminated label list",
	} {
		_, err := Parse(expr)
		if want == "" {
			assert.NoError(t, err, expr)
			continue
		}
		if assert.Error(t, err, expr) {
			assert.Contains(t, err.Error(), want, expr)
		}
	}
}
