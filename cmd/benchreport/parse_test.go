package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
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
`
	lines, err := parseBench(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	load := &loadFigures{Clusters: 10000, Errors: 0, PeakRSS: 90 << 20, StartupPeakRSS: 190 << 20}
	load.Before.RSS, load.Before.Goroutines, load.After.Goroutines = 70<<20, 13, 13
	rows := figures(lines, load, options{count: 1, loadClusters: 10000, loadConns: 200, loadDuration: "10s", e2eLog: t.TempDir() + "/none.log"})
	got := map[string]row{}
	for _, r := range rows {
		got[strings.SplitN(r.figure, " ", 2)[0]] = r
	}
	for first, want := range map[string]string{
		"getparams":           verdictMissing, // no 10,000-cluster line in the sample
		"throughput":          verdictOK,      // 95000/120000 = 0.79x
		"cold":                verdictOK,
		"steady-state":        verdictOK,
		"eks:":                verdictOK,
		"aks:":                verdictMissed, // credential reads in a steady refresh
		"rancher:":            verdictMissing,
		"load":                verdictOK,
		"time-to-Application": verdictMissing,
	} {
		if got[first].verdict != want {
			t.Errorf("%s: verdict %q, want %q (%+v)", first, got[first].verdict, want, got[first])
		}
	}
	if !got["time-to-Application"].optional {
		t.Error("a missing e2e log must not fail the report")
	}
	var rss []string
	for _, r := range rows {
		if strings.HasPrefix(r.figure, "RSS") {
			rss = append(rss, r.verdict)
		}
	}
	if len(rss) != 3 || rss[0] != verdictOK || rss[1] != verdictMissed || rss[2] != verdictInfo {
		t.Errorf("RSS verdicts %v, want [ok missed info] (70 MiB idle, 90 MiB peak under load, start-up peak without target)", rss)
	}
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
