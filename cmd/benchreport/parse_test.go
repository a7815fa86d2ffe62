package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator
cpu: AMD EPYC
BenchmarkGetParams/clusters=100/preencoded-2         	   12000	     95000 ns/op	 540.10 MB/s	    5000 B/op	      60 allocs/op
BenchmarkGetParams/clusters=100/getparams-2          	   10000	    120000 ns/op	         1.263 x-preencoded	 430.00 MB/s	    6000 B/op	      70 allocs/op
PASS
ok  	github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator	10.1s
pkg: github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret
BenchmarkColdSync2000 	       1	8123456789 ns/op	         8.100 cold-s	         1.000 steady-lists	         0 steady-writes
`

func TestParseBench(t *testing.T) {
	lines, err := parseBench(strings.NewReader(sample))
	if err != nil || len(lines) != 3 {
		t.Fatalf("parsed %d lines, error %v", len(lines), err)
	}
	gp, ok := find(lines, "/generator", "BenchmarkGetParams/clusters=100/getparams")
	if !ok || gp.N != 10000 || gp.Metrics["ns/op"] != 120000 || gp.Metrics["x-preencoded"] != 1.263 || gp.Metrics["allocs/op"] != 70 {
		t.Fatalf("getparams line: %+v", gp)
	}
	cs, ok := find(lines, "/clustersecret", "BenchmarkColdSync2000")
	if !ok || cs.Metrics["cold-s"] != 8.1 || cs.Metrics["steady-writes"] != 0 {
		t.Fatalf("cold sync line: %+v", cs)
	}
	if _, ok := find(lines, "/generator", "BenchmarkColdSync2000"); ok {
		t.Fatal("found a benchmark under another package")
	}
}

func TestParseE2E(t *testing.T) {
	for _, tc := range []struct {
		log     string
		want    e2eFigure
		present bool
	}{
		{"=== RUN TestE2E\n    e2e_test.go:204: time-to-Secret: 3.1s, time-to-Application: 4.2s (refresh interval 5s, trigger on)\ntime-to-Application: 4.2s\n",
			e2eFigure{ToApplication: 4200 * time.Millisecond, Refresh: 5 * time.Second}, true},
		{"time-to-Application: 1.0s\nother\ntime-to-Application: 12.5s\n", e2eFigure{ToApplication: 12500 * time.Millisecond}, true},
		{"--- FAIL: TestE2E\n", e2eFigure{}, false},
	} {
		got, ok := parseE2E(tc.log)
		if ok != tc.present || got != tc.want {
			t.Errorf("parseE2E(%q) = %+v, %v; want %+v, %v", tc.log, got, ok, tc.want, tc.present)
		}
	}
}

func TestFigures(t *testing.T) {
	out := sample + `pkg: github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/eks
