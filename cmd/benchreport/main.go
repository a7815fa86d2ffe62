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
//     KUBEBUILDER_ASSETS);
//   - the upstream calls of a steady-state refresh of each cloud source
//     (eks, aks, rancher benchmarks);
//   - the built binary's RSS at 10,000 clusters with a distinct CA each, at
//     rest, at start-up and under load, with the configuration's defaults
//     (Secrets and the refresh trigger on), and the lines it logged outside
//     the configured format;
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
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

type options struct {
	out, binary             string
	benchtime, loadDuration string
	loadClusters, loadConns int
	count                   int
	syncSizes               []int
	e2e                     bool
}

// step is one measurement command; its stdout is kept in out/file.
type step struct {
	file string
	args []string
	err  error
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
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
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.binary == "" {
		fmt.Fprintln(stderr, "-binary is required: the figures are those of the binary as shipped (make build)")
		return 2
	}
	o.syncSizes = []int{2000, 10000}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	startLoad := loadAvg()
	syncJSON, loadJSON := filepath.Join(o.out, "sync.json"), filepath.Join(o.out, "load.json")
	for _, p := range []string{syncJSON, loadJSON} {
		_ = os.Remove(p)
	}
	withCount := func(s *step, n int) *step {
		s.args = append(s.args[:len(s.args)-1], "-count", fmt.Sprint(n), s.args[len(s.args)-1])
		return s
	}
	bench := func(file, pkg, pattern, benchtime string) *step {
		return &step{file: file, args: []string{"test", "-run", "^$", "-bench", pattern, "-benchmem", "-benchtime", benchtime, "./" + pkg}}
	}
	loadgen := func(file string, args ...string) *step {
		return &step{file: file, args: append([]string{"run", "./cmd/loadgen", "-binary", o.binary}, args...)}
	}
	var sizes []string
	for _, n := range o.syncSizes {
		sizes = append(sizes, fmt.Sprint(n))
	}
	steps := []*step{
		withCount(bench("getparams.txt", "generator", "^BenchmarkGetParams$", o.benchtime), o.count),
		// the cold sync and steady state: resync 2s so that five passes
		// come within seconds; every other setting is the binary's default
		loadgen("sync.txt", "-secrets", "-clusters", strings.Join(sizes, ","), "-duration", "0",
			"-resync", "2s", "-steady-passes", fmt.Sprint(steadyPasses), "-settle", "3s", "-json", syncJSON),
		bench("eks.txt", "sources/eks", "^BenchmarkClusters$/^clusters=2000$/^latency=0s$/^steady$", o.benchtime),
		bench("aks.txt", "sources/aks", "^BenchmarkRefresh$/^steady$", o.benchtime),
		bench("rancher.txt", "sources/rancher", "^BenchmarkListClusters$", o.benchtime),
		// memory and load with the configuration's defaults
		loadgen("load.txt", "-secrets", "-clusters", fmt.Sprint(o.loadClusters), "-conns", fmt.Sprint(o.loadConns),
			"-duration", o.loadDuration, "-settle", "5s", "-idle", "5s", "-json", loadJSON),
	}
	if o.e2e {
		steps = append(steps, &step{file: "e2e.txt", args: []string{"test", "-count=1", "-v", "-run", e2eSteps, "./cmd/e2e/"}})
	}
	var lines []benchLine
	outputs := map[string]string{}
	failed := false
	for _, s := range steps {
		fmt.Fprintf(stderr, "benchreport: go %s\n", strings.Join(s.args, " "))
		var buf bytes.Buffer
		cmd := exec.Command("go", s.args...)
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&buf, stderr), stderr
		s.err = cmd.Run()
		if s.err != nil {
			failed = true
			fmt.Fprintf(stderr, "benchreport: %s: %v\n", s.file, s.err)
		}
		_ = os.WriteFile(filepath.Join(o.out, s.file), buf.Bytes(), 0o644)
		outputs[s.file] = buf.String()
		parsed, _ := parseBench(&buf)
		lines = append(lines, parsed...)
	}
	var e2e *e2eFigure
	if f, ok := parseE2E(outputs["e2e.txt"]); ok {
		e2e = &f
	}
	rows := figures(lines, readRuns(syncJSON), readRuns(loadJSON), e2e, o)
	fmt.Fprintf(stdout, "\n%s\n\n", machine(startLoad, loadAvg()))
	fmt.Fprintln(stdout, "| figure | measured | target | verdict |")
	fmt.Fprintln(stdout, "|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(stdout, "| %s | %s | %s | %s |\n", r.figure, r.measured, r.target, r.verdict)
		if r.verdict == verdictMissed || r.verdict == verdictNotMeasured {
			failed = true
		}
	}
	if failed {
		fmt.Fprintln(stdout, "\nFAIL: a figure missed its target, was not measured, or a measurement failed (raw outputs in "+o.out+")")
		return 1
	}
	return 0
}

