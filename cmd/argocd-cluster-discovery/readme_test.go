package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// quickstart is what the README's first screen tells a new user to run.
type quickstart struct {
	makeRun, makeTest   string // the comments of make run and make test
	origin, path, token string // the curl's URL and bearer token
	body                string // its request body
	sample              []map[string]any
	discoverConfig      string // the discover command's --config and --input
	discoverInput       string
}

var (
	readmeCurl = regexp.MustCompile("(?s)```bash\ncurl -s (http://[^/ ]+)(/\\S+) \\\\\n\\s+-H 'Authorization: Bearer (\\S+)' " +
		"-H 'Content-Type: application/json' \\\\\n\\s+-d '([^']*)'\n```\n\n```json\n(.*?)```")
	readmeDiscover = regexp.MustCompile("`go run ./cmd/argocd-cluster-discovery discover --config (\\S+) --input '([^']*)'`")
	readmeMake     = regexp.MustCompile("(?m)^make (run|test) +# (.*)$")
)

// readQuickstart reads the README's first commands; it fails when one of
// them is not where a new user finds it.
func readQuickstart(t *testing.T) quickstart {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(b)
	var q quickstart
	m := readmeCurl.FindStringSubmatch(readme)
	require.NotNil(t, m, "the README's curl and its answer")
	q.origin, q.path, q.token, q.body = m[1], m[2], m[3], m[4]
	var sample struct {
		Output struct {
			Parameters []map[string]any `json:"parameters"`
		} `json:"output"`
	}
	require.NoError(t, json.Unmarshal([]byte(m[5]), &sample), "the README's sample answer is JSON")
	q.sample = sample.Output.Parameters
	d := readmeDiscover.FindStringSubmatch(readme)
	require.NotNil(t, d, "the README's discover command")
	q.discoverConfig, q.discoverInput = d[1], d[2]
	firstScreen, _, _ := strings.Cut(readme, "\n## ")
	for _, mm := range readmeMake.FindAllStringSubmatch(firstScreen, -1) {
		if mm[1] == "run" {
			q.makeRun = mm[2]
		} else {
			q.makeTest = mm[2]
		}
	}
	return q
}

// TestREADMEQuickstart: the README's first screen is true. make run serves
// the demo configuration on the address the curl uses; the curl, sent as
// written, answers the sample shown (the first parameter set field by
// field, the names of the others); the discover command prints the same
// answer; make test runs what .ci/run runs.
func TestREADMEQuickstart(t *testing.T) {
	q := readQuickstart(t)

	mk, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	assert.Contains(t, string(mk), "\nrun:\n\t$(GO) run ./cmd/argocd-cluster-discovery serve --config testdata/demo/config.yaml\n")
	assert.Contains(t, q.makeRun, strings.TrimPrefix(q.origin, "http://"), "make run's comment names the address")
	demo, err := os.ReadFile(demoConfig)
	require.NoError(t, err)
	var cfg struct {
		Server struct {
			Listen string `json:"listen"`
		} `json:"server"`
	}
	require.NoError(t, yaml.Unmarshal(demo, &cfg))
	assert.Equal(t, strings.TrimPrefix(q.origin, "http://"), cfg.Server.Listen, "the demo listens where the curl asks")
	ci, err := os.ReadFile("../../.ci/run")
	require.NoError(t, err)
	assert.Contains(t, string(ci), "\nmake test\n", "CI runs the README's test command")
	assert.Contains(t, q.makeTest, "lint, then go test -race ./...")
	assert.Contains(t, string(mk), "\ntest: testbin\n\t$(UNIT_ENV) bash .ci/unit lint unit-norace fuzz-short\n",
		"make test: lint, then the tests (.ci/unit runs lint before the packages' tests)")

	base, _, stop := startDemo(t)
	defer stop()
	waitReady(t, base, q.token)
	resp, body := post(t, base+q.path, q.token, q.body)
	require.Equal(t, 200, resp.StatusCode, string(body))
	var got struct {
		Output struct {
			Parameters []map[string]any `json:"parameters"`
		} `json:"output"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.Len(t, got.Output.Parameters, len(q.sample), "as many clusters as the README shows")
	for k, v := range q.sample[0] {
		assert.Equal(t, v, got.Output.Parameters[0][k], "the README's sample, %s", k)
	}
	for i, p := range q.sample {
		assert.Equal(t, p["name"], got.Output.Parameters[i]["name"])
	}

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"discover", "--config", "../../" + q.discoverConfig, "--input", q.discoverInput}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.JSONEq(t, string(body), stdout.String(), "discover prints what the API answers")
}

// TestREADMEMakeTargets: every make target the README names exists, with
// a "## target:" line that make help prints.
func TestREADMEMakeTargets(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	mk, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	named := regexp.MustCompile("`make ([a-z][-a-z0-9]*)").FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, named)
	for _, m := range named {
		target := m[1]
		assert.True(t, regexp.MustCompile("(?m)^"+regexp.QuoteMeta(target)+":").Match(mk), "make %s is a target", target)
		assert.True(t, bytes.Contains(mk, []byte("\n## "+target+":")), "make help describes make %s", target)
	}
}
