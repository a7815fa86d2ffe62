package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCLIErrors: every command's exit code and message for bad usage and
// bad configuration; a configuration error (exit 2) stops everything
// before the start.
func TestCLIErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("server:\n  listen: ''\nsources: []\n"), 0o600))
	unknown := filepath.Join(dir, "unknown.yaml")
	require.NoError(t, os.WriteFile(unknown, []byte("sever: {}\n"), 0o600))
	// valid as a file, but its static file is missing and its token file
	// unreadable: problems found when the sources are built, still before
	// anything starts
	noFile := filepath.Join(dir, "no-file.yaml")
	require.NoError(t, os.WriteFile(noFile, []byte("server: {tokens: [{env: ACD_TEST_TOKEN}]}\n"+
		"sources: [{name: one, provider: static, static: {file: gone.yaml}}]\n"), 0o600))
	noToken := filepath.Join(dir, "no-token.yaml")
	require.NoError(t, os.WriteFile(noToken, []byte("server: {listen: '127.0.0.1:0', tokens: [{file: missing-token}]}\n"+
		"sources: [{name: one, provider: static, static: {clusters: [{name: a, server: 'https://a.example.com'}]}}]\n"), 0o600))
	t.Setenv("ACD_TEST_TOKEN", "t")

	cases := []struct {
		name   string
		args   []string
		code   int
		stderr []string
		stdout string
	}{
		{"no command", nil, 2, []string{"usage:"}, ""},
		{"help", []string{"-h"}, 0, nil, "usage:"},
		{"a command's help", []string{"serve", "-h"}, 0, nil, ""},
		{"an unknown flag", []string{"discover", "--chek"}, 2, []string{"flag provided but not defined: -chek", "usage: argocd-cluster-discovery discover --config FILE"}, ""},
		{"unknown command", []string{"serv"}, 2, []string{`unknown command "serv"`}, ""},
		{"version", []string{"version"}, 0, nil, "argocd-cluster-discovery dev"},
		{"serve without config", []string{"serve"}, 2, []string{"--config is required"}, ""},
		{"invalid config names fields", []string{"serve", "--config", bad}, 2, []string{"server.listen: Required value", "server.tokens: Required value", "sources: Required value: at least one source"}, ""},
		{"unknown key", []string{"discover", "--config", unknown}, 2, []string{"sever: Forbidden: unknown key"}, ""},
		{"validate a valid file", []string{"validate", "--config", demoConfig}, 0, nil, "configuration is valid: 2 source(s)"},
		{"validate reports every problem", []string{"validate", "--config", bad}, 2, []string{"server.listen: Required value", "sources: Required value"}, ""},
		{"validate builds the sources", []string{"validate", "--config", noFile}, 2, []string{"invalid configuration", "sources[0] (one)", filepath.Join(dir, "gone.yaml")}, ""},
		{"validate without credentials still reads static files", []string{"validate", "--config", noFile, "--no-credentials"}, 2, []string{filepath.Join(dir, "gone.yaml")}, ""},
		{"validate without credentials reads no token", []string{"validate", "--config", noToken, "--no-credentials"}, 0, nil, "configuration is valid: 1 source(s)"},
		{"serve: a missing static file is a configuration error", []string{"serve", "--config", noFile}, 2, []string{"invalid configuration", filepath.Join(dir, "gone.yaml")}, ""},
		{"serve: an unreadable token file exits 2 before starting", []string{"serve", "--config", noToken}, 2, []string{"invalid configuration", "server.tokens"}, ""},
		{"missing file", []string{"serve", "--config", filepath.Join(dir, "nope.yaml")}, 2, []string{"read config"}, ""},
		{"discover bad input", []string{"discover", "--config", demoConfig, "--input", `{"parameters":{"tennant":"x"}}`}, 2, []string{`unknown key "tennant"`}, ""},
		{"discover unknown source", []string{"discover", "--config", demoConfig, "--input", `{"parameters":{"source":"x"}}`}, 2, []string{`no source named "x"`}, ""},
		{"discover not json", []string{"discover", "--config", demoConfig, "--input", `tenant=acme`}, 2, []string{"--input must be a JSON object"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			assert.Equal(t, tc.code, code, stderr.String())
			for _, s := range tc.stderr {
				assert.Contains(t, stderr.String(), s)
			}
			if tc.code == 2 {
				assert.NotContains(t, stderr.String(), "starting", "a configuration error stops everything before the start")
			}
			assert.Contains(t, stdout.String(), tc.stdout)
		})
	}
}

// TestUsageListsEveryFlag: the usage is made from the commands' flag sets,
// so it names every flag each command takes.
func TestUsageListsEveryFlag(t *testing.T) {
	u := usageText()
	for _, c := range commands {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		configFlag(fs)
		c.flags(fs)
		n := 0
		fs.VisitAll(func(f *flag.Flag) {
			n++
			assert.Contains(t, u, "--"+f.Name, "%s --%s", c.name, f.Name)
		})
		assert.Positive(t, n)
		assert.Contains(t, u, "argocd-cluster-discovery "+c.name+" --config FILE")
	}
	for _, f := range []string{"--dry-run", "--secrets", "--check", "--no-credentials", "--ignore-errors"} {
		assert.Contains(t, u, f)
	}
}
