package opskit

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// DatasourceVariable is the dashboard's data source variable: every panel
// and query variable reads from it, so the dashboard works with whatever
// Prometheus data source a Grafana has (a dashboard loaded by Grafana's
// sidecar from a ConfigMap gets no import-time ${DS_...} inputs).
const DatasourceVariable = "datasource"

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	GridPos    struct {
		H int `json:"h"`
		W int `json:"w"`
		X int `json:"x"`
		Y int `json:"y"`
	} `json:"gridPos"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"` // a row's, when collapsed
}

type target struct {
	RefID      string          `json:"refId"`
	Expr       string          `json:"expr"`
	Datasource json.RawMessage `json:"datasource"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource json.RawMessage `json:"datasource"`
}

// queryText is the variable's query: a string, or {"query": "..."}.
func (v variable) queryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(v.Query, &o) == nil {
		return o.Query
	}
	return ""
}

// allPanels are the panels, each row's nested ones included.
func (d *dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// templated reports whether a datasource reference is the data source
// variable: "${datasource}", "$datasource", or an object whose uid is.
func templated(raw json.RawMessage) bool {
	ok := func(s string) bool { return s == "${"+DatasourceVariable+"}" || s == "$"+DatasourceVariable }
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return ok(s)
	}
	var o struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return ok(o.UID) && (o.Type == "" || o.Type == "prometheus")
	}
	return false
}

// ValidateDashboard checks a Grafana dashboard's JSON: a uid and a title;
// the data source variable (type datasource, query prometheus); every
// panel but a row with a unique id, a place in the 24-column grid, the
// data source variable as its data source and at least one target, each
// target with a unique refId, a non-empty expr and, if it names one, the
// data source variable; every query variable reading from the data
// source variable, with a query. It returns every problem found.
func ValidateDashboard(data []byte) error {
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return err
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if d.UID == "" || d.Title == "" {
		fail("the dashboard needs a uid and a title")
	}
	hasDS := false
	for _, v := range d.Templating.List {
		switch {
		case v.Name == DatasourceVariable:
			hasDS = v.Type == "datasource" && v.queryText() == "prometheus"
		case v.Type == "query":
			if !templated(v.Datasource) {
				fail("variable %s: its datasource is not ${%s}", v.Name, DatasourceVariable)
			}
			if strings.TrimSpace(v.queryText()) == "" {
				fail("variable %s: no query", v.Name)
			}
		}
	}
	if !hasDS {
		fail("no variable %q of type datasource with query prometheus", DatasourceVariable)
	}
	panels := d.allPanels()
	if len(panels) == 0 {
		fail("no panel")
	}
	ids := map[int]bool{}
	for _, p := range panels {
		name := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID <= 0 || ids[p.ID] {
			fail("%s: its id is not unique and positive", name)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			fail("%s: gridPos is outside the 24-column grid", name)
		}
		if p.Type == "row" {
			continue
		}
		if strings.TrimSpace(p.Title) == "" {
			fail("%s: no title", name)
		}
		if !templated(p.Datasource) {
			fail("%s: its datasource is not ${%s}", name, DatasourceVariable)
		}
		if len(p.Targets) == 0 {
			fail("%s: no target", name)
		}
		refs := map[string]bool{}
		for _, t := range p.Targets {
			if t.RefID == "" || refs[t.RefID] {
				fail("%s: target refId %q is empty or not unique", name, t.RefID)
			}
			refs[t.RefID] = true
			if strings.TrimSpace(t.Expr) == "" {
				fail("%s target %s: no expr", name, t.RefID)
			}
			if len(t.Datasource) > 0 && string(t.Datasource) != "null" && !templated(t.Datasource) {
				fail("%s target %s: its datasource is not ${%s}", name, t.RefID, DatasourceVariable)
			}
		}
	}
	return errors.Join(errs...)
}
