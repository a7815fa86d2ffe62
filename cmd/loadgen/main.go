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
// after an idle pause. With -secrets -ceiling it first times, on a fresh
// kube-apiserver and etcd, the service's cold-start writes (each cluster's
// Secret, ClusterProfile and its status) made by an unthrottled client with
// no watchers: the apiserver's ceiling on this machine.
//
// With -secrets -steady-passes it then stops the service, starts it again
// with secrets.resync -resync (the cold start runs with every setting at
// its default), checks its answers again, and counts the apiserver's
// requests over that many passes with nothing to change (sync.go); the
// follower below runs beside the restarted leader.
//
// With -secrets it then starts a follower replica of the same binary on the
// same ledger (follower.go): when it answers as the leader, its RSS at
// rest, and, with a load, the same load as the leader's. After it, the
// follower's answers to every input, captured byte for byte, are served by
// a bare net/http server in loadgen's process and get the same load again
// (preencoded.go): the follower's slowdown against pre-encoded bytes. Last,
// one cluster is appended to a static clusters file and both replicas are
// asked for every cluster every 20 ms until each answer holds it
// (change.go): how far apart the two replicas answer after a change. The
// leader picks the file up at its next listing (inventory.interval left at
// its default, so that this adds up to a listing interval to the run), and
// nothing is measured on the leader after the change.
//
// It exits non-zero when any request failed, or when the service has more
// goroutines after the idle pause than before the load (beyond
// -goroutine-slack): the target is 0 errors and no growth.
//
// With -events it measures Rancher's change events instead (events.go):
// the binary with one rancher source at inventory.interval 5m, every other
// setting at its default, against a fake Rancher (internal/fake/rancher)
// of -clusters clusters (2,000 unless given): a new cluster set in Rancher
// to the plugin answer (asked every 20 ms), the listings a burst of 200
// changes within 2 s causes, and the listings of -events-steady (60 s)
// with no change. It exits non-zero when one misses its target (5 s; 1 to
// 2 listings; none) or could not be measured.
//
//	go run ./cmd/loadgen                          # 1,000 and 10,000 clusters, 200 connections, 60 s each
//	go run ./cmd/loadgen -clusters 10000 -duration 10s -json load.json
//	go run ./cmd/loadgen -events -json events.json
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
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

const token = "loadgen-plugin-token"

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
	// ceiling, with secrets, first times the service's cold-start writes
	// by an ideal client on a kube-apiserver of their own (ceiling.go).
	ceiling bool
	// events measures Rancher's change events instead (events.go): a
	// fake Rancher of each size, eventsSteady the window with no change.
	events       bool
	eventsSteady time.Duration
}

