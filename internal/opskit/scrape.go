package opskit

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TargetLabels are the labels Prometheus gives every scraped series (the
// job and instance of the target, and what the Prometheus Operator's
// ServiceMonitor adds from the Kubernetes objects): a query may name them
// although /metrics does not export them.
var TargetLabels = []string{"job", "instance", "namespace", "pod", "service", "container", "endpoint"}

// Exported are the series names of one scrape of /metrics, each with the
// label names its samples carry: a histogram's as name_bucket (with le),
// name_sum and name_count, as PromQL sees them.
type Exported struct {
	series map[string]map[string]bool
}

// ParseScrape reads a scrape in Prometheus' text format. A family without
// a sample (HELP and TYPE only) is not exported: PromQL finds nothing.
func ParseScrape(r io.Reader) (*Exported, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse the scrape: %w", err)
	}
	e := &Exported{series: map[string]map[string]bool{}}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				e.add(name+"_bucket", append(slices.Clone(labels), "le"))
				e.add(name+"_sum", labels)
				e.add(name+"_count", labels)
			case dto.MetricType_SUMMARY:
				e.add(name, append(slices.Clone(labels), "quantile"))
				e.add(name+"_sum", labels)
				e.add(name+"_count", labels)
			default:
				e.add(name, labels)
			}
		}
	}
	return e, nil
}

func (e *Exported) add(name string, labels []string) {
	set := e.series[name]
	if set == nil {
		set = map[string]bool{}
		e.series[name] = set
	}
	for _, l := range labels {
		set[l] = true
	}
}

// Names are the exported series names, sorted.
func (e *Exported) Names() []string {
	out := make([]string, 0, len(e.series))
	for n := range e.series {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Has reports whether the series name is exported.
func (e *Exported) Has(name string) bool { return e.series[name] != nil }

// match returns the label sets of the series a selector selects.
func (e *Exported) match(s Selector) ([]map[string]bool, error) {
	if s.Metric != "" {
		if set := e.series[s.Metric]; set != nil {
			return []map[string]bool{set}, nil
		}
		return nil, nil
	}
	re, err := regexp.Compile("^(?:" + s.NameRegex + ")$")
	if err != nil {
		return nil, fmt.Errorf("__name__=~%q: %w", s.NameRegex, err)
	}
	var out []map[string]bool
	for _, n := range e.Names() {
		if re.MatchString(n) {
			out = append(out, e.series[n])
		}
	}
	return out, nil
}

// Finding is a metric, or a label of a metric, that a query names and the
// scrape lacks.
type Finding struct {
	// Where is the query's place: "alert NAME", `panel 3 "Title" target A`, "variable NAME".
	Where string
	// Metric is the metric name the query selects ({__name__=~"..."} for a
	// regular expression); "" for a label of a by/on/... clause.
	Metric string
	// Label is the missing label; "" when the metric itself is missing.
	Label string
}

func (f Finding) String() string {
	switch {
	case f.Label == "":
		return fmt.Sprintf("%s: metric %s is not exported", f.Where, f.Metric)
	case f.Metric == "":
		return fmt.Sprintf("%s: label %s is on none of the query's metrics", f.Where, f.Label)
	}
	return fmt.Sprintf("%s: metric %s has no label %s", f.Where, f.Metric, f.Label)
}

// Missing returns what the queries name that the scrape does not export:
// each metric none of whose series is there, each label a selector
// matches on that its metric's series lack, and each label of a grouping
// clause (by, on, ...) or of a Grafana label_values query that none of
// the query's metrics carries. TargetLabels are always there. The labels
// of the grouping clauses of a query that names a missing metric are not
// checked (they may be that metric's). A query that does not parse is an
// error, after the findings of the others.
func (e *Exported) Missing(queries []Query) ([]Finding, error) {
	var out []Finding
	var errs []error
	for _, q := range queries {
		if strings.TrimSpace(q.Expr) == "" { // label_values(label): any series
			for _, l := range q.Labels {
				if !isTargetLabel(l) && !e.anyLabel(l) {
					out = append(out, Finding{Where: q.Where, Label: l})
				}
			}
			continue
		}
		uses, err := Parse(q.Expr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", q.Where, err))
			continue
		}
		found, sawMissing := map[string]bool{}, false
		for _, s := range uses.Selectors {
			sets, err := e.match(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", q.Where, err))
				continue
			}
			if len(sets) == 0 {
				out = append(out, Finding{Where: q.Where, Metric: s.Name()})
				sawMissing = true
				continue
			}
			for _, set := range sets {
				for l := range set {
					found[l] = true
				}
			}
			for _, l := range s.Labels {
				if !isTargetLabel(l) && !anyHas(sets, l) {
					out = append(out, Finding{Where: q.Where, Metric: s.Name(), Label: l})
				}
			}
		}
		if sawMissing {
			continue
		}
		for _, l := range append(slices.Clone(uses.Grouping), q.Labels...) {
			if !isTargetLabel(l) && !found[l] {
				out = append(out, Finding{Where: q.Where, Label: l})
			}
		}
	}
	return out, errors.Join(errs...)
}

func (e *Exported) anyLabel(l string) bool {
	for _, set := range e.series {
		if set[l] {
			return true
		}
	}
	return false
}

func isTargetLabel(l string) bool { return slices.Contains(TargetLabels, l) }

func anyHas(sets []map[string]bool, l string) bool {
	for _, s := range sets {
		if s[l] {
			return true
		}
	}
	return false
}

// MissingMetrics are the distinct metric names of findings, sorted: what a
// caller that expects some metrics to be absent (a mode without Secret
// sync, a provider not configured) compares with its list.
func MissingMetrics(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		if f.Label == "" {
			out = appendNew(out, f.Metric)
		}
	}
	sort.Strings(out)
	return out
}
