package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

const (
	verdictOK          = "ok"
	verdictMissed      = "**missed**"
	verdictNotMeasured = "**not measured**"
	// verdictReference marks a figure that is not ours to meet but tells
	// what one of ours is up against (the apiserver's ceiling on this
	// machine): neither ok nor a failure.
	verdictReference = "reference"
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
	Before, After memory
	ReadyAfter    int64 `json:"readyAfterNs"`
	// Follower is the second replica's figures (replicas.go).
	Follower        *followerRun `json:"follower"`
	PeakRSS         float64      `json:"peakRSSBytes"`
	StartupPeakRSS  float64      `json:"startupPeakRSSBytes"`
	LogLines        int          `json:"logLines"`
	ForeignLogLines int          `json:"foreignLogLines"`
	FirstForeign    string       `json:"firstForeignLogLine"`
	Sync            *struct {
		Secrets        int                `json:"secrets"`
		ColdSync       int64              `json:"coldSyncNs"`
		Ledger         int64              `json:"ledgerNs"`
		SteadyPasses   int                `json:"steadyPasses"`
		SteadyRequests map[string]float64 `json:"steadyRequests"`
		// RestartRequests is nil when loadgen did not restart the service
		RestartRequests map[string]float64 `json:"restartRequests"`
	} `json:"sync"`
	// Ceiling is the service's cold-start writes by an ideal client
	// (loadgen -ceiling), each kind and in all.
	Ceiling *struct {
		Secrets int64 `json:"secretsNs"`
		Creates int64 `json:"createsNs"`
		Status  int64 `json:"statusNs"`
		Total   int64 `json:"totalNs"`
		Writes  int   `json:"writes"`
	} `json:"ceiling"`
}

// memory is what loadgen read of the service at one moment: its
// goroutines, its RSS and of it the binary's pages (file-backed), and the
// heap in use.
type memory struct {
	Goroutines int     `json:"goroutines"`
	RSS        float64 `json:"rssBytes"`
	RSSFile    float64 `json:"rssFileBytes"`
	HeapInUse  float64 `json:"heapInUseBytes"`
}

// parts says what RSS m is made of, when loadgen read it: "(of it the
// binary's pages 40.7 MiB; heap in use 64.0 MiB)".
func (m memory) parts() string {
	if m.RSSFile <= 0 || m.HeapInUse <= 0 {
		return ""
	}
	return fmt.Sprintf(" (of it the binary's pages %.1f MiB; heap in use %.1f MiB)", mib(m.RSSFile), mib(m.HeapInUse))
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

// rerun is why a figure a benchmark should have given was not measured.
const rerun = "benchmark failed or did not run"

// figures judges every figure of the run against its target, in the
// report's order.
func figures(lines []benchLine, sync, load map[int]*loadRun, events *eventsRun, e2e *e2eFigure, o options) []row {
	var rows []row
	rows = append(rows, getparamsRows(lines, o)...)
	rows = append(rows, syncRows(sync, o)...)
	rows = append(rows, sourceRows(lines)...)
	rows = append(rows, eventsRows(events, o)...)
	rows = append(rows, loadRows(load, o)...)
	rows = append(rows, replicaRows(load[o.loadClusters], o)...)
	rows = append(rows, logRows(sync, load, events)...)
	rows = append(rows, e2eRows(e2e, o)...)
	return rows
}

// getparamsRows compare getparams with the same bytes from a bare handler:
// the ratio of the medians of -count runs each, as one run on a shared
// machine moves by tens of percent.
func getparamsRows(lines []benchLine, o options) []row {
	var rows []row
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
	return rows
}

// syncRows are the built binary's cluster Secrets on the real apiserver,
// and, after its cold start, the apiserver's ceiling (ceilingRow).
func syncRows(sync map[int]*loadRun, o options) []row {
	var rows []row
	for _, n := range o.syncSizes {
		limit := coldSyncTarget(n)
		cold := fmt.Sprintf("cold sync, shipped binary, %s Secrets (real kube-apiserver)", thousands(n))
		steadyFig := fmt.Sprintf("steady state at %s Secrets, %d passes with nothing to change (apiserver's count)", thousands(n), steadyPasses)
		const steadyTarget = "0 LIST, 0 writes"
		ledger := fmt.Sprintf("cold start, shipped binary, %s clusters: ClusterProfiles and their status written", thousands(n))
		r := sync[n]
		if r == nil || r.Sync == nil {
			rows = append(rows, notMeasured(cold, fmt.Sprintf("≤ %s", limit), "the sync run failed"),
				notMeasured(ledger, fmt.Sprintf("≤ %s", limit), "the sync run failed"),
				ceilingRow(n, r),
				notMeasured(steadyFig, steadyTarget, "the sync run failed"),
				restartRow(n, nil))
			continue
		}
		took := time.Duration(r.Sync.ColdSync)
		rows = append(rows, row{cold, fmt.Sprintf("%.1f s", took.Seconds()), fmt.Sprintf("≤ %s", limit), judge(took <= limit)})
		written, ready := time.Duration(r.Sync.Ledger), time.Duration(r.ReadyAfter)
		rows = append(rows, row{ledger, fmt.Sprintf("%.1f s (the answer ready and verified after %.1f s)", written.Seconds(), ready.Seconds()),
			fmt.Sprintf("≤ %s", limit), judge(written > 0 && written <= limit)}, ceilingRow(n, r))
		if r.Sync.SteadyPasses < steadyPasses {
			rows = append(rows, notMeasured(steadyFig, steadyTarget, fmt.Sprintf("%d passes counted", r.Sync.SteadyPasses)),
				restartRow(n, r.Sync.RestartRequests))
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
			steadyTarget, judge(lists == 0 && writes == 0)}, restartRow(n, r.Sync.RestartRequests))
	}
	return rows
}