func main() {
	// envtest logs through controller-runtime, which complains on stderr
	// (with a stack) when no logger is set: what it says is of no use here
	ctrllog.SetLogger(logr.Discard())
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, ok := parseOptions(args, stderr)
	if !ok {
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

	if o.events {
		return runEventsSizes(o, tmp, stdout, stderr)
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

// parseOptions reads and checks the flags; false when they are not usable
// (the reason written to stderr).
func parseOptions(args []string, stderr io.Writer) (options, bool) {
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
	fs.DurationVar(&o.resync, "resync", 0, "with -steady-passes: secrets.resync of the service restarted for the steady state (the cold start runs with every setting at its default)")
	fs.IntVar(&o.steadyPasses, "steady-passes", 0, "with -secrets: reconcile passes with nothing to change to count the apiserver's requests over (set -resync so that they come)")
	fs.BoolVar(&o.ceiling, "ceiling", false, "with -secrets: first time the service's cold-start writes (each cluster's Secret, ClusterProfile and its status) by an unthrottled client with no watchers, on a fresh kube-apiserver and etcd: the apiserver's ceiling")
	fs.DurationVar(&o.syncTimeout, "sync-timeout", 5*time.Minute, "with -secrets: how long the cold sync may take")
	fs.BoolVar(&o.events, "events", false, "measure Rancher's change events instead: the binary with one rancher source at interval 5m (every other setting its default) against a fake Rancher of -clusters clusters (default 2000): a new cluster to the answer, the listings of a burst of 200 changes within 2 s, the listings of -events-steady with no change")
	fs.DurationVar(&o.eventsSteady, "events-steady", 60*time.Second, "with -events: the window with no change")
	ca := fs.String("ca", "distinct", "CA certificates of the fleet: distinct (one per cluster, as EKS and AKS have) or shared (one for all)")
	if err := fs.Parse(args); err != nil {
		return o, false
	}
	if o.events {
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "clusters" })
		if !set {
			*sizes = "2000"
		}
		if o.secrets || o.ceiling || o.steadyPasses > 0 {
			fmt.Fprintln(stderr, "-events runs a configuration of its own: no -secrets, -ceiling or -steady-passes")
			return o, false
		}
		if o.eventsSteady <= 0 || o.eventsSteady >= eventsInterval/2 {
			fmt.Fprintf(stderr, "-events-steady must be positive and well under the interval (%s)\n", eventsInterval)
			return o, false
		}
	}
	switch *ca {
	case "distinct", "shared":
		o.distinctCA = *ca == "distinct"
	default:
		fmt.Fprintf(stderr, "-ca: %q is neither distinct nor shared\n", *ca)
		return o, false
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 1_000_000 {
			fmt.Fprintf(stderr, "-clusters: %q is not a fleet size (1 to 1,000,000)\n", s)
			return o, false
		}
		o.sizes = append(o.sizes, n)
	}
	if o.conns < 1 || o.conns > 10_000 || o.duration < 0 || o.duration == 0 && !o.secrets {
		fmt.Fprintln(stderr, "-conns must be 1 to 10,000 and -duration positive (0 only with -secrets: no load)")
		return o, false
	}
	if o.secrets {
		if o.kubeAssets = os.Getenv("KUBEBUILDER_ASSETS"); o.kubeAssets == "" {
			fmt.Fprintln(stderr, "-secrets needs KUBEBUILDER_ASSETS (kube-apiserver, etcd and argocd-crds/: make testbin)")
			return o, false
		}
	}
	if o.ceiling && !o.secrets {
		fmt.Fprintln(stderr, "-ceiling needs -secrets")
		return o, false
	}
	if o.steadyPasses > 0 && (!o.secrets || o.resync <= 0) {
		fmt.Fprintln(stderr, "-steady-passes needs -secrets and a -resync")
		return o, false
	}
	return o, true
}

func runSize(o options, n int, dir string, log io.Writer) (*result, error) {
	ctx := context.Background()
	cs := fleet(n)
	caData, err := newCAs(n, o.distinctCA)
	if err != nil {
		return nil, fmt.Errorf("fleet CAs: %w", err)
	}
	var ceiling *ceilingResult
	if o.ceiling {
		if ceiling, err = measureCeiling(ctx, o.kubeAssets, filepath.Join(dir, "ceiling"), cs, caData, log); err != nil {
			return nil, err
		}
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	ks := &kubeSide{}
	if o.secrets {
		if ks, err = startKubeSide(ctx, o, n, dir, log); err != nil {
			return nil, err
		}
		defer ks.stop()
	}
	cfg, err := writeService(dir, cs, caData, addr, token, ks.extra)
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
	ins := inputs()
	r := &result{Clusters: n, Connections: o.conns, Duration: o.duration, ReadyAfter: time.Since(started), Ceiling: ceiling, Inputs: len(ins)}
	if o.secrets {
		if r.Sync, err = waitColdSync(o, n, ks.secrets, ks.ledger, svc, started, log); err != nil {
			return nil, err
		}
	}
	if err := verify(ctx, svc.base, token, ins, cs); err != nil {
		return nil, err
	}
	time.Sleep(o.settle)
	if err := underLoad(o, n, svc, ins, r, log); err != nil {
		return nil, err
	}
	if o.steadyPasses > 0 {
		check := func(s *service) error { return verify(ctx, s.base, token, ins, cs) }
		if svc, cfg, err = steadyState(ctx, o, n, dir, addr, ks, svc, r.Sync, check, log); err != nil {
			stopped = true // steadyState stopped both processes
			return nil, err
		}
	}
	if o.secrets {
		if r.Follower, err = measureFollower(ctx, o, n, dir, svc, cfg, ins, cs, log); err != nil {
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
	r.summarize(ins)
	return r, nil
}

// underLoad reads the service's figures before the load (and its start-up
// peak RSS) into r, then, with a positive o.duration, drives the load and
// reads them during it and after the idle pause.
func underLoad(o options, n int, svc *service, ins []*input, r *result, log io.Writer) error {
	var err error
	if r.Before, err = svc.scrape(); err != nil {
		return err
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
			return err
		}
	}
	return nil
}
