package config

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/fuzzseed"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// FuzzParseConfig feeds any document to Parse:
//   - it never panics; an error comes with a nil configuration;
//   - a decoder error starts with "parse: "; any other error is the list
//     of Errors, each with its path, printed one per line, sorted, each
//     line starting with its path;
//   - an accepted configuration validates again (Validate changes
//     nothing), has every source's effective interval ≥ 1s and timeout
//     > 0, and absolute token and static files;
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
		if errs := cfg.Validate(); len(errs) > 0 {
			t.Fatalf("accepted configuration fails a second Validate: %v", errs)
		}
		checkAccepted(t, cfg)
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

func checkAccepted(t *testing.T, cfg *Config) {
	t.Helper()
	for i := range cfg.Sources {
		s := &cfg.Sources[i]
		if iv, to := cfg.EffectiveInterval(s), cfg.EffectiveTimeout(s); iv < time.Second || to <= 0 {
			t.Fatalf("sources[%d]: interval %s, timeout %s accepted", i, iv, to)
		}
		if sc, ok := s.Section.(*static.Config); ok && sc.File != "" && !filepath.IsAbs(sc.File) {
			t.Fatalf("sources[%d].static.file %q is not absolute", i, sc.File)
		}
	}
	for i, tok := range cfg.Server.Tokens {
		if tok.File != "" && !filepath.IsAbs(tok.File) {
			t.Fatalf("server.tokens[%d].file %q is not absolute", i, tok.File)
		}
	}
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
	errs := Errors(err)
	if len(errs) == 0 {
		t.Fatalf("an error that is neither a parse error nor a list of field errors: %q", msg)
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		if e.Field == "" {
			t.Fatalf("problem without a path: %q", e.Error())
		}
		if lines[i] = e.Error(); !strings.HasPrefix(lines[i], e.Field+": ") {
			t.Fatalf("problem %q does not start with its path %q", lines[i], e.Field)
		}
	}
	sort.Strings(lines)
	if want := strings.Join(lines, "\n"); msg != want {
		t.Fatalf("the error is not its problems one per line, sorted:\ngot:  %q\nwant: %q", msg, want)
	}
}
