// Command benchreport measures every performance figure of the project in
// one run and prints them next to their targets, as a Markdown table:
//
//   - the getparams benchmark (whole stack vs the same bytes from a bare
//     handler, over loopback HTTP) at 10,000 and 100 clusters, -count runs,
//     compared by their medians;
//   - the cold sync of 2,000 and of 10,000 cluster Secrets by the built
//     binary (`serve`, a static source, Secrets and the refresh trigger on)
//     against a real kube-apiserver, from the process's start to the last
//     Secret written, and the requests the apiserver counted over five
//     passes with nothing to change (cmd/loadgen -secrets; needs
//     KUBEBUILDER_ASSETS), and, for reference, the apiserver's ceiling: the
//     same writes by an unthrottled client with no watchers on a fresh
//     kube-apiserver (loadgen -ceiling);
//   - the upstream calls of a steady-state refresh of each cloud source
//     (eks, aks, rancher benchmarks);
//   - the built binary's RSS at 10,000 clusters with a distinct CA each, at
//     rest, at start-up and under load, with the configuration's defaults
//     (Secrets and the refresh trigger on), and the lines it logged outside
//     the configured format;
//   - a follower replica on the same ledger: its RSS at rest, the leader's
//     load on it, the same load on its answers served as pre-encoded bytes
//     by a bare server in loadgen, and how far apart the two replicas
//     answer with a cluster added upstream;
//   - Rancher's change events (cmd/loadgen -events): the built binary with
//     one rancher source at interval 5m against a fake Rancher of 2,000
//     clusters: a new cluster to the plugin answer, the listings of a
//     burst of 200 changes within 2 s, and those of a minute with no
//     change;
//   - time-to-Application, from the first steps of the e2e suite run here
//     (without the race detector).
//
// Every figure comes from this run of this checkout: a figure that was not
// measured is shown as "not measured" and fails the report, never read as
// zero or taken from an older run. The raw outputs are kept in -out.
//
//	go run ./cmd/benchreport -binary bin/argocd-cluster-discovery   # what make bench runs
//
// It exits 1 when a figure misses its target or was not measured.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

type options struct {
	out, binary, report     string
	benchtime, loadDuration string
	loadClusters, loadConns int
	count                   int
	syncSizes               []int
	// eventsClusters is the fleet of the Rancher events run.
	eventsClusters int
	e2e, suite     bool
}

