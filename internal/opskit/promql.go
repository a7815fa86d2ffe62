package opskit

import (
	"errors"
	"fmt"
	"strings"
)

// Selector is one vector selector of a PromQL expression: the metric it
// names (or, for {__name__=~"..."}, the regular expression of its names)
// and the label names of its matchers.
type Selector struct {
	// Metric is the metric name; "" when NameRegex is set.
	Metric string
	// NameRegex is the value of a __name__=~ matcher, unanchored as
	// written (PromQL anchors it).
	NameRegex string
	// Labels are the label names of the matchers, __name__ left out.
	Labels []string
}

// Name is the metric name, or the regular expression of the names in
// {__name__=~"..."} form.
func (s Selector) Name() string {
	if s.Metric != "" {
		return s.Metric
	}
	return `{__name__=~"` + s.NameRegex + `"}`
}

// Uses are what a PromQL expression names: its vector selectors, and the
// labels of its by, without, on, ignoring, group_left and group_right
// clauses.
type Uses struct {
	Selectors []Selector
	Grouping  []string
}

// The PromQL words that are neither metric names nor functions.
var (
	groupingWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
		"group_left": true, "group_right": true}
	aggregationWords = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true,
		"stddev": true, "stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true,
		"quantile": true, "limitk": true, "limit_ratio": true}
	otherWords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"atan2": true, "inf": true, "nan": true}
	matchOps = map[string]bool{"=": true, "!=": true, "=~": true, "!~": true}
)

// Parse reads the metric names and label names a PromQL expression uses.
// It is a lexer with just enough grammar for that, not a PromQL parser
// (the module github.com/prometheus/prometheus, whose parser this would
// be, is not a dependency of this one): strings, comments, durations and
// numbers are skipped; an identifier followed by "(" is a function or an
// aggregation; the parenthesised list after a grouping word holds labels;
// an identifier in braces followed by a match operator is a label; any
// other identifier that is not a keyword is a metric name. Grafana's
// variables ($var, ${var}) are skipped. It fails on unbalanced brackets,
// an unterminated string, and a selector without a metric name.
func Parse(expr string) (Uses, error) {
	toks, err := lex(expr)
	if err != nil {
		return Uses{}, err
	}
	p := &parser{toks: toks}
	if err := p.run(); err != nil {
		return Uses{}, err
	}
	return p.uses, nil
}

type parser struct {
	toks  []token
	i     int
	uses  Uses
	depth int
}

func (p *parser) peek(k int) token {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return token{}
}

func (p *parser) run() error {
	for p.i < len(p.toks) {
		t := p.toks[p.i]
		switch {
		case t.kind == tokIdent:
			if err := p.ident(t.text); err != nil {
				return err
			}
			continue
		case t.is("{"):
			// a selector without a metric name before its braces
			sel, err := p.matchers(Selector{})
			if err != nil {
				return err
			}
			if sel.Metric == "" && sel.NameRegex == "" {
				return fmt.Errorf("offset %d: a selector without a metric name", t.pos)
			}
			p.uses.Selectors = append(p.uses.Selectors, sel)
			continue
		case t.is("["):
			if err := p.skipBrackets(); err != nil {
				return err
			}
			continue
		case t.is("("):
			p.depth++
		case t.is(")"):
			p.depth--
			if p.depth < 0 {
				return fmt.Errorf("offset %d: unbalanced )", t.pos)
			}
		case t.is("}"), t.is("]"):
			return fmt.Errorf("offset %d: unbalanced %s", t.pos, t.text)
		}
		p.i++
	}
	if p.depth != 0 {
		return errors.New("unbalanced (")
	}
	return nil
}

// ident handles the identifier at p.i and moves past what it owns.
func (p *parser) ident(word string) error {
	lower := strings.ToLower(word)
	next := p.peek(1)
	switch {
	case groupingWords[lower]:
		p.i++
		if next.is("(") {
			return p.labelList()
		}
		return nil // group_left without a list
	case aggregationWords[lower], otherWords[lower], next.is("("):
		p.i++ // a function or an aggregation: its "(" is read as any other
		return nil
	}
	p.i++
	sel := Selector{Metric: word}
	if next.is("{") {
		var err error
		if sel, err = p.matchers(sel); err != nil {
			return err
		}
	}
	p.uses.Selectors = append(p.uses.Selectors, sel)
	return nil
}

// labelList reads "(a, b, ...)" at p.i into the grouping labels.
func (p *parser) labelList() error {
	open := p.toks[p.i]
	p.i++
	for ; p.i < len(p.toks); p.i++ {
		t := p.toks[p.i]
		switch {
		case t.is(")"):
			p.i++
			return nil
		case t.kind == tokIdent, t.kind == tokString:
			p.uses.Grouping = appendNew(p.uses.Grouping, t.text)
		case t.is(","):
		default:
			return fmt.Errorf("offset %d: %q in a label list", t.pos, t.text)
		}
	}
	return fmt.Errorf("offset %d: unterminated label list", open.pos)
}

// matchers reads "{label op value, ...}" at p.i into sel.
func (p *parser) matchers(sel Selector) (Selector, error) {
	open := p.toks[p.i]
	p.i++
	for ; p.i < len(p.toks); p.i++ {
		t := p.toks[p.i]
		switch {
		case t.is("}"):
			p.i++
			return sel, nil
		case t.is(","):
		case t.kind == tokIdent || t.kind == tokString:
			op, value := p.peek(1), p.peek(2)
			if !matchOps[op.text] || op.kind != tokOp {
				if t.kind == tokString && sel.Metric == "" { // {"metric.name", ...}
					sel.Metric = t.text
					continue
				}
				return sel, fmt.Errorf("offset %d: %q is not followed by a match operator", t.pos, t.text)
			}
			if value.kind != tokString && value.kind != tokVariable {
				return sel, fmt.Errorf("offset %d: the matcher of %q has no string value", t.pos, t.text)
			}
			switch {
			case t.text == "__name__" && op.text == "=":
				sel.Metric = value.text
			case t.text == "__name__" && op.text == "=~":
				sel.NameRegex = value.text
			case t.text != "__name__":
				sel.Labels = appendNew(sel.Labels, t.text)
			}
			p.i += 2
		default:
			return sel, fmt.Errorf("offset %d: %q in a selector", t.pos, t.text)
		}
	}
	return sel, fmt.Errorf("offset %d: unterminated selector", open.pos)
}

// skipBrackets moves past "[...]" at p.i (a range, a subquery's range and
// step): durations, not names.
func (p *parser) skipBrackets() error {
	open := p.toks[p.i]
	for p.i++; p.i < len(p.toks); p.i++ {
		if p.toks[p.i].is("]") {
			p.i++
			return nil
		}
		if p.toks[p.i].is("[") {
			return fmt.Errorf("offset %d: [ inside [", p.toks[p.i].pos)
		}
	}
	return fmt.Errorf("offset %d: unterminated [", open.pos)
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
