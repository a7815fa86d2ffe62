package main

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func defaultOptions(t *testing.T) options {
	t.Helper()
	o, ok := parseFlags([]string{"-binary", "bin/argocd-cluster-discovery"}, io.Discard)
	require.True(t, ok)
	return o
}

// tableColumn returns the first column of the Markdown table that follows
// header in text.
func tableColumn(text, header string) []string {
	_, after, ok := strings.Cut(text, header+"\n")
	if !ok {
		return nil
	}
	var col []string
	for _, l := range strings.Split(after, "\n")[1:] { // past the |---| line
		if !strings.HasPrefix(l, "| ") {
			break
		}
		col = append(col, strings.TrimSpace(strings.Split(l, " | ")[0][2:]))
	}
	return col
}

// TestLastRunIsGenerated: the report the docs cite is make bench's own
// output, for the figures and steps this checkout measures: a figure or a
// step added without running make bench again fails here.
func TestLastRunIsGenerated(t *testing.T) {
	b, err := os.ReadFile(filepath.Base(reportFile))
	require.NoError(t, err, "make bench writes it")
	text := string(b)
	require.True(t, strings.HasPrefix(text, reportMarker+"\n"), "written by make bench, not by hand")
	assert.Regexp(t, `(?m)^Measured \d{4}-\d\d-\d\d \d\d:\d\d \S+ at commit [0-9a-f]{12}`, text)

	o := defaultOptions(t)
	var want []string
	for _, r := range figures(nil, nil, nil, nil, nil, o) {
		want = append(want, r.figure)
	}
	assert.Equal(t, want, tableColumn(text, "| figure | measured | target | verdict |"), "one row per figure, in the report's order")

	want = nil
	for _, s := range plan(o, "sync.json", "load.json", "events.json") {
		want = append(want, stepNames[s.file])
		if s.file == suiteFile {
			want = append(want, e2eRunsWhat)
		}
	}
	want = append(want, "this `make bench`, every step")
	assert.Equal(t, want, tableColumn(text, "| what | command | took |"), "how long each step took, the e2e suite and the whole run")
}

func TestTimingsAndRender(t *testing.T) {
	steps := []*step{
		{file: "getparams.txt", args: []string{"test", "./generator"}, took: 61 * time.Second, ran: true},
		{file: suiteFile, cmd: "make", args: []string{"test"}, took: 13 * time.Minute, ran: true},
	}
	outputs := map[string]string{suiteFile: "ok  \tgithub.com/argocd-cluster-discovery/argocd-cluster-discovery/generator\t4.9s\n" +
		"unit: e2e-others-v3.6.1: exit 0 after 301 s; its output:\nok  \tgithub.com/x/cmd/e2e\t300.1s\n" +
		"unit: e2e-TestEndToEnd-v3.6.1: exit 0 after 412 s; its output:\n" +
		"unit: e2e-subset-v2.14.21: exit 0 after 250 s; its output:\n"}
	got := render("Measured here.", []row{{"f", "1 s", "≤ 2 s", verdictOK}}, timings(steps, outputs, 20*time.Minute), false, "bin/bench")
	assert.Equal(t, `
Measured here.

| figure | measured | target | verdict |
|---|---|---|---|
| f | 1 s | ≤ 2 s | ok |

## How long

| what | command | took |
|---|---|---|
| getparams benchmarks | `+"`go test ./generator`"+` | 1m1s |
| `+"`make test`"+`, warm: lint, then every test with the race detector (the README's test command) | `+"`make test`"+` | 13m0s |
| `+e2eRunsWhat+` | `+"`the e2e runs of make test (longest: e2e-TestEndToEnd-v3.6.1)`"+` | 6m52s |
| this `+"`make bench`"+`, every step | `+"`make bench`"+` | 20m0s |
`, got)
	steps[1].err = assert.AnError
	failed := render("m", nil, timings(steps, nil, time.Minute), true, "bin/bench")
	assert.Contains(t, failed, "| `make test` | 13m0s (**failed**) |\n")
	assert.Contains(t, failed, "| `the e2e runs of make test` | 0s (**failed**) |\n", "no e2e figure from a failed make test")
	outputs[suiteFile] = strings.Replace(outputs[suiteFile], "v2.14.21: exit 0", "v2.14.21: exit 1", 1)
	oneFailed := render("m", nil, timings(steps, outputs, time.Minute), true, "bin/bench")
	assert.Contains(t, oneFailed, "(longest: e2e-TestEndToEnd-v3.6.1)` | 6m52s (**failed**) |\n", "a failed run fails the line")

	// written before make test runs (make test checks this report)
	steps[1].ran, steps[1].err = false, nil
	pending := render("m", nil, timings(steps, nil, time.Minute), false, "bin/bench")
	assert.Contains(t, pending, "| `make test` | pending (running when this report was written) |\n")
	assert.Contains(t, pending, "| `the e2e runs of make test` | pending (running when this report was written) |\n")
}

// timingPhrase is a duration stated in prose: "about 7 minutes",
// "takes 20 s", "~10 s".
var timingPhrase = regexp.MustCompile(`(?i)(\b(about|around|roughly|approximately|takes?|took|in)\s+~?|~)\d+(\.\d+)?\s*(s|secs?|seconds?|min|minutes?|h|hours?)\b`)

// TestDocsCiteTheReportForTimings: no Markdown file of the repository
// states how long something takes in prose; the durations and figures
// live in make bench's report, which the docs link to.
func TestDocsCiteTheReportForTimings(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(path) != ".md" || filepath.Base(path) == filepath.Base(reportFile) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := timingPhrase.FindString(line); m != "" {
				rel, _ := filepath.Rel(root, path)
				found = append(found, rel+":"+strconv.Itoa(i+1)+": "+m)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Empty(t, found, "durations in prose: link the report (%s) instead", reportFile)
}