// step is one measurement command (go, unless cmd says otherwise); its
// stdout is kept in out/file.
type step struct {
	file string
	cmd  string
	args []string
	err  error
	took time.Duration
	ran  bool
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	o, ok := parseFlags(args, stderr)
	if !ok {
		return 2
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	started, startLoad := time.Now(), loadAvg()
	syncJSON, loadJSON, eventsJSON := filepath.Join(o.out, "sync.json"), filepath.Join(o.out, "load.json"), filepath.Join(o.out, "events.json")
	for _, p := range []string{syncJSON, loadJSON, eventsJSON} {
		_ = os.Remove(p)
	}
	steps := plan(o, syncJSON, loadJSON, eventsJSON)
	figureSteps, suite := steps, []*step(nil)
	if n := len(steps); n > 0 && steps[n-1].file == suiteFile {
		figureSteps, suite = steps[:n-1], steps[n-1:]
	}
	lines, outputs, failed := measure(figureSteps, o.out, stderr)
	var e2e *e2eFigure
	if f, ok := parseE2E(outputs["e2e.txt"]); ok {
		e2e = &f
	}
	rows := figures(lines, readRuns(syncJSON), readRuns(loadJSON), readEvents(eventsJSON, o.eventsClusters), e2e, o)
	for _, r := range rows {
		if r.verdict == verdictMissed || r.verdict == verdictNotMeasured {
			failed = true
		}
	}
	endLoad := loadAvg()
	report := func() (string, error) {
		text := render(machine(startLoad, endLoad, commitOf(".", o.report)), rows, timings(steps, outputs, time.Since(started)), failed, o.out)
		if o.report == "" {
			return text, nil
		}
		return text, os.WriteFile(o.report, []byte(reportMarker+"\n\n# The last `make bench` report\n"+text), 0o644)
	}
	if len(suite) > 0 {
		// make test runs this repository's tests, the check of the report
		// among them: the report is written first with make test pending
		if _, err := report(); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		_, suiteOut, suiteFailed := measure(suite, o.out, stderr)
		outputs[suiteFile], failed = suiteOut[suiteFile], failed || suiteFailed
	}
	text, err := report()
	fmt.Fprint(stdout, text)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if failed {
		return 1
	}
	return 0
}

// parseFlags reads the options; false when they are not usable (the
// reason written to stderr).
func parseFlags(args []string, stderr io.Writer) (options, bool) {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.out, "out", "bin/bench", "directory for the raw outputs")
	fs.StringVar(&o.binary, "binary", "", "the built service binary, as shipped (make build); required")
	fs.StringVar(&o.benchtime, "benchtime", "1s", "-benchtime of the getparams and source benchmarks")
	fs.IntVar(&o.count, "count", 5, "runs of the getparams benchmark; the report shows the median")
	fs.StringVar(&o.loadDuration, "load-duration", "10s", "duration of the load run")
	fs.IntVar(&o.loadClusters, "load-clusters", 10000, "fleet size of the load run")
	fs.IntVar(&o.loadConns, "load-conns", 200, "connections of the load run")
	fs.BoolVar(&o.e2e, "e2e", true, "run the e2e suite's first steps for time-to-Application")
	fs.BoolVar(&o.suite, "suite", true, "time make test (the README's test command) after the figures")
	fs.StringVar(&o.report, "report", "", "also write the report, as the docs cite it, to this file (make bench: "+reportFile+")")
	if err := fs.Parse(args); err != nil {
		return o, false
	}
	if o.binary == "" {
		fmt.Fprintln(stderr, "-binary is required: the figures are those of the binary as shipped (make build)")
		return o, false
	}
	o.syncSizes = []int{2000, 10000}
	o.eventsClusters = 2000
	return o, true
}

// plan is the measurement commands of a run, in order; the loadgen runs
// write their figures as JSON to syncJSON, loadJSON and eventsJSON.
func plan(o options, syncJSON, loadJSON, eventsJSON string) []*step {
	withCount := func(s *step, n int) *step {
		s.args = append(s.args[:len(s.args)-1], "-count", fmt.Sprint(n), s.args[len(s.args)-1])
		return s
	}
	bench := func(file, pkg, pattern, benchtime string) *step {
		return &step{file: file, args: []string{"test", "-run", "^$", "-bench", pattern, "-benchmem", "-benchtime", benchtime, "./" + pkg}}
	}
	// loadgen waits this long for the answer and the Secrets: its patience,
	// not a target (the targets are the rows; a cold start at 10,000 takes
	// minutes on two shared cores)
	loadgen := func(file string, args ...string) *step {
		return &step{file: file, args: append([]string{"run", "./cmd/loadgen", "-binary", o.binary, "-ready-timeout", "8m", "-sync-timeout", "8m"}, args...)}
	}
	var sizes []string
	for _, n := range o.syncSizes {
		sizes = append(sizes, fmt.Sprint(n))
	}
	steps := []*step{
		withCount(bench("getparams.txt", "generator", "^BenchmarkGetParams$", o.benchtime), o.count),
		// the cold sync at the binary's defaults, then the steady state
		// after a restart with resync 2s, so that five passes come within
		// seconds. -ceiling: first, the same writes by an ideal client (the
		// apiserver's ceiling, for reference)
		loadgen("sync.txt", "-secrets", "-ceiling", "-clusters", strings.Join(sizes, ","), "-duration", "0",
			"-resync", "2s", "-steady-passes", fmt.Sprint(steadyPasses), "-settle", "3s", "-json", syncJSON),
		bench("eks.txt", "sources/eks", "^BenchmarkClusters$/^clusters=2000$/^latency=0s$/^steady$", o.benchtime),
		bench("aks.txt", "sources/aks", "^BenchmarkRefresh$/^steady$", o.benchtime),
		bench("rancher.txt", "sources/rancher", "^BenchmarkListClusters$", o.benchtime),
		// memory and load with the configuration's defaults
		loadgen("load.txt", "-secrets", "-clusters", fmt.Sprint(o.loadClusters), "-conns", fmt.Sprint(o.loadConns),
			"-duration", o.loadDuration, "-settle", "5s", "-idle", "5s", "-json", loadJSON),
		// Rancher's change events: a fake Rancher, interval 5m, every
		// other setting the binary's default
		loadgen("events.txt", "-events", "-clusters", fmt.Sprint(o.eventsClusters), "-json", eventsJSON),
	}
	if o.e2e {
		steps = append(steps, &step{file: "e2e.txt", args: []string{"test", "-count=1", "-v", "-run", e2eSteps, "./cmd/e2e/"}})
	}
	if o.suite {
		steps = append(steps, &step{file: suiteFile, cmd: "make", args: []string{"test"}})
	}
	return steps
}