// steadyPasses is the number of passes with nothing to change over which
// the steady state's requests are counted.
const steadyPasses = 5

// e2eSteps are the e2e suite's steps up to the one that measures
// time-to-Application (a cluster joins; its Secret and Application come).
const e2eSteps = "^TestEndToEnd$/^(start|plugin_ApplicationSet|cluster_generator|self-registration):"

const (
	verdictOK          = "ok"
	verdictMissed      = "**missed**"
	verdictNotMeasured = "**not measured**"
)

type row struct {
	figure, measured, target, verdict string
}

func judge(ok bool) string {
	if ok {
		return verdictOK
	}
	return verdictMissed
}

func notMeasured(figure, target, why string) row {
	return row{figure: figure, measured: "not measured: " + why, target: target, verdict: verdictNotMeasured}
}

// run is the part of one fleet size's cmd/loadgen -json output used here.
type loadRun struct {
	Clusters    int     `json:"clusters"`
	Connections int     `json:"connections"`
	Throughput  float64 `json:"requestsPerSecond"`
	P99         int64   `json:"p99Ns"`
	Errors      int64   `json:"errors"`
	Load        *struct {
		Requests int64 `json:"requests"`
	} `json:"load"`
	Before, After struct {
		Goroutines int     `json:"goroutines"`
		RSS        float64 `json:"rssBytes"`
	}
	PeakRSS         float64 `json:"peakRSSBytes"`
	StartupPeakRSS  float64 `json:"startupPeakRSSBytes"`
	LogLines        int     `json:"logLines"`
	ForeignLogLines int     `json:"foreignLogLines"`
	FirstForeign    string  `json:"firstForeignLogLine"`
	Sync            *struct {
		Secrets        int                `json:"secrets"`
		ColdSync       int64              `json:"coldSyncNs"`
		SteadyPasses   int                `json:"steadyPasses"`
		SteadyRequests map[string]float64 `json:"steadyRequests"`
	} `json:"sync"`
}

// readRuns reads cmd/loadgen's -json output by fleet size (nil when the
// run wrote none: it failed).
func readRuns(path string) map[int]*loadRun {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var all []loadRun
	if json.Unmarshal(b, &all) != nil {
		return nil
	}
	out := map[int]*loadRun{}
	for i := range all {
		out[all[i].Clusters] = &all[i]
	}
	return out
}

// thousands writes n with a thousands separator, as the figures say it.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func mib(b float64) float64 { return b / (1 << 20) }

