package config

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/fuzzseed"
)

// fieldLine is one validation problem: it starts with the field it
// concerns, from the root of the file (sources[1].eks.regions: ...).
var fieldLine = regexp.MustCompile(`^[a-z][A-Za-z0-9]*(\[[0-9]+\])?(\.[A-Za-z0-9_-]+(\[[0-9]+\])?)*: \S`)

// FuzzParseConfig feeds any document to Parse:
//   - it never panics; an error comes with a nil configuration;
//   - a decoder error starts with "parse: ", and every line of a
//     validation error starts with the field it concerns;
//   - an accepted configuration validates again (Validate is idempotent,
//     although it applies the eks and aks defaults), has every source's
//     interval ≥ 1s and timeout > 0, and absolute token files;
//   - its effective form (JSON(), the start-up log line) is valid JSON that
//     Parse accepts and maps to the same effective form: what is logged is
//     exactly what runs.
//
// Run it with: go test ./cmd/argocd-cluster-discovery/config -run '^$' -fuzz '^FuzzParseConfig$' -fuzztime 1m
func FuzzParseConfig(f *testing.F) {
	fuzzseed.Add(f, "testdata/demo/config.yaml", "deploy/examples/config.yaml")
	const dir = "/etc/acd"
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := Parse(raw, dir)
		if err != nil {
			if cfg != nil {
				t.Fatal("error with a non-nil configuration")
			}
			checkErrorNamesFields(t, err)
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted configuration fails a second Validate: %v", err)
		}
		for i, s := range cfg.Sources {
			if s.Interval.Std() < time.Second || s.Timeout.Std() <= 0 {
				t.Fatalf("sources[%d]: interval %s, timeout %s accepted", i, s.Interval.Std(), s.Timeout.Std())
			}
		}
		for i, tok := range cfg.Server.Tokens {
			if tok.File != "" && !filepath.IsAbs(tok.File) {
				t.Fatalf("server.tokens[%d].file %q is not absolute", i, tok.File)
			}
		}
		eff := cfg.JSON()
		if !json.Valid(eff) {
			t.Fatalf("JSON() is not JSON: %s", eff)
		}
		again, err := Parse(eff, dir)
		if err != nil {
			t.Fatalf("the effective configuration does not parse back: %v\n%s", err, eff)
		}
		if eff2 := again.JSON(); !bytes.Equal(eff, eff2) {
			t.Fatalf("the effective configuration changes when parsed back:\nfirst:  %s\nsecond: %s", eff, eff2)
		}
	})
}

func checkErrorNamesFields(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if msg == "" {
		t.Fatal("empty error")
	}
	if strings.HasPrefix(msg, "parse: ") {
		return
	}
	for _, line := range strings.Split(msg, "\n") {
		if !fieldLine.MatchString(line) {
			t.Fatalf("validation problem %q does not start with its field (whole error: %q)", line, msg)
		}
	}
}
