package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

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
	// Ceiling is the apiserver's ceiling, with -secrets -ceiling: the
	// service's cold-start writes by an ideal client.
	Ceiling *ceilingResult `json:"ceiling,omitempty"`
	// Follower is a second replica's figures, with -secrets: it answers
	// from the ledger the first one (the leader) wrote.
	Follower *followerResult `json:"follower,omitempty"`
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
	// Ledger is from the service's start to the last of its
	// ClusterProfiles seen with its status (the ledger written in full).
	Ledger time.Duration `json:"ledgerNs"`
	// SteadyPasses reconcile passes with nothing to change made the
	// SteadyRequests, counted by the apiserver (apiserver_request_total,
	// "VERB resource", Secrets, ApplicationSets and the ledger's
	// ClusterProfiles and ConfigMaps, non-zero only).
	SteadyPasses   int                `json:"steadyPasses"`
	SteadyRequests map[string]float64 `json:"steadyRequests"`
	SteadyWindow   time.Duration      `json:"steadyWindowNs"`
	// RestartRequests are the apiserver's requests (as SteadyRequests)
	// from the stop of the process that made the cold start to the first
	// pass of the one started after it for the steady state: its lists,
	// and no write.
	RestartRequests map[string]float64 `json:"restartRequests"`
}

// followerResult is what a second replica, started once the ledger is
// written, measured: when it answered (the same answers as the leader),
// its RSS at rest, and, with a load, the same load as the leader's, the
// same load on its answers served as pre-encoded bytes, and a change
// upstream seen by both replicas.
type followerResult struct {
	ReadyAfter time.Duration `json:"readyAfterNs"`
	Rest       processStats  `json:"rest"`
	PeakRSS    float64       `json:"peakRSSBytes"`
	Requests   int64         `json:"requests"`
	Throughput float64       `json:"requestsPerSecond"`
	P50        time.Duration `json:"p50Ns"`
	Errors     int64         `json:"errors"`
	// PreEncoded* are the same load on a bare net/http server in loadgen
	// answering each body with the follower's answer captured for it;
	// PreEncodedRatio is its throughput over the follower's (the
	// follower's slowdown factor), PreEncodedError why it was not
	// measured or the first failure under it.
	PreEncodedRequests   int64         `json:"preEncodedRequests"`
	PreEncodedThroughput float64       `json:"preEncodedRequestsPerSecond"`
	PreEncodedP50        time.Duration `json:"preEncodedP50Ns"`
	PreEncodedErrors     int64         `json:"preEncodedErrors"`
	PreEncodedRatio      float64       `json:"preEncodedRatio"`
	PreEncodedError      string        `json:"preEncodedError,omitempty"`
	// Change is a cluster added upstream, seen by the leader and by this
	// replica.
	Change *changeResult `json:"change,omitempty"`
}

type kindStats struct {
	Kind     string        `json:"kind"`
	Requests int           `json:"requests"`
	P50      time.Duration `json:"p50Ns"`
	P99      time.Duration `json:"p99Ns"`
}

// summarize computes the load's figures from its latencies: throughput,
// quantiles, errors, and the quantiles of each kind of input.
func (r *result) summarize(ins []*input) {
	slices.Sort(r.Load.all)
	r.P50, r.P99, r.Max = quantile(r.Load.all, 0.50), quantile(r.Load.all, 0.99), quantile(r.Load.all, 1)
	r.Throughput = float64(r.Load.Requests) / r.Load.Elapsed.Seconds()
	r.Errors = r.Load.errors()
	for _, k := range kinds(ins) {
		lat := r.Load.byKind[k]
		slices.Sort(lat)
		r.ByKind = append(r.ByKind, kindStats{Kind: k, Requests: len(lat), P50: quantile(lat, 0.5), P99: quantile(lat, 0.99)})
	}
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
		if c := r.Ceiling; c != nil {
			fmt.Fprintf(w, "  ceiling       %d writes in %s by an unthrottled client (%d workers, no watchers, fresh apiserver): %d Secrets %s, %d ClusterProfiles %s, %d status applies %s\n",
				c.Writes, c.Total.Round(time.Millisecond), c.Workers, r.Clusters, c.Secrets.Round(time.Millisecond),
				r.Clusters, c.Creates.Round(time.Millisecond), r.Clusters, c.Status.Round(time.Millisecond))
		}
		fmt.Fprintf(w, "  cold sync     %d Secrets in %s from the start\n", sr.Secrets, sr.ColdSync.Round(time.Millisecond))
		fmt.Fprintf(w, "  ledger        %d ClusterProfiles with their status in %s from the start\n", sr.Secrets, sr.Ledger.Round(time.Millisecond))
		if sr.SteadyPasses > 0 {
			fmt.Fprintf(w, "  steady state  %d passes in %s: apiserver requests %v\n", sr.SteadyPasses, sr.SteadyWindow.Round(time.Millisecond), sr.SteadyRequests)
		}
	}
	if f := r.Follower; f != nil {
		reportFollower(w, f)
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

// reportFollower writes the follower's lines: at rest, under load, against
// pre-encoded bytes and after a change.
func reportFollower(w io.Writer, f *followerResult) {
	fmt.Fprintf(w, "  follower      answered as the leader %s after its start; RSS %s at rest (heap in use %s)",
		f.ReadyAfter.Round(time.Millisecond), mib(f.Rest.RSSBytes), mib(f.Rest.HeapInUse))
	if f.Requests > 0 {
		fmt.Fprintf(w, "; under the same load %.0f req/s, p50 %s, %d errors, peak RSS %s", f.Throughput, ms(f.P50), f.Errors, mib(f.PeakRSS))
	}
	fmt.Fprintln(w)
	if f.PreEncodedRequests > 0 {
		fmt.Fprintf(w, "  pre-encoded   the follower's answers from a bare net/http server in loadgen, same load: %.0f req/s, p50 %s, %d errors; the follower %.2fx slower\n",
			f.PreEncodedThroughput, ms(f.PreEncodedP50), f.PreEncodedErrors, f.PreEncodedRatio)
	}
	if f.PreEncodedError != "" {
		fmt.Fprintf(w, "    pre-encoded: %s\n", f.PreEncodedError)
	}
	if c := f.Change; c != nil && c.Error == "" {
		fmt.Fprintf(w, "  change        %s added upstream: in the leader's answer %s after the change, the follower's %s; difference %s (each within %s, %d requests)\n",
			c.Cluster, ms(c.Leader), ms(c.Follower), ms(c.Difference), ms(c.Resolution), c.Polls)
	} else if c != nil {
		fmt.Fprintf(w, "  change        %s added upstream, not seen by both replicas: %s\n", c.Cluster, c.Error)
	}
}