// restartRow is what a restart of the leader asked of the apiserver once
// the cold start had written everything (nil: not measured), from the
// stop of the first process to the first pass of the second: it resumes
// from the ledger and the Secrets as they are, and writes none of them. A
// new leader refreshes the ApplicationSets once, which is not counted.
func restartRow(n int, counts map[string]float64) row {
	figure := fmt.Sprintf("restart of the leader at %s clusters, everything written: the apiserver's count up to its first pass", thousands(n))
	const target = "0 writes of Secrets, ClusterProfiles or the ledger's ConfigMap; the same answers"
	if counts == nil {
		return notMeasured(figure, target, "the sync run did not restart the service")
	}
	writes := 0.0
	for k, v := range counts {
		f := strings.Fields(k)
		switch {
		case len(f) != 2 || f[1] == "applicationsets":
		case f[0] == "CREATE", f[0] == "UPDATE", f[0] == "PATCH", f[0] == "DELETE", f[0] == "DELETECOLLECTION", f[0] == "APPLY":
			writes += v
		}
	}
	return row{figure, fmt.Sprintf("%g writes (%s); the answers verified after it", writes, requestList(counts)), target, judge(writes == 0)}
}

// ceilingRow is the apiserver's ceiling at n clusters, from the sync run r
// (nil: it failed): the cold start's writes by a client that waits for
// nothing, next to the cold start's target. It is a reference, not a
// target of ours: it says how much of the target the machine leaves to
// the service, and says so plainly when the target is below it.
func ceilingRow(n int, r *loadRun) row {
	limit := coldSyncTarget(n)
	figure := fmt.Sprintf("apiserver ceiling on this machine, %s clusters: the same writes (Secret, ClusterProfile, its status) by an unthrottled client with no watchers", thousands(n))
	target := fmt.Sprintf("the cold start's target (≤ %s)", limit)
	switch {
	case r == nil || r.Sync == nil:
		return notMeasured(figure, target, "the sync run failed")
	case r.Ceiling == nil || r.Ceiling.Total <= 0:
		return notMeasured(figure, target, "the sync run measured no ceiling (loadgen -ceiling)")
	}
	c := r.Ceiling
	secs := func(ns int64) float64 { return time.Duration(ns).Seconds() }
	measured := fmt.Sprintf("%.1f s (Secrets %.1f s, ClusterProfiles %.1f s, status %.1f s)", secs(c.Total), secs(c.Secrets), secs(c.Creates), secs(c.Status))
	if time.Duration(c.Total) > limit {
		measured += "; the target is below what this machine's apiserver can do"
	}
	return row{figure, measured, target, verdictReference}
}

// sourceRows are the upstream calls of a steady-state refresh: the list
// pages only, none of the per-cluster calls a cache saves.
func sourceRows(lines []benchLine) []row {
	var rows []row
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
	return rows
}

// loadRows are the built binary under load, with the configuration's
// defaults.
func loadRows(load map[int]*loadRun, o options) []row {
	var rows []row
	n := thousands(o.loadClusters)
	rssIdle := "RSS at " + n + " clusters, distinct CA each, Secrets, refresh trigger and ClusterProfile ledger on (the leader), at rest"
	rssStart := "RSS at " + n + " clusters, start-up peak (first listing, cold sync) vs at rest"
	rssPeak := fmt.Sprintf("RSS at %s clusters, peak under %d connections for %s", n, o.loadConns, o.loadDuration)
	loadFig := fmt.Sprintf("load at %s clusters (%d connections, %s): errors, goroutine growth", n, o.loadConns, o.loadDuration)
	if l := load[o.loadClusters]; l != nil && l.Load != nil && l.Before.RSS > 0 {
		rest := mib(l.Before.RSS)
		rows = append(rows, row{rssIdle, fmt.Sprintf("%.1f MiB%s", rest, l.Before.parts()), "≤ 80 MiB", judge(rest <= 80)})
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
	return rows
}

// logRows are the service's log, over every run of the binary (the events
// run's too).
func logRows(sync, load map[int]*loadRun, events *eventsRun) []row {
	var rows []row
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
	if events != nil {
		runs++
		logLines += events.LogLines
		foreign += events.ForeignLogLines
		if first == "" {
			first = events.FirstForeign
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
	return rows
}

// e2eRows are time-to-Application, end to end, run here.
func e2eRows(e2e *e2eFigure, o options) []row {
	var rows []row
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
