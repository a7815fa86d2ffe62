// Command loadgen measures the plugin API under load. For each fleet size
// it writes that many synthetic clusters into static clusters files,
// starts the service binary on a loopback port, waits for /readyz, checks
// that every input is answered with exactly the clusters it selects, waits
// -settle (the memory start-up used but no longer holds goes back to the
// system within seconds) and reads the "before" figures, then
// drives POST /api/v1/getparams.execute over -conns keep-alive connections
// for -duration with a mix of inputs (every cluster, each tenant, label
// selectors, a source). It reports throughput, p50/p99 latency, errors
// (non-200, transport, answers that differ from the verified one), and the
// service's goroutines, RSS and heap in use before the load, during it and
// after an idle pause.
//
// It exits non-zero when any request failed, or when the service has more
// goroutines after the idle pause than before the load (beyond
// -goroutine-slack): the target is 0 errors and no growth.
//
//	go run ./cmd/loadgen                          # 1,000 and 10,000 clusters, 200 connections, 60 s each
//	go run ./cmd/loadgen -clusters 10000 -duration 10s -json load.json
//
// Everything listens on and connects to 127.0.0.1 only; the clusters'
// servers use the reserved .invalid domain and are never contacted.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const token = "loadgen-token"

type options struct {
	sizes          []int
	conns          int
	duration, idle time.Duration
	settle         time.Duration
	binary         string
	jsonPath       string
	slack          int
	readyTimeout   time.Duration
	distinctCA     bool
	// secrets runs the service against a real kube-apiserver (envtest
	// assets in kubeAssets) with cluster Secrets and the refresh trigger
	// on; resync and steadyPasses shape the steady-state window.
	secrets      bool
	kubeAssets   string
	resync       time.Duration
	steadyPasses int
	syncTimeout  time.Duration
}

// result is one fleet size's figures, also written with -json.
type result struct {
	Clusters    int           `json:"clusters"`
	Connections int           `json:"connections"`
	Duration    time.Duration `json:"durationNs"`
	Inputs      int           `json:"inputs"`
	Load        *loadResult   `json:"load"`
	Throughput  float64       `json:"requestsPerSecond"`
	P50         time.Duration `json:"p50Ns"`
	P99         time.Duration `json:"p99Ns"`
	Max         time.Duration `json:"maxNs"`
	Errors      int64         `json:"errors"`
	Before      processStats  `json:"before"`
	During      processStats  `json:"during"`
	After       processStats  `json:"after"`
	// PeakRSSBytes is the high-water mark of RSS during the load and the
	// idle pause; StartupPeakRSSBytes is the one before (start-up, first
	// listing, verification), or 0 when the mark could not be reset and
	// PeakRSSBytes covers the process's whole life.
	PeakRSSBytes        float64       `json:"peakRSSBytes"`
	StartupPeakRSSBytes float64       `json:"startupPeakRSSBytes"`
	ReadyAfter          time.Duration `json:"readyAfterNs"`
	ByKind              []kindStats   `json:"byInput"`
	// Sync is the cluster Secrets' figures, with -secrets.
	Sync *syncResult `json:"sync,omitempty"`
	// LogLines is the number of lines the service logged, ForeignLogLines
	// those not in the configured format (JSON), FirstForeignLogLine the
	// first of them.
	LogLines            int    `json:"logLines"`
	ForeignLogLines     int    `json:"foreignLogLines"`
	FirstForeignLogLine string `json:"firstForeignLogLine,omitempty"`
}

// syncResult is what the apiserver saw of the service's cluster Secrets.
type syncResult struct {
	Secrets int `json:"secrets"`
	// ColdSync is from the service's start to the last of its Secrets
	// seen by a watch opened before it started.
	ColdSync time.Duration `json:"coldSyncNs"`
	// SteadyPasses reconcile passes with nothing to change made the
	// SteadyRequests, counted by the apiserver (apiserver_request_total,
	// "VERB resource", Secrets and ApplicationSets, non-zero only).
	SteadyPasses   int                `json:"steadyPasses"`
	SteadyRequests map[string]float64 `json:"steadyRequests"`
	SteadyWindow   time.Duration      `json:"steadyWindowNs"`
}