BenchmarkClusters/clusters=2000/latency=0s/steady-2   78   15564882 ns/op   20.00 calls/refresh   0 describes/refresh
pkg: github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/aks
BenchmarkRefresh/steady-2   18   71922529 ns/op   11.00 calls/refresh   2.000 credcalls/refresh
pkg: github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/rancher
BenchmarkListClusters-2   100   1000000 ns/op
`
	lines, err := parseBench(strings.NewReader(out))
	require.NoError(t, err)
	sync := syncFixture(t)
	load := &loadRun{Clusters: 10000, PeakRSS: 90 << 20, StartupPeakRSS: 120 << 20, LogLines: 10}
	load.Load = &struct {
		Requests int64 `json:"requests"`
	}{Requests: 1000}
	load.Before.RSS, load.Before.Goroutines, load.After.Goroutines = 70<<20, 13, 13
	load.Throughput = 1000
	require.NoError(t, json.Unmarshal([]byte(`{"follower": {"rest": {"rssBytes": 52428800}, "requests": 5000, "requestsPerSecond": 500}}`), load))
	o := options{count: 1, loadClusters: 10000, loadConns: 200, loadDuration: "10s", syncSizes: []int{2000, 10000}, eventsClusters: 2000, e2e: true}

	rows := figures(lines, sync, map[int]*loadRun{10000: load}, nil, nil, o)
	got := map[string]string{}
	for _, r := range rows {
		got[r.figure] = r.verdict
	}
	for figure, want := range map[string]string{
		"getparams at 10,000 clusters vs pre-encoded bytes":                                                                                                  verdictNotMeasured, // no 10,000-cluster line
		"throughput at 100 clusters vs pre-encoded bytes":                                                                                                    verdictOK,          // 95000/120000 = 0.79x
		"cold sync, shipped binary, 2,000 Secrets (real kube-apiserver)":                                                                                     verdictOK,
		"cold sync, shipped binary, 10,000 Secrets (real kube-apiserver)":                                                                                    verdictOK,
		"steady state at 2,000 Secrets, 5 passes with nothing to change (apiserver's count)":                                                                 verdictOK, // a WATCH is neither
		"steady state at 10,000 Secrets, 5 passes with nothing to change (apiserver's count)":                                                                verdictMissed,
		"restart of the leader at 2,000 clusters, everything written: the apiserver's count up to its first pass":                                            verdictOK, // the refresh is no write of ours
		"restart of the leader at 10,000 clusters, everything written: the apiserver's count up to its first pass":                                           verdictMissed,
		"eks: upstream calls per steady refresh (2,000 clusters, 4 regions)":                                                                                 verdictOK,
		"aks: upstream calls per steady refresh (500 clusters, 5 subscriptions)":                                                                             verdictMissed,      // credential reads
		"rancher: requests per listing (10,000 clusters, warm client)":                                                                                       verdictNotMeasured, // no metrics: never read as 0
		"rancher events: new cluster in Rancher → in the plugin answer (2,000 clusters, interval 5m, defaults)":                                              verdictNotMeasured, // no events run
		"rancher events: listings for a burst of 200 changes within 2 s (2,000 clusters)":                                                                    verdictNotMeasured,
		"rancher events: extra listings in 60 s with no change (2,000 clusters)":                                                                             verdictNotMeasured,
		"RSS at 10,000 clusters, distinct CA each, Secrets, refresh trigger and ClusterProfile ledger on (the leader), at rest":                              verdictOK,
		"cold start, shipped binary, 2,000 clusters: ClusterProfiles and their status written":                                                               verdictMissed, // 27 s > 15 s
		"cold start, shipped binary, 10,000 clusters: ClusterProfiles and their status written":                                                              verdictOK,
		"apiserver ceiling on this machine, 2,000 clusters: the same writes (Secret, ClusterProfile, its status) by an unthrottled client with no watchers":  verdictReference, // never ok: not a target of ours
		"apiserver ceiling on this machine, 10,000 clusters: the same writes (Secret, ClusterProfile, its status) by an unthrottled client with no watchers": verdictReference,
		"RSS at 10,000 clusters, a follower replica at rest":                                                                                                 verdictOK,
		"load on a follower at 10,000 clusters (200 connections) vs the leader's":                                                                            verdictMissed, // 500 vs 1000 requests/s
		"getparams on a follower vs pre-encoded bytes":                                                                                                       verdictNotMeasured,
		"answer difference between two replicas after a change":                                                                                              verdictNotMeasured,
		"RSS at 10,000 clusters, start-up peak (first listing, cold sync) vs at rest":                                                                        verdictMissed, // 120/70 = 1.71x
		"RSS at 10,000 clusters, peak under 200 connections for 10s":                                                                                         verdictMissed,
		"load at 10,000 clusters (200 connections, 10s): errors, goroutine growth":                                                                           verdictOK,
		"log lines outside the configured format (JSON), every run of the binary":                                                                            verdictMissed,
		"time-to-Application (new cluster → Application, e2e, no race detector)":                                                                             verdictNotMeasured,
	} {
		assert.Equal(t, want, got[figure], figure)
	}
	assert.Len(t, rows, 28, "one row per figure")

	t.Run("nothing measured: every row says so and none is ok", func(t *testing.T) {
		for _, r := range figures(nil, nil, nil, nil, nil, o) {
			assert.Equal(t, verdictNotMeasured, r.verdict, r.figure)
			assert.Contains(t, r.measured, "not measured", r.figure)
		}
	})
	t.Run("time-to-Application from this run", func(t *testing.T) {
		rows := figures(nil, nil, nil, nil, &e2eFigure{ToApplication: 4 * time.Second, Refresh: 2 * time.Second}, o)
		assert.Equal(t, verdictOK, rows[len(rows)-1].verdict)
		rows = figures(nil, nil, nil, nil, &e2eFigure{ToApplication: 13 * time.Second, Refresh: 2 * time.Second}, o)
		assert.Equal(t, verdictMissed, rows[len(rows)-1].verdict)
	})
}

// TestCeilingRows: the apiserver's ceiling is a reference row right after
// each cold start's, measured from the sync run's JSON, not measured
// without it, and never a verdict on the cold start.
func TestCeilingRows(t *testing.T) {
	o := options{count: 1, loadClusters: 10000, loadConns: 200, loadDuration: "10s", syncSizes: []int{2000, 10000}, e2e: true}
	sync := syncFixture(t)
	rows := figures(nil, sync, nil, nil, nil, o)
	byFigure := map[string]row{}
	for _, r := range rows {
		byFigure[r.figure] = r
	}
	const ceiling2k = "apiserver ceiling on this machine, 2,000 clusters: the same writes (Secret, ClusterProfile, its status) by an unthrottled client with no watchers"
	const ceiling10k = "apiserver ceiling on this machine, 10,000 clusters: the same writes (Secret, ClusterProfile, its status) by an unthrottled client with no watchers"
	for _, tc := range []struct {
		name, figure, after string
		want                row
	}{
		{name: "within the target", figure: ceiling2k,
			after: "cold start, shipped binary, 2,000 clusters: ClusterProfiles and their status written",
			want: row{ceiling2k, "14.1 s (Secrets 2.4 s, ClusterProfiles 4.7 s, status 7.0 s)",
				"the cold start's target (≤ 15s)", verdictReference}},
		{name: "above the target", figure: ceiling10k,
			after: "cold start, shipped binary, 10,000 clusters: ClusterProfiles and their status written",
			want: row{ceiling10k, "70.2 s (Secrets 11.8 s, ClusterProfiles 23.4 s, status 35.0 s); the target is below what this machine's apiserver can do",
				"the cold start's target (≤ 1m0s)", verdictReference}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, byFigure[tc.figure])
			at := slices.IndexFunc(rows, func(r row) bool { return r.figure == tc.figure })
			require.Positive(t, at)
			assert.Equal(t, tc.after, rows[at-1].figure, "right after the cold start's row")
		})
	}
	assert.Equal(t, verdictMissed, byFigure["cold start, shipped binary, 2,000 clusters: ClusterProfiles and their status written"].verdict,
		"the cold start is judged against its target, whatever the ceiling")

	for _, tc := range []struct {
		name string
		runs map[int]*loadRun
		why  string
	}{
		{name: "a sync run without a ceiling", runs: map[int]*loadRun{2000: {Clusters: 2000, Sync: sync[2000].Sync}},
			why: "not measured: the sync run measured no ceiling (loadgen -ceiling)"},
		{name: "no sync run", runs: nil, why: "not measured: the sync run failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := figures(nil, tc.runs, nil, nil, nil, o)
			at := slices.IndexFunc(rows, func(r row) bool { return r.figure == ceiling2k })
			require.GreaterOrEqual(t, at, 0)
			assert.Equal(t, row{ceiling2k, tc.why, "the cold start's target (≤ 15s)", verdictNotMeasured}, rows[at])
		})
	}
}

// syncFixture is the sync run's JSON (cmd/loadgen -secrets -ceiling) at
// 2,000 and 10,000 clusters, by fleet size.
func syncFixture(t *testing.T) map[int]*loadRun {
	t.Helper()
	var syncRuns []loadRun
	require.NoError(t, json.Unmarshal([]byte(`[
	  {"clusters": 2000, "logLines": 40, "foreignLogLines": 0, "readyAfterNs": 27000000000,
	   "sync": {"secrets": 2000, "coldSyncNs": 8400000000, "ledgerNs": 27000000000, "steadyPasses": 5, "steadyRequests": {"WATCH secrets": 1},
	            "restartRequests": {"LIST clusterprofiles": 1, "PATCH applicationsets": 2, "WATCH secrets": 1}},
	   "ceiling": {"workers": 16, "secretsNs": 2400000000, "createsNs": 4700000000, "statusNs": 7000000000, "totalNs": 14100000000, "writes": 6000}},
	  {"clusters": 10000, "logLines": 40, "foreignLogLines": 1, "readyAfterNs": 51000000000, "firstForeignLogLine": "I1123 12:00:00.000000 1 request.go] Waited",
	   "sync": {"secrets": 10000, "coldSyncNs": 49000000000, "ledgerNs": 55000000000, "steadyPasses": 5, "steadyRequests": {"LIST secrets": 5},
	            "restartRequests": {"APPLY clusterprofiles": 3}},
	   "ceiling": {"workers": 16, "secretsNs": 11800000000, "createsNs": 23400000000, "statusNs": 35000000000, "totalNs": 70200000000, "writes": 30000}}]`), &syncRuns))
	return map[int]*loadRun{2000: &syncRuns[0], 10000: &syncRuns[1]}
}

func TestMedianOfRuns(t *testing.T) {
	out := "pkg: x/generator\n"
	for _, r := range [][2]int{{100, 120}, {90, 300}, {130, 110}} { // preencoded, getparams ns/op
		out += fmt.Sprintf("BenchmarkGetParams/clusters=10000/preencoded-2 10 %d ns/op\n", r[0])
	}
	for _, r := range [][2]int{{100, 120}, {90, 300}, {130, 110}} {
		out += fmt.Sprintf("BenchmarkGetParams/clusters=10000/getparams-2 10 %d ns/op\n", r[1])
	}
	lines, _ := parseBench(strings.NewReader(out))
	if gp, pre := nsPerOp(lines, 10000); gp != 120 || pre != 100 {
		t.Fatalf("medians %v, %v; want 120, 100", gp, pre)
	}
	if gp, pre := nsPerOp(lines, 100); gp != 0 || pre != 0 {
		t.Fatalf("medians at a size not measured: %v, %v", gp, pre)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("median of an even count: %v", m)
	}
}

// TestRSSRowsSayWhatRSSIsMadeOf: the leader's and the follower's RSS at
// rest carry the binary's pages and the heap in use when loadgen read
// them, and only then.
func TestRSSRowsSayWhatRSSIsMadeOf(t *testing.T) {
	o := options{count: 1, loadClusters: 10000, loadConns: 200, loadDuration: "10s", syncSizes: []int{2000}, e2e: true}
	measured := func(load *loadRun) map[string]string {
		out := map[string]string{}
		for _, r := range figures(nil, nil, map[int]*loadRun{10000: load}, nil, nil, o) {
			out[r.figure] = r.measured
		}
		return out
	}
	const leader = "RSS at 10,000 clusters, distinct CA each, Secrets, refresh trigger and ClusterProfile ledger on (the leader), at rest"
	const follower = "RSS at 10,000 clusters, a follower replica at rest"
	load := &loadRun{Clusters: 10000}
	require.NoError(t, json.Unmarshal([]byte(`{"load": {"requests": 10}, "before": {"rssBytes": 121000000, "rssFileBytes": 42672947, "heapInUseBytes": 67108864},
	  "follower": {"rest": {"rssBytes": 113246208, "rssFileBytes": 42672947, "heapInUseBytes": 61761536}, "requests": 5}}`), load))
	got := measured(load)
	assert.Equal(t, "115.4 MiB (of it the binary's pages 40.7 MiB; heap in use 64.0 MiB)", got[leader])
	assert.Equal(t, "108.0 MiB (of it the binary's pages 40.7 MiB; heap in use 58.9 MiB)", got[follower])

	load.Before.RSSFile, load.Follower.Rest.HeapInUse = 0, 0
	got = measured(load)
	assert.Equal(t, "115.4 MiB", got[leader], "no breakdown without the binary's pages")
	assert.Equal(t, "108.0 MiB", got[follower], "no breakdown without the heap")
}

// TestReplicaRows: the follower against its answers pre-encoded, and the
// two replicas after a change, are measured rows from the load run's JSON,
// judged against their targets, and not measured when the run lacks them.
func TestReplicaRows(t *testing.T) {
	o := options{count: 1, loadClusters: 10000, loadConns: 200, loadDuration: "10s", syncSizes: []int{2000}, e2e: true}
	const follower = `"rest": {"rssBytes": 52428800}, "requests": 34670, "requestsPerSecond": 3467, "errors": 0`
	const preEncoded = `"preEncodedRequests": 37100, "preEncodedRequestsPerSecond": 3710, "preEncodedErrors": 0`
	const change = `"change": {"cluster": "tenant-00-dev-010000", "leaderNs": 41250000000, "followerNs": 41262000000, "differenceNs": 12000000, "resolutionNs": 21000000}`
	for _, tc := range []struct {
		name             string
		json             string // the load run's; "" for none
		preEncoded, diff row
	}{
		{name: "both within their targets", json: `{"follower": {` + follower + `, ` + preEncoded + `, ` + change + `}}`,
			preEncoded: row{preEncodedFigure, "1.07x (3467 requests/s from the follower vs 3710 from its answers pre-encoded, 200 connections, 10s each, the same inputs; the pre-encoded server runs in loadgen's process)", "≤ 1.2x", verdictOK},
			diff:       row{changeFigure, "12 ms (the leader showed it 41.2 s after the change, the follower 12 ms after the leader; each time within 21 ms)", "≤ 2 s (watch latency)", verdictOK}},
		{name: "both missed, the follower first",
			json: `{"follower": {` + follower + `, "preEncodedRequests": 50000, "preEncodedRequestsPerSecond": 5000,
			  "change": {"leaderNs": 5000000000, "followerNs": 2500000000, "differenceNs": 2500000000, "resolutionNs": 20000000}}}`,
			preEncoded: row{preEncodedFigure, "1.44x (3467 requests/s from the follower vs 5000 from its answers pre-encoded, 200 connections, 10s each, the same inputs; the pre-encoded server runs in loadgen's process)", "≤ 1.2x", verdictMissed},
			diff:       row{changeFigure, "2500 ms (the leader showed it 5.0 s after the change, the follower 2500 ms before the leader; each time within 20 ms)", "≤ 2 s (watch latency)", verdictMissed}},
		{name: "errors under the pre-encoded load, a change not seen",
			json: `{"follower": {` + follower + `, "preEncodedRequests": 100, "preEncodedRequestsPerSecond": 10, "preEncodedErrors": 3, "preEncodedError": "under load: {}: status 404",
			  "change": {"cluster": "x", "error": "the follower: not in the answer 1m30s after the change (4000 answers) | context deadline exceeded"}}}`,
			preEncoded: notMeasured(preEncodedFigure, "≤ 1.2x", "3 errors from the pre-encoded server (under load: {}: status 404)"),
			diff:       notMeasured(changeFigure, "≤ 2 s (watch latency)", `the change was not seen by both replicas: the follower: not in the answer 1m30s after the change (4000 answers) \| context deadline exceeded`)},
		{name: "answers not captured",
			json:       `{"follower": {` + follower + `, "preEncodedError": "capture {}: status 503", ` + change + `}}`,
			preEncoded: notMeasured(preEncodedFigure, "≤ 1.2x", "the follower's answers could not be served pre-encoded: capture {}: status 503"),
			diff:       row{changeFigure, "12 ms (the leader showed it 41.2 s after the change, the follower 12 ms after the leader; each time within 21 ms)", "≤ 2 s (watch latency)", verdictOK}},
		{name: "a loadgen without them", json: `{"follower": {` + follower + `}}`,
			preEncoded: notMeasured(preEncodedFigure, "≤ 1.2x", "loadgen served no pre-encoded bytes"),
			diff:       notMeasured(changeFigure, "≤ 2 s (watch latency)", "loadgen made no change upstream (no load on the follower?)")},
		{name: "no load on the follower", json: `{"follower": {"rest": {"rssBytes": 52428800}}}`,
			preEncoded: notMeasured(preEncodedFigure, "≤ 1.2x", "no load on the follower"),
			diff:       notMeasured(changeFigure, "≤ 2 s (watch latency)", "loadgen made no change upstream (no load on the follower?)")},
		{name: "no follower", json: `{}`,
			preEncoded: notMeasured(preEncodedFigure, "≤ 1.2x", "the load run failed"),
			diff:       notMeasured(changeFigure, "≤ 2 s (watch latency)", "the load run failed")},
		{name: "no load run",
			preEncoded: notMeasured(preEncodedFigure, "≤ 1.2x", "the load run failed"),
			diff:       notMeasured(changeFigure, "≤ 2 s (watch latency)", "the load run failed")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var load map[int]*loadRun
			if tc.json != "" {
				l := &loadRun{Clusters: 10000, Connections: 200, Throughput: 3226}
				require.NoError(t, json.Unmarshal([]byte(tc.json), l))
				load = map[int]*loadRun{10000: l}
			}
			byFigure := map[string]row{}
			for _, r := range figures(nil, nil, load, nil, nil, o) {
				byFigure[r.figure] = r
			}
			assert.Equal(t, tc.preEncoded, byFigure[preEncodedFigure])
			assert.Equal(t, tc.diff, byFigure[changeFigure])
		})
	}
}