func figures(lines []benchLine, sync, load map[int]*loadRun, e2e *e2eFigure, o options) []row {
	var rows []row
	const rerun = "benchmark failed or did not run"

	// getparams vs the same bytes from a bare handler: the ratio of the
	// medians of -count runs each, as one run on a shared machine moves by
	// tens of percent.
	const getparams10k = "getparams at 10,000 clusters vs pre-encoded bytes"
	if gp, pre := nsPerOp(lines, 10000); gp > 0 && pre > 0 {
		rows = append(rows, row{getparams10k, fmt.Sprintf("%.2fx (%.2f ms vs %.2f ms a request, medians of %d runs)", gp/pre, gp/1e6, pre/1e6, o.count),
			"≤ 1.5x", judge(gp/pre <= 1.5)})
	} else {
		rows = append(rows, notMeasured(getparams10k, "≤ 1.5x", rerun))
	}
	const thr100 = "throughput at 100 clusters vs pre-encoded bytes"
	if gp, pre := nsPerOp(lines, 100); gp > 0 && pre > 0 {
		rows = append(rows, row{thr100, fmt.Sprintf("%.2fx (%.0f vs %.0f requests/s on one keep-alive connection, medians of %d runs)", pre/gp, 1e9/gp, 1e9/pre, o.count),
			"≥ 0.5x", judge(pre/gp >= 0.5)})
	} else {
		rows = append(rows, notMeasured(thr100, "≥ 0.5x", rerun))
	}

	// the built binary's cluster Secrets on the real apiserver
	for _, n := range o.syncSizes {
		limit := coldSyncTarget(n)
		cold := fmt.Sprintf("cold sync, shipped binary, %s Secrets (real kube-apiserver)", thousands(n))
		steadyFig := fmt.Sprintf("steady state at %s Secrets, %d passes with nothing to change (apiserver's count)", thousands(n), steadyPasses)
		const steadyTarget = "0 LIST, 0 writes"
		r := sync[n]
		if r == nil || r.Sync == nil {
			rows = append(rows, notMeasured(cold, fmt.Sprintf("≤ %s", limit), "the sync run failed"),
				notMeasured(steadyFig, steadyTarget, "the sync run failed"))
			continue
		}
		took := time.Duration(r.Sync.ColdSync)
		rows = append(rows, row{cold, fmt.Sprintf("%.1f s", took.Seconds()), fmt.Sprintf("≤ %s", limit), judge(took <= limit)})
		if r.Sync.SteadyPasses < steadyPasses {
			rows = append(rows, notMeasured(steadyFig, steadyTarget, fmt.Sprintf("%d passes counted", r.Sync.SteadyPasses)))
			continue
		}
		lists, writes := 0.0, 0.0
		for k, v := range r.Sync.SteadyRequests {
			switch strings.Fields(k)[0] {
			case "LIST":
				lists += v
			case "CREATE", "UPDATE", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
				writes += v
			}
		}
		rows = append(rows, row{steadyFig, fmt.Sprintf("%g LIST, %g writes (%s)", lists, writes, requestList(r.Sync.SteadyRequests)),
			steadyTarget, judge(lists == 0 && writes == 0)})
	}

	// upstream calls of a steady-state refresh: the list pages only, none
	// of the per-cluster calls a cache saves
	steady := func(figure, pkg, name, perCluster, what, pages string) {
		target := pages + " only (0 " + what + ")"
		b, ok := find(lines, pkg, name)
		n, okN := b.Metrics[perCluster]
		calls, okCalls := b.Metrics["calls/refresh"]
		switch {
		case !ok:
			rows = append(rows, notMeasured(figure, target, rerun))
		case !okN || !okCalls:
			rows = append(rows, notMeasured(figure, target, "the benchmark reported no "+perCluster+" or calls/refresh"))
		default:
			rows = append(rows, row{figure, fmt.Sprintf("%g calls (%g %s)", calls, n, what), target, judge(n == 0)})
		}
	}
	steady("eks: upstream calls per steady refresh (2,000 clusters, 4 regions)", "/sources/eks",
		"BenchmarkClusters/clusters=2000/latency=0s/steady", "describes/refresh", "describes", "list and tagging pages")
	steady("aks: upstream calls per steady refresh (500 clusters, 5 subscriptions)", "/sources/aks",
		"BenchmarkRefresh/steady", "credcalls/refresh", "credential reads", "list pages")
	const rancherFig = "rancher: requests per listing (10,000 clusters, warm client)"
	b, ok := find(lines, "/sources/rancher", "BenchmarkListClusters")
	reqs, okReqs := b.Metrics["requests/listing"]
	listed, okListed := b.Metrics["clusters/listing"]
	switch {
	case !ok:
		rows = append(rows, notMeasured(rancherFig, "a page of 1,000 each + cacerts", rerun))
	case !okReqs || !okListed || listed == 0:
		rows = append(rows, notMeasured(rancherFig, "a page of 1,000 each + cacerts", "the benchmark reported no requests/listing or clusters/listing"))
	default:
		want := math.Ceil(listed/1000) + 1
		rows = append(rows, row{rancherFig, fmt.Sprintf("%g requests", reqs),
			fmt.Sprintf("≤ %g (a page of 1,000 each + cacerts)", want), judge(reqs <= want)})
	}

	// the built binary under load, with the configuration's defaults
	n := thousands(o.loadClusters)
	rssIdle := "RSS at " + n + " clusters, distinct CA each, Secrets and refresh trigger on, at rest"
	rssStart := "RSS at " + n + " clusters, start-up peak (first listing, cold sync) vs at rest"
	rssPeak := fmt.Sprintf("RSS at %s clusters, peak under %d connections for %s", n, o.loadConns, o.loadDuration)
	loadFig := fmt.Sprintf("load at %s clusters (%d connections, %s): errors, goroutine growth", n, o.loadConns, o.loadDuration)
	if l := load[o.loadClusters]; l != nil && l.Load != nil && l.Before.RSS > 0 {
		rest := mib(l.Before.RSS)
		rows = append(rows, row{rssIdle, fmt.Sprintf("%.1f MiB", rest), "≤ 80 MiB", judge(rest <= 80)})
		if l.StartupPeakRSS > 0 {
			ratio := l.StartupPeakRSS / l.Before.RSS
			rows = append(rows, row{rssStart, fmt.Sprintf("%.1f MiB, %.2fx", mib(l.StartupPeakRSS), ratio), "≤ 1.5x at rest", judge(ratio <= 1.5)})
		} else {
			rows = append(rows, notMeasured(rssStart, "≤ 1.5x at rest", "the peak could not be reset after start-up (no /proc?)"))
		}
		rows = append(rows,
			row{rssPeak, fmt.Sprintf("%.1f MiB (%.1f MiB after a 5 s idle)", mib(l.PeakRSS), mib(l.After.RSS)), "≤ 80 MiB", judge(mib(l.PeakRSS) <= 80)},
			row{loadFig, fmt.Sprintf("%d errors in %d requests (%.0f req/s, p99 %.1f ms); goroutines %d → %d",
				l.Errors, l.Load.Requests, l.Throughput, float64(l.P99)/1e6, l.Before.Goroutines, l.After.Goroutines),
				"0 errors, no growth", judge(l.Errors == 0 && l.Load.Requests > 0 && l.After.Goroutines <= l.Before.Goroutines+2)},
		)
	} else {
		rows = append(rows, notMeasured(rssIdle, "≤ 80 MiB", "the load run failed"), notMeasured(rssStart, "≤ 1.5x at rest", "the load run failed"),
			notMeasured(rssPeak, "≤ 80 MiB", "the load run failed"), notMeasured(loadFig, "0 errors, no growth", "the load run failed"))
	}

	// the service's log, over every run of the binary
	const logFig = "log lines outside the configured format (JSON), every run of the binary"
	var logLines, foreign int
	first := ""
	runs := 0
	for _, set := range []map[int]*loadRun{sync, load} {
		for _, r := range set {
			runs++
			logLines += r.LogLines
			foreign += r.ForeignLogLines
			if first == "" {
				first = r.FirstForeign
			}
		}
	}
	switch {
	case runs == 0 || logLines == 0:
		rows = append(rows, notMeasured(logFig, "0", "no run of the binary logged"))
	default:
		m := fmt.Sprintf("%d of %d lines", foreign, logLines)
		if first != "" {
			m += fmt.Sprintf(" (first: `%s`)", strings.ReplaceAll(first, "|", `\|`))
		}
		rows = append(rows, row{logFig, m, "0", judge(foreign == 0)})
	}

	// end to end, run here
	const tta = "time-to-Application (new cluster → Application, e2e, no race detector)"
	switch {
	case !o.e2e:
		rows = append(rows, notMeasured(tta, "≤ refresh + 10 s", "-e2e=false"))
	case e2e == nil:
		rows = append(rows, notMeasured(tta, "≤ refresh + 10 s", "the e2e steps failed or printed no time-to-Application"))
	case e2e.Refresh == 0:
		rows = append(rows, notMeasured(tta, "≤ refresh + 10 s", fmt.Sprintf("%.1f s, but the refresh interval is not in the output", e2e.ToApplication.Seconds())))
	default:
		limit := e2e.Refresh + 10*time.Second
		rows = append(rows, row{tta, fmt.Sprintf("%.1f s, refresh %s", e2e.ToApplication.Seconds(), e2e.Refresh),
			fmt.Sprintf("≤ refresh + 10 s = %s", limit), judge(e2e.ToApplication <= limit)})
	}
	return rows
}