type kindStats struct {
	Kind     string        `json:"kind"`
	Requests int           `json:"requests"`
	P50      time.Duration `json:"p50Ns"`
	P99      time.Duration `json:"p99Ns"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizes := fs.String("clusters", "1000,10000", "comma-separated fleet sizes, one run each")
	var o options
	fs.IntVar(&o.conns, "conns", 200, "concurrent keep-alive connections")
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "load duration per fleet size")
	fs.DurationVar(&o.settle, "settle", 5*time.Second, "pause after start-up and the answers' verification, before reading the figures the load is compared with")
	fs.DurationVar(&o.idle, "idle", 10*time.Second, "pause after the load, connections closed, before reading the figures again")
	fs.StringVar(&o.binary, "binary", "", "service binary (default: go build ./cmd/argocd-cluster-discovery into a temporary directory)")
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	fs.IntVar(&o.slack, "goroutine-slack", 2, "goroutines the service may have after the idle pause beyond its count before the load")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 2*time.Minute, "how long the service may take to become ready")
	fs.BoolVar(&o.secrets, "secrets", false, "run against a real kube-apiserver and etcd (envtest, from KUBEBUILDER_ASSETS) with cluster Secrets and the ApplicationSet refresh trigger on: reports the cold sync and the requests of -steady-passes passes")
	fs.DurationVar(&o.resync, "resync", 0, "with -secrets: secrets.resync of the service (0: its default, 5m)")
	fs.IntVar(&o.steadyPasses, "steady-passes", 0, "with -secrets: reconcile passes with nothing to change to count the apiserver's requests over (set -resync so that they come)")
	fs.DurationVar(&o.syncTimeout, "sync-timeout", 5*time.Minute, "with -secrets: how long the cold sync may take")
	ca := fs.String("ca", "distinct", "CA certificates of the fleet: distinct (one per cluster, as EKS and AKS have) or shared (one for all)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch *ca {
	case "distinct", "shared":
		o.distinctCA = *ca == "distinct"
	default:
		fmt.Fprintf(stderr, "-ca: %q is neither distinct nor shared\n", *ca)
		return 2
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 1_000_000 {
			fmt.Fprintf(stderr, "-clusters: %q is not a fleet size (1 to 1,000,000)\n", s)
			return 2
		}
		o.sizes = append(o.sizes, n)
	}
	if o.conns < 1 || o.conns > 10_000 || o.duration < 0 || o.duration == 0 && !o.secrets {
		fmt.Fprintln(stderr, "-conns must be 1 to 10,000 and -duration positive (0 only with -secrets: no load)")
		return 2
	}
	if o.secrets {
		if o.kubeAssets = os.Getenv("KUBEBUILDER_ASSETS"); o.kubeAssets == "" {
			fmt.Fprintln(stderr, "-secrets needs KUBEBUILDER_ASSETS (kube-apiserver, etcd and argocd-crds/: make testbin)")
			return 2
		}
	}
	if o.steadyPasses > 0 && (!o.secrets || o.resync <= 0) {
		fmt.Fprintln(stderr, "-steady-passes needs -secrets and a -resync")
		return 2
	}

	tmp, err := os.MkdirTemp("", "loadgen-")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if o.binary == "" {
		if o.binary, err = buildService(context.Background(), tmp); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	} else if o.binary, err = filepath.Abs(o.binary); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}

	var results []result
	failed := false
	for _, n := range o.sizes {
		dir := filepath.Join(tmp, strconv.Itoa(n))
		if err := os.Mkdir(dir, 0o700); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		r, err := runSize(o, n, dir, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "loadgen: %d clusters: %v\n", n, err)
			return 1
		}
		report(stdout, r)
		if r.Errors > 0 || r.After.Goroutines > r.Before.Goroutines+o.slack {
			failed = true
		}
		results = append(results, *r)
	}
	if o.jsonPath != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(o.jsonPath, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	if failed {
		fmt.Fprintln(stdout, "FAIL: errors under load or goroutines left after it")
		return 1
	}
	return 0
}

func runSize(o options, n int, dir string, log io.Writer) (*result, error) {
	ctx := context.Background()
	cs := fleet(n)
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	var (
		kube  *kubeEnv
		sw    *secretWatch
		extra string
	)
	if o.secrets {
		fmt.Fprintf(log, "loadgen: %d clusters: starting kube-apiserver and etcd\n", n)
		if kube, err = startKube(ctx, o.kubeAssets, dir); err != nil {
			return nil, err
		}
		defer kube.stop()
		if sw, err = kube.watchSecrets(ctx); err != nil {
			return nil, err
		}
		defer sw.stop()
		extra = kubeConfigSection(kube.kubeconfig, o.resync)
	}
	cfg, err := writeService(dir, cs, addr, token, o.distinctCA, extra)
	if err != nil {
		return nil, fmt.Errorf("write fleet: %w", err)
	}
	fmt.Fprintf(log, "loadgen: %d clusters: starting %s on %s\n", n, o.binary, addr)
	started := time.Now()
	svc, err := startService(o.binary, cfg, addr, filepath.Join(dir, "service.log"))
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = svc.stop(30 * time.Second)
		}
	}()
	if err := svc.waitReady(o.readyTimeout); err != nil {
		return nil, err
	}
	r := &result{Clusters: n, Connections: o.conns, Duration: o.duration, ReadyAfter: time.Since(started)}
	if o.secrets {
		last, err := sw.waitFor(n, o.syncTimeout, svc.exited())
		if err != nil {
			return nil, fmt.Errorf("cold sync: %w; log:\n%s", err, svc.logTail())
		}
		r.Sync = &syncResult{Secrets: n, ColdSync: last.Sub(started)}
		fmt.Fprintf(log, "loadgen: %d clusters: %d Secrets written %s after the start\n", n, n, r.Sync.ColdSync.Round(time.Millisecond))
	}
	ins := inputs()
	r.Inputs = len(ins)
	if err := verify(ctx, svc.base, token, ins, cs); err != nil {
		return nil, err
	}
	time.Sleep(o.settle)
	if o.steadyPasses > 0 {
		if err := steady(ctx, o, kube, svc, r.Sync, log); err != nil {
			return nil, err
		}
	}
	if r.Before, err = svc.scrape(); err != nil {
		return nil, err
	}
	if peak := svc.peakRSS(); svc.resetPeakRSS() == nil {
		r.StartupPeakRSSBytes = peak
	} else {
		fmt.Fprintln(log, "loadgen: cannot reset the service's peak RSS; the peak reported covers start-up too")
	}
	if o.duration > 0 {
		fmt.Fprintf(log, "loadgen: %d clusters: ready after %s, answers verified; %d connections for %s\n", n, r.ReadyAfter.Round(time.Millisecond), o.conns, o.duration)
		during := make(chan processStats, 1)
		go func() {
			time.Sleep(o.duration / 2)
			st, err := svc.scrape()
			if err != nil {
				fmt.Fprintf(log, "loadgen: scrape during the load: %v\n", err)
			}
			during <- st
		}()
		r.Load = drive(svc.base, token, ins, o.conns, o.duration)
		r.During = <-during
		r.PeakRSSBytes = svc.peakRSS()
		time.Sleep(o.idle)
		if r.After, err = svc.scrape(); err != nil {
			return nil, err
		}
	}
	stopped = true
	if err := svc.stop(30 * time.Second); err != nil {
		return nil, err
	}
	if r.LogLines, r.ForeignLogLines, r.FirstForeignLogLine, err = svc.logFormat(); err != nil {
		return nil, fmt.Errorf("read the service's log: %w", err)
	}
	if r.Load == nil {
		return r, nil
	}
	slices.Sort(r.Load.all)
	r.P50, r.P99, r.Max = quantile(r.Load.all, 0.50), quantile(r.Load.all, 0.99), quantile(r.Load.all, 1)
	r.Throughput = float64(r.Load.Requests) / r.Load.Elapsed.Seconds()
	r.Errors = r.Load.errors()
	for _, k := range kinds(ins) {
		lat := r.Load.byKind[k]
		slices.Sort(lat)
		r.ByKind = append(r.ByKind, kindStats{Kind: k, Requests: len(lat), P50: quantile(lat, 0.5), P99: quantile(lat, 0.99)})
	}
	return r, nil
}

// steady counts the apiserver's requests over o.steadyPasses successful
// reconcile passes with nothing to change (the fleet is as written).
func steady(ctx context.Context, o options, kube *kubeEnv, svc *service, sr *syncResult, log io.Writer) error {
	const passes = "argocd_cluster_discovery_secrets_passes_total"
	success := map[string]string{"result": "success"}
	p0, err := svc.serviceCounter(passes, success)
	if err != nil {
		return err
	}
	before, err := kube.requestCounts(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	deadline := t0.Add(time.Duration(o.steadyPasses+2)*o.resync + 30*time.Second)
	for {
		p, err := svc.serviceCounter(passes, success)
		if err != nil {
			return err
		}
		if p >= p0+float64(o.steadyPasses) {
			sr.SteadyPasses = int(p - p0)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("steady state: %g of %d passes after %s", p-p0, o.steadyPasses, time.Since(t0).Round(time.Second))
		}
		time.Sleep(100 * time.Millisecond)
	}
	after, err := kube.requestCounts(ctx)
	if err != nil {
		return err
	}
	sr.SteadyRequests, sr.SteadyWindow = sumCounts(before, after), time.Since(t0)
	fmt.Fprintf(log, "loadgen: %d passes with nothing to change in %s: apiserver requests %v\n", sr.SteadyPasses, sr.SteadyWindow.Round(time.Millisecond), sr.SteadyRequests)
	return nil
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func report(w io.Writer, r *result) {
	defer func() {
		fmt.Fprintf(w, "  log           %d lines, %d not in the configured format (JSON)\n", r.LogLines, r.ForeignLogLines)
		if r.FirstForeignLogLine != "" {
			fmt.Fprintf(w, "    first: %s\n", r.FirstForeignLogLine)
		}
	}()
	if sr := r.Sync; sr != nil {
		fmt.Fprintf(w, "\n== %d clusters, cluster Secrets on a real kube-apiserver\n", r.Clusters)
		fmt.Fprintf(w, "  cold sync     %d Secrets in %s from the start\n", sr.Secrets, sr.ColdSync.Round(time.Millisecond))
		if sr.SteadyPasses > 0 {
			fmt.Fprintf(w, "  steady state  %d passes in %s: apiserver requests %v\n", sr.SteadyPasses, sr.SteadyWindow.Round(time.Millisecond), sr.SteadyRequests)
		}
	}
	l := r.Load
	if l == nil {
		fmt.Fprintf(w, "  RSS           %s at rest (heap in use %s), peak at start-up %s\n", mib(r.Before.RSSBytes), mib(r.Before.HeapInUse), mib(r.StartupPeakRSSBytes))
		return
	}
	fmt.Fprintf(w, "\n== %d clusters, %d connections, %s, %d inputs (ready after %s)\n",
		r.Clusters, r.Connections, r.Duration, r.Inputs, r.ReadyAfter.Round(time.Millisecond))
	fmt.Fprintf(w, "  requests      %d in %s: %.0f req/s, %.1f MiB/s read\n", l.Requests, l.Elapsed.Round(time.Millisecond),
		r.Throughput, float64(l.Bytes)/(1<<20)/l.Elapsed.Seconds())
	fmt.Fprintf(w, "  latency       p50 %s   p99 %s   max %s\n", ms(r.P50), ms(r.P99), ms(r.Max))
	for _, k := range r.ByKind {
		fmt.Fprintf(w, "    %-10s  %7d requests   p50 %s   p99 %s\n", k.Kind, k.Requests, ms(k.P50), ms(k.P99))
	}
	fmt.Fprintf(w, "  errors        %d (non-200 %d, transport %d, wrong answer %d)\n", r.Errors, l.Non200, l.Transport, l.WrongBody)
	if l.firstError != "" {
		fmt.Fprintf(w, "    first: %s\n", l.firstError)
	}
	fmt.Fprintf(w, "  connections   %d opened for %d connections\n", l.Dials, r.Connections)
	fmt.Fprintf(w, "  goroutines    before %d   during %d   after %d (growth %+d)\n",
		r.Before.Goroutines, r.During.Goroutines, r.After.Goroutines, r.After.Goroutines-r.Before.Goroutines)
	fmt.Fprintf(w, "  RSS           before %s   during %s   after %s   peak under load %s   peak at start-up %s\n",
		mib(r.Before.RSSBytes), mib(r.During.RSSBytes), mib(r.After.RSSBytes), mib(r.PeakRSSBytes), mib(r.StartupPeakRSSBytes))
	fmt.Fprintf(w, "  RSS file-backed (the binary) before %s   after %s\n", mib(r.Before.RSSFileBytes), mib(r.After.RSSFileBytes))
	fmt.Fprintf(w, "  heap in use   before %s   during %s   after %s\n", mib(r.Before.HeapInUse), mib(r.During.HeapInUse), mib(r.After.HeapInUse))
}
