// Package opskit reads the operations kit the Helm chart ships, the alert
// rules (files/alerts.yaml, a plain Prometheus rule file) and the Grafana
// dashboard (files/dashboard.json), and checks them against what the
// service exports: Missing compares every metric and label their PromQL
// names with a scrape of /metrics, since an alert on a metric that does
// not exist never fires and a panel on one stays empty, silently.
// ValidateDashboard checks the dashboard's shape (a query in every panel,
// the data source a variable).
//
// The deploy tests run it against the demo binary; the e2e suite against
// a deployment with every source and Secret sync on:
//
//	qs, err := opskit.ChartQueries("deploy/helm/argocd-cluster-discovery")
//	exported, err := opskit.ParseScrape(resp.Body)
//	findings, err := exported.Missing(qs)
package opskit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// The kit's files, relative to the chart's directory.
const (
	AlertsFile    = "files/alerts.yaml"
	DashboardFile = "files/dashboard.json"
)

// Query is one PromQL expression of the kit.
type Query struct {
	// Where names it: "alert NAME", "record NAME", `panel 3 "Title" target A`, "variable NAME".
	Where string
	// Expr is the PromQL expression ("" for a label_values query of one label only).
	Expr string
	// Labels are label names the query needs besides those of Expr: the
	// label of a Grafana label_values(selector, label) query.
	Labels []string
}

// ChartQueries reads the queries of the alerts and of the dashboard of the
// chart in chartDir.
func ChartQueries(chartDir string) ([]Query, error) {
	rules, err := os.ReadFile(filepath.Join(chartDir, AlertsFile))
	if err != nil {
		return nil, err
	}
	dash, err := os.ReadFile(filepath.Join(chartDir, DashboardFile))
	if err != nil {
		return nil, err
	}
	qa, err := AlertQueries(rules)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", AlertsFile, err)
	}
	qd, err := DashboardQueries(dash)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DashboardFile, err)
	}
	return append(qa, qd...), nil
}

// RuleFile is a Prometheus rule file, the fields the kit uses.
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is one group of a rule file.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is an alerting or a recording rule.
type Rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ParseRules reads a rule file, strictly: an unknown field is an error.
func ParseRules(data []byte) (*RuleFile, error) {
	var f RuleFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, err
	}
	if len(f.Groups) == 0 {
		return nil, errors.New("no rule groups")
	}
	return &f, nil
}

// AlertQueries returns the expression of every rule of a rule file.
func AlertQueries(data []byte) ([]Query, error) {
	f, err := ParseRules(data)
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			where := "alert " + r.Alert
			if r.Alert == "" {
				where = "record " + r.Record
			}
			out = append(out, Query{Where: where, Expr: r.Expr})
		}
	}
	return out, nil
}

// DashboardQueries returns the expression of every target of every panel
// of a Grafana dashboard (the panels of rows included) and the queries of
// its query variables: label_values(selector, label) as the selector and
// the label, query_result(expr) as the expression.
func DashboardQueries(data []byte) ([]Query, error) {
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	var out []Query
	for _, p := range d.allPanels() {
		for _, t := range p.Targets {
			out = append(out, Query{Where: fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, t.RefID), Expr: t.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, ok := variableQuery(v.queryText())
		if ok {
			q.Where = "variable " + v.Name
			out = append(out, q)
		}
	}
	return out, nil
}

// variableQuery reads the query of a Grafana Prometheus query variable;
// false for the functions that name no metric (label_names(), metrics()).
func variableQuery(s string) (Query, bool) {
	s = strings.TrimSpace(s)
	inner := func(prefix string) (string, bool) {
		if !strings.HasPrefix(s, prefix+"(") || !strings.HasSuffix(s, ")") {
			return "", false
		}
		return strings.TrimSpace(s[len(prefix)+1 : len(s)-1]), true
	}
	if in, ok := inner("label_values"); ok {
		cut := lastTopLevelComma(in)
		if cut < 0 {
			return Query{Labels: []string{in}}, true
		}
		return Query{Expr: strings.TrimSpace(in[:cut]), Labels: []string{strings.TrimSpace(in[cut+1:])}}, true
	}
	if in, ok := inner("query_result"); ok {
		return Query{Expr: in}, true
	}
	if strings.HasPrefix(s, "label_names(") || strings.HasPrefix(s, "metrics(") {
		return Query{}, false
	}
	return Query{Expr: s}, s != ""
}

// lastTopLevelComma is the index of the last comma outside brackets and
// strings, -1 if none.
func lastTopLevelComma(s string) int {
	depth, last := 0, -1
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && quote != '`' && c == '\\':
			i++ // the escaped character
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
		case c == '(' || c == '{' || c == '[':
			depth++
		case c == ')' || c == '}' || c == ']':
			depth--
		case c == ',' && depth == 0:
			last = i
		}
	}
	return last
}