// measure runs the steps, keeps each one's stdout in out, and returns the
// benchmark lines of them all, each step's stdout by file, and whether a
// step failed.
func measure(steps []*step, out string, stderr io.Writer) ([]benchLine, map[string]string, bool) {
	var lines []benchLine
	outputs := map[string]string{}
	failed := false
	for _, s := range steps {
		name := s.cmd
		if name == "" {
			name = "go"
		}
		fmt.Fprintf(stderr, "benchreport: %s %s\n", name, strings.Join(s.args, " "))
		var buf bytes.Buffer
		cmd := exec.Command(name, s.args...)
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&buf, stderr), stderr
		start := time.Now()
		s.err = cmd.Run()
		s.took, s.ran = time.Since(start), true
		if s.err != nil {
			failed = true
			fmt.Fprintf(stderr, "benchreport: %s: %v\n", s.file, s.err)
		}
		_ = os.WriteFile(filepath.Join(out, s.file), buf.Bytes(), 0o644)
		outputs[s.file] = buf.String()
		parsed, _ := parseBench(&buf)
		lines = append(lines, parsed...)
	}
	return lines, outputs, failed
}

// steadyPasses is the number of passes with nothing to change over which
// the steady state's requests are counted.
const steadyPasses = 5

// e2eSteps are the e2e suite's steps up to the one that measures
// time-to-Application (a cluster joins; its Secret and Application come).
const e2eSteps = "^TestEndToEnd$/^(start|plugin_ApplicationSet|cluster_generator|self-registration):"

// machine describes where the figures were measured.
func machine(before, after, commit string) string {
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				var kb float64
				if _, err := fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb); err == nil {
					mem = fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
			}
		}
	}
	return fmt.Sprintf("Measured %s at commit %s on %d CPUs (GOMAXPROCS %d), %s memory, %s, %s/%s; load average %s at the start, %s at the end.",
		time.Now().Format("2006-01-02 15:04 MST"), commit, runtime.NumCPU(), runtime.GOMAXPROCS(0), mem, runtime.Version(), runtime.GOOS, runtime.GOARCH, before, after)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// commitOf is the commit of the checkout at dir, with "-dirty" when a
// tracked file other than report (the file this run writes, twice) has
// changes; untracked files are not changes, as for git describe.
func commitOf(dir, report string) string {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	args := []string{"-C", dir, "status", "--porcelain", "--untracked-files=no", "--", "."}
	if report != "" {
		args = append(args, ":(exclude)"+report)
	}
	if st, err := exec.Command("git", args...).Output(); err != nil || len(strings.TrimSpace(string(st))) > 0 {
		c += "-dirty"
	}
	return c
}
