package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// reportFile is where make bench writes its report: the one place the
// docs take a measured figure or a duration from.
const reportFile = "cmd/benchreport/last-run.md"

// reportMarker opens the report file: it is written by make bench, not by
// hand (TestLastRunIsGenerated).
const reportMarker = "<!-- written by make bench (cmd/benchreport -report); do not edit by hand -->"

// suiteFile is the raw output of the make test step.
const suiteFile = "suite.txt"

// e2eRun is the line .ci/unit prints when one of its e2e runs ended: its
// name, its exit status and its own duration in seconds.
var e2eRun = regexp.MustCompile(`(?m)^unit: (e2e-\S+): exit (\d+) after (\d+) s`)

// e2eRunsWhat names the e2e runs' line of the report.
const e2eRunsWhat = "the longest e2e run within it (the suite in two runs and the version matrix, side by side: `.ci/unit`)"

// timing is one line of the report's "how long" table.
type timing struct {
	what, command string
	took          time.Duration
	failed        bool
	// pending: not run yet when the report was written (make test, while
	// it runs: it checks this report)
	pending bool
}

// stepNames say what each step measures, by its output file.
var stepNames = map[string]string{
	"getparams.txt": "getparams benchmarks",
	"sync.txt":      "apiserver ceiling, cold sync and steady state (loadgen)",
	"eks.txt":       "eks benchmark",
	"aks.txt":       "aks benchmark",
	"rancher.txt":   "rancher benchmark",
	"load.txt":      "memory and load (loadgen)",
	"events.txt":    "Rancher change events: new cluster to the answer, a burst, a minute at rest (loadgen -events)",
	"e2e.txt":       "time-to-Application (the e2e suite's first steps, no race detector)",
	suiteFile:       "`make test`, warm: lint, then every test with the race detector (the README's test command)",
}

// timings are how long each step of the run took, the e2e suite within
// make test (from go test's own summary), and the whole run.
func timings(steps []*step, outputs map[string]string, total time.Duration) []timing {
	var out []timing
	for _, s := range steps {
		name := s.cmd
		if name == "" {
			name = "go"
		}
		out = append(out, timing{what: stepNames[s.file], command: name + " " + strings.Join(s.args, " "), took: s.took,
			failed: s.err != nil, pending: !s.ran})
		if s.file == suiteFile {
			out = append(out, e2eTiming(s, outputs[s.file]))
		}
	}
	return append(out, timing{what: "this `make bench`, every step", command: "make bench", took: total})
}

// e2eTiming is the e2e runs' line within make test: the longest run by
// its own clock, with its name; failed when any run failed or none ended.
func e2eTiming(suite *step, output string) timing {
	t := timing{what: e2eRunsWhat, command: "the e2e runs of make test", pending: !suite.ran, failed: suite.ran}
	runs := e2eRun.FindAllStringSubmatch(output, -1)
	for _, m := range runs {
		var secs int
		if _, err := fmt.Sscan(m[3], &secs); err != nil {
			continue
		}
		if d := time.Duration(secs) * time.Second; d >= t.took {
			t.took, t.command = d, "the e2e runs of make test (longest: "+m[1]+")"
		}
	}
	t.failed = suite.ran && (len(runs) == 0 || slices.ContainsFunc(runs, func(m []string) bool { return m[2] != "0" }))
	return t
}

// render writes the report: where it was measured, every figure next to
// its target, and how long each part took.
func render(machine string, rows []row, took []timing, failed bool, rawDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s\n\n", machine)
	b.WriteString("| figure | measured | target | verdict |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.figure, r.measured, r.target, r.verdict)
	}
	b.WriteString("\n## How long\n\n| what | command | took |\n|---|---|---|\n")
	for _, t := range took {
		d := t.took.Round(time.Second).String()
		switch {
		case t.pending:
			d = "pending (running when this report was written)"
		case t.failed:
			d += " (**failed**)"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s |\n", t.what, t.command, d)
	}
	if failed {
		fmt.Fprintf(&b, "\nFAIL: a figure missed its target, was not measured, or a measurement failed (raw outputs in %s)\n", rawDir)
	}
	return b.String()
}
