// Package chartgen writes what the provider registry decides in files
// that are not Go: the chart's values schema for a source (the provider
// enum, one section per provider, a rule that requires a source's own
// section and forbids the others') and the depguard rules that keep the
// providers apart (no provider imports another). cmd/chartgen runs it
// (go generate ./cmd/argocd-cluster-discovery/config); a test and make
// lint fail when a file differs from what it writes.
package chartgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Module is this repository's Go module.
const Module = "github.com/argocd-cluster-discovery/argocd-cluster-discovery"

// sourceKeys are the keys of a source that belong to no provider.
var sourceKeys = []string{"name", "provider", "interval", "timeout", "trust"}

// Schema returns the chart's values schema base with its
// definitions.source made from reg: every other part is kept as written.
func Schema(base []byte, reg *sources.Registry) ([]byte, error) {
	top, err := parseObject(base)
	if err != nil {
		return nil, fmt.Errorf("values schema: %w", err)
	}
	defsRaw, _ := top.get("definitions")
	defs, err := parseObject(defsRaw)
	if err != nil {
		return nil, fmt.Errorf("values schema: definitions: %w", err)
	}
	srcRaw, _ := defs.get("source")
	src, err := parseObject(srcRaw)
	if err != nil {
		return nil, fmt.Errorf("values schema: definitions.source: %w", err)
	}
	propsRaw, _ := src.get("properties")
	props, err := parseObject(propsRaw)
	if err != nil {
		return nil, fmt.Errorf("values schema: definitions.source.properties: %w", err)
	}
	names := providerNames(reg)
	var kept object
	for _, m := range props {
		if slices.Contains(sourceKeys, m.Key) {
			kept = append(kept, m)
		}
	}
	kept.set("provider", raw(object{{Key: "enum", Value: raw(names)}}))
	rules := make([]object, 0, len(names))
	for _, n := range names {
		r, _ := reg.Lookup(sources.Provider(n))
		s, ok := r.(sources.Schema)
		if !ok {
			return nil, fmt.Errorf("provider %s: its registration has no ConfigSchema (sources.Schema)", n)
		}
		if !json.Valid(s.ConfigSchema()) {
			return nil, fmt.Errorf("provider %s: ConfigSchema is not JSON", n)
		}
		kept.set(n, s.ConfigSchema())
		rules = append(rules, rule(n, names))
	}
	src.set("properties", raw(kept))
	src.set("allOf", raw(rules))
	defs.set("source", raw(src))
	top.set("definitions", raw(defs))
	return indented(top)
}

// rule requires the section of provider p and forbids the others'.
func rule(p string, names []string) object {
	others := object{}
	for _, o := range names {
		if o != p {
			others = append(others, member{Key: o, Value: raw(false)})
		}
	}
	return object{
		{Key: "if", Value: raw(object{
			{Key: "properties", Value: raw(object{{Key: "provider", Value: raw(object{{Key: "const", Value: raw(p)}})}})},
			{Key: "required", Value: raw([]string{"provider"})},
		})},
		{Key: "then", Value: raw(object{
			{Key: "required", Value: raw([]string{p})},
			{Key: "properties", Value: raw(others)},
		})},
	}
}

// The lines of .golangci.yml between which Depguard writes.
const (
	depguardBegin = "        # generated from the provider registry by cmd/chartgen (go generate ./cmd/argocd-cluster-discovery/config): do not edit\n"
	depguardEnd   = "        # end of the generated provider rules\n"
)

// Depguard returns the golangci-lint configuration base with the rules
// between its markers made from reg: one per provider, denying it the
// package of every other provider.
func Depguard(base []byte, reg *sources.Registry) ([]byte, error) {
	i := bytes.Index(base, []byte(depguardBegin))
	j := bytes.Index(base, []byte(depguardEnd))
	if i < 0 || j < i {
		return nil, fmt.Errorf("golangci-lint configuration: the generated provider rules' markers are missing")
	}
	pkgs := map[string]string{}
	names := providerNames(reg)
	for _, n := range names {
		r, _ := reg.Lookup(sources.Provider(n))
		pkg := reflect.TypeOf(r).PkgPath()
		if !strings.HasPrefix(pkg, Module+"/") {
			return nil, fmt.Errorf("provider %s: package %s is not in %s", n, pkg, Module)
		}
		pkgs[n] = pkg
	}
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "        provider-%s:\n          files:\n            - \"${config-path}/%s/**.go\"\n          deny:\n", n, strings.TrimPrefix(pkgs[n], Module+"/"))
		for _, o := range names {
			if o != n {
				fmt.Fprintf(&b, "            - pkg: %s\n              desc: no provider imports another; share through sources/ or sources/upstream\n", pkgs[o])
			}
		}
	}
	return slices.Concat(base[:i+len(depguardBegin)], []byte(b.String()), base[j:]), nil
}

// providerNames are reg's provider names, sorted.
func providerNames(reg *sources.Registry) []string {
	var names []string
	for _, n := range reg.Names() {
		names = append(names, string(n))
	}
	return names
}
