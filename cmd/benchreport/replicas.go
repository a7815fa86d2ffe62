package main

import (
	"fmt"
	"strings"
	"time"
)

// followerRun is the part of the load run's follower figures used here
// (cmd/loadgen -secrets with a load): the second replica at rest and under
// the leader's load, the same load on its answers as pre-encoded bytes,
// and a change upstream seen by both replicas.
type followerRun struct {
	Rest       memory  `json:"rest"`
	Requests   int64   `json:"requests"`
	Throughput float64 `json:"requestsPerSecond"`
	Errors     int64   `json:"errors"`
	// PreEncoded* are the follower's captured answers served by a bare
	// net/http server in loadgen, under the same load; PreEncodedError is
	// why they were not measured, or the first failure under the load.
	PreEncodedRequests   int64   `json:"preEncodedRequests"`
	PreEncodedThroughput float64 `json:"preEncodedRequestsPerSecond"`
	PreEncodedErrors     int64   `json:"preEncodedErrors"`
	PreEncodedError      string  `json:"preEncodedError"`
	Change               *struct {
		// Leader and Follower are from the change to each replica's
		// first answer holding the new cluster; Resolution is how
		// precisely each is known.
		Leader     int64  `json:"leaderNs"`
		Follower   int64  `json:"followerNs"`
		Difference int64  `json:"differenceNs"`
		Resolution int64  `json:"resolutionNs"`
		Error      string `json:"error"`
	} `json:"change"`
}

const (
	preEncodedFigure = "getparams on a follower vs pre-encoded bytes"
	preEncodedTarget = "≤ 1.2x"
	changeFigure     = "answer difference between two replicas after a change"
	changeTarget     = "≤ 2 s (watch latency)"
	// changeLimit is changeTarget.
	changeLimit = 2 * time.Second
)

// replicaRows are the figures of the second replica loadgen starts once
// the leader wrote the ledger (the load run's): its RSS at rest, the same
// load as the leader's, compared with the leader's throughput and with its
// own answers served as pre-encoded bytes, and how far apart the two
// replicas showed a change.
func replicaRows(l *loadRun, o options) []row {
	n := thousands(o.loadClusters)
	rss := "RSS at " + n + " clusters, a follower replica at rest"
	load := fmt.Sprintf("load on a follower at %s clusters (%d connections) vs the leader's", n, o.loadConns)
	const loadTarget = "≥ 0.83x (at most 1.2x slower)"
	if l == nil || l.Follower == nil {
		return []row{notMeasured(rss, "≤ 60 MiB", "the load run failed"), notMeasured(load, loadTarget, "the load run failed"),
			notMeasured(preEncodedFigure, preEncodedTarget, "the load run failed"), notMeasured(changeFigure, changeTarget, "the load run failed")}
	}
	f := l.Follower
	rest := mib(f.Rest.RSS)
	out := []row{{rss, fmt.Sprintf("%.1f MiB%s", rest, f.Rest.parts()), "≤ 60 MiB", judge(rest > 0 && rest <= 60)}}
	if f.Requests > 0 && l.Throughput > 0 {
		ratio := f.Throughput / l.Throughput
		out = append(out, row{load, fmt.Sprintf("%.2fx (%.0f vs %.0f requests/s, %d errors)", ratio, f.Throughput, l.Throughput, f.Errors),
			loadTarget, judge(ratio >= 1/1.2 && f.Errors == 0)})
	} else {
		out = append(out, notMeasured(load, loadTarget, "no load on the follower"))
	}
	return append(out, preEncodedRow(l, o), changeRow(f))
}

// preEncodedRow is the follower's throughput against its own answers,
// captured and served by a bare net/http server under the same load: the
// ratio is how many times slower the follower is.
func preEncodedRow(l *loadRun, o options) row {
	f := l.Follower
	switch {
	case f.Requests == 0 || f.Throughput <= 0:
		return notMeasured(preEncodedFigure, preEncodedTarget, "no load on the follower")
	case f.PreEncodedRequests == 0 && f.PreEncodedError != "":
		return notMeasured(preEncodedFigure, preEncodedTarget, "the follower's answers could not be served pre-encoded: "+cell(f.PreEncodedError))
	case f.PreEncodedRequests == 0 || f.PreEncodedThroughput <= 0:
		return notMeasured(preEncodedFigure, preEncodedTarget, "loadgen served no pre-encoded bytes")
	case f.PreEncodedErrors > 0:
		return notMeasured(preEncodedFigure, preEncodedTarget, fmt.Sprintf("%d errors from the pre-encoded server (%s)", f.PreEncodedErrors, cell(f.PreEncodedError)))
	}
	conns := l.Connections
	if conns == 0 {
		conns = o.loadConns
	}
	ratio := f.PreEncodedThroughput / f.Throughput
	return row{preEncodedFigure,
		fmt.Sprintf("%.2fx (%.0f requests/s from the follower vs %.0f from its answers pre-encoded, %d connections, %s each, the same inputs; the pre-encoded server runs in loadgen's process)",
			ratio, f.Throughput, f.PreEncodedThroughput, conns, o.loadDuration),
		preEncodedTarget, judge(ratio <= 1.2)}
}

// changeRow is how far apart the two replicas first answered with a
// cluster added upstream.
func changeRow(f *followerRun) row {
	c := f.Change
	switch {
	case c == nil:
		return notMeasured(changeFigure, changeTarget, "loadgen made no change upstream (no load on the follower?)")
	case c.Error != "":
		return notMeasured(changeFigure, changeTarget, "the change was not seen by both replicas: "+cell(c.Error))
	case c.Leader <= 0 || c.Follower <= 0:
		return notMeasured(changeFigure, changeTarget, "loadgen reported no time for a replica")
	}
	diff, lead := time.Duration(c.Difference), time.Duration(c.Follower-c.Leader)
	order := "after"
	if lead < 0 {
		order = "before"
	}
	measured := fmt.Sprintf("%d ms (the leader showed it %.1f s after the change, the follower %d ms %s the leader; each time within %d ms)",
		diff.Milliseconds(), time.Duration(c.Leader).Seconds(), lead.Abs().Milliseconds(), order, time.Duration(c.Resolution).Milliseconds())
	return row{changeFigure, measured, changeTarget, judge(diff <= changeLimit)}
}

// cell makes a message from loadgen fit in one cell of the report's
// table.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}