// coldSyncTarget is the target for a cold sync of n Secrets.
func coldSyncTarget(n int) time.Duration {
	if n <= 2000 {
		return 15 * time.Second
	}
	return 60 * time.Second
}

// requestList is "VERB resource n" for each non-zero count, sorted.
func requestList(counts map[string]float64) string {
	if len(counts) == 0 {
		return "no request"
	}
	var out []string
	for k, v := range counts {
		out = append(out, fmt.Sprintf("%s %g", k, v))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// nsPerOp returns the median ns/op of BenchmarkGetParams at clusters,
// through the whole stack and from the bare handler (0 when not measured).
func nsPerOp(lines []benchLine, clusters int) (getparams, preencoded float64) {
	prefix := fmt.Sprintf("BenchmarkGetParams/clusters=%d/", clusters)
	var gp, pre []float64
	for _, l := range lines {
		if v := l.Metrics["ns/op"]; strings.HasSuffix(l.Pkg, "/generator") && v > 0 {
			switch l.Name {
			case prefix + "getparams":
				gp = append(gp, v)
			case prefix + "preencoded":
				pre = append(pre, v)
			}
		}
	}
	return median(gp), median(pre)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}

// machine describes where the figures were measured.
func machine(before, after string) string {
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				var kb float64
				fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
				mem = fmt.Sprintf("%.1f GiB", kb/(1<<20))
			}
		}
	}
	return fmt.Sprintf("Measured %s at commit %s on %d CPUs (GOMAXPROCS %d), %s memory, %s, %s/%s; load average %s at the start, %s at the end.",
		time.Now().Format("2006-01-02 15:04 MST"), commit(), runtime.NumCPU(), runtime.GOMAXPROCS(0), mem, runtime.Version(), runtime.GOOS, runtime.GOARCH, before, after)
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

// commit is the checkout's commit, with "-dirty" when it has changes.
func commit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=12").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
