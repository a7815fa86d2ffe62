package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
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
	// discover serves nothing: no server section needed
	noServer := filepath.Join(dir, "no-server.yaml")
	require.NoError(t, os.WriteFile(noServer, []byte("sources: [{name: one, provider: static, static: {clusters: [{name: a, server: 'https://a.example.com'}]}}]\n"), 0o600))

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
		{"discover needs no server section", []string{"discover", "--config", noServer, "--log-format", "text"}, 0, nil, `"name":"a"`},
		{"serve does", []string{"serve", "--config", noServer}, 2, []string{"server.tokens: Required value"}, ""},
		{"a log level that is none", []string{"serve", "--config", demoConfig, "--log-level", "verbose"}, 2,
			[]string{`invalid value "verbose" for flag -log-level: "verbose" is not one of [debug info warn error]`}, ""},
		{"a log format that is none", []string{"discover", "--config", demoConfig, "--log-format", "yaml"}, 2,
			[]string{`invalid value "yaml" for flag -log-format: "yaml" is not one of [json text]`}, ""},
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
			d := dashes(f.Name)
			assert.True(t, strings.Contains(u, " "+d+" ") || strings.Contains(u, "["+d+" ") || strings.Contains(u, "["+d+"]"), "%s %s", c.name, d)
		})
		assert.Positive(t, n)
		assert.Contains(t, u, "argocd-cluster-discovery "+c.name+" --config FILE")
	}
	for _, f := range []string{"--dry-run", "--secrets", "--check", "--no-credentials", "--ignore-errors"} {
		assert.Contains(t, u, f)
	}
}

// TestValidateReportsEveryProblem: validate resolves every credential
// reference (the plugin tokens, a source's own token, the bearer tokens of
// a file source's clusters) and builds every source, and reports all of
// their problems in one run, each with where it is, never a value.
func TestValidateReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	write("clusters.yaml", "clusters: [{name: a, server: 'https://a.example.com', auth: {bearerToken: {env: ACD_TEST_UNSET_BEARER}}},\n"+
		"  {name: b, server: 'https://b.example.com', auth: {bearerToken: {env: ACD_TEST_SET_BEARER}}}]\n")
	cfg := write("config.yaml", "server: {tokens: [{file: plugin-token}, {env: ACD_TEST_UNSET_PLUGIN}, {env: ACD_TEST_SHORT_PLUGIN}]}\n"+
		"sources:\n"+
		"- {name: r, provider: rancher, rancher: {url: 'https://rancher.example.com', token: {file: rancher-token}}}\n"+
		"- {name: s, provider: static, static: {file: clusters.yaml}}\n"+
		"- {name: gone, provider: static, static: {file: gone.yaml}}\n")
	t.Setenv("ACD_TEST_SET_BEARER", "a-bearer-token-value")
	t.Setenv("ACD_TEST_SHORT_PLUGIN", "short")

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"validate", "--config", cfg}, &stdout, &stderr)
	assert.Equal(t, 2, code)
	gone := filepath.Join(dir, "gone.yaml")
	assert.Equal(t, "invalid configuration:\n"+
		"server.tokens[0]: Invalid value: file:"+filepath.Join(dir, "plugin-token")+": no such file or directory\n"+
		"server.tokens[1]: Invalid value: env:ACD_TEST_UNSET_PLUGIN: not set\n"+
		"server.tokens[2]: Invalid value: env:ACD_TEST_SHORT_PLUGIN holds 5 characters: a plugin token needs at least 16 (the chart generates 48 random ones; e.g. openssl rand -hex 24)\n"+
		"sources[0].rancher.token: Invalid value: file:"+filepath.Join(dir, "rancher-token")+": no such file or directory\n"+
		"sources[1] (s): cluster a: bearer token env:ACD_TEST_UNSET_BEARER: not set\n"+
		"sources[2] (gone): read clusters file: open "+gone+": no such file or directory\n", stderr.String())
	assert.NotContains(t, stderr.String(), "a-bearer-token-value")
	assert.Empty(t, stdout.String())

	// without credentials, nothing is read but the file sources' files,
	// and the server section may be left out
	offline := write("offline.yaml", "sources:\n- {name: gone, provider: static, static: {file: gone.yaml}}\n"+
		"- {name: r, provider: rancher, rancher: {url: 'https://rancher.example.com', token: {file: rancher-token}}}\n")
	stderr.Reset()
	code = run(context.Background(), []string{"validate", "--config", offline, "--no-credentials"}, &stdout, &stderr)
	assert.Equal(t, 2, code)
	assert.Equal(t, "invalid configuration:\nsources[0] (gone): read clusters file: open "+gone+": no such file or directory\n", stderr.String())
	// serve needs its server section
	stderr.Reset()
	code = run(context.Background(), []string{"validate", "--config", offline}, &stdout, &stderr)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr.String(), "server.tokens: Required value")
}

// TestLogFlags: --log-level and --log-format override the file's log
// section, and only when given.
func TestLogFlags(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	l := declareLogFlags(fs)
	require.NoError(t, fs.Parse([]string{"--log-level", "debug"}))
	c := config.Log{Level: "info", Format: "json"}
	l.apply(&c)
	assert.Equal(t, config.Log{Level: "debug", Format: "json"}, c)
	require.NoError(t, fs.Parse([]string{"--log-format", "text"}))
	l.apply(&c)
	assert.Equal(t, config.Log{Level: "debug", Format: "text"}, c)
}

// TestREADMEUsage: the README's command list is the usage the binary
// prints, verbatim, so a new flag cannot be missing from it.
func TestREADMEUsage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "## Command line\n\n```\n"+usageText()+"```\n",
		"README.md's Command line block differs from the usage: paste the output of `go run ./cmd/argocd-cluster-discovery`")
}
