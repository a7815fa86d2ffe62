package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// measureFollower starts a second replica of the service with the leader's
// configuration on another address, once the ledger is written: it lists
// nothing and answers from the ledger. It returns when it answered as the
// leader does, its RSS at rest after o.settle, and, with a positive
// o.duration, the same load as the leader's, then the same load on the
// follower's answers served as pre-encoded bytes (measurePreEncoded), and
// last a change upstream seen by both replicas (measureChange), which
// leaves the fleet changed: nothing is measured on the leader after it.
func measureFollower(ctx context.Context, o options, n int, dir string, leader *service, leaderCfg string, ins []*input, cs []cluster, log io.Writer) (*followerResult, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	cfgPath, err := writeFollowerConfig(dir, leaderCfg, addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "loadgen: %d clusters: starting a follower replica on %s\n", n, addr)
	started := time.Now()
	f, err := startService(o.binary, cfgPath, addr, filepath.Join(dir, "follower.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.stop(30 * time.Second) }()
	if err := f.waitReady(o.readyTimeout); err != nil {
		return nil, fmt.Errorf("follower: %w", err)
	}
	if err := verify(ctx, f.base, token, ins, cs); err != nil {
		return nil, fmt.Errorf("follower: %w", err)
	}
	fr := &followerResult{ReadyAfter: time.Since(started)}
	time.Sleep(o.settle)
	if fr.Rest, err = f.scrape(); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "loadgen: %d clusters: follower answered as the leader %s after its start; RSS at rest %s\n",
		n, fr.ReadyAfter.Round(time.Millisecond), mib(fr.Rest.RSSBytes))
	if o.duration <= 0 {
		return fr, nil
	}
	load := drive(f.base, token, ins, o.conns, o.duration)
	slices.Sort(load.all)
	fr.PeakRSS, fr.Requests, fr.Errors = f.peakRSS(), load.Requests, load.errors()
	fr.Throughput, fr.P50 = float64(load.Requests)/load.Elapsed.Seconds(), quantile(load.all, 0.5)
	fmt.Fprintf(log, "loadgen: %d clusters: the follower's answers as pre-encoded bytes, %d connections for %s\n", n, o.conns, o.duration)
	fr.measurePreEncoded(ctx, o, f.base, ins)
	fmt.Fprintf(log, "loadgen: %d clusters: a new cluster upstream; waiting for both replicas to answer with it (the leader's next listing)\n", n)
	fr.Change = measureChange(ctx, dir, n, leader.base, f.base, ins)
	return fr, nil
}

// writeFollowerConfig writes the leader's configuration with the follower's
// listen address into dir and returns its path.
func writeFollowerConfig(dir, leaderCfg, addr string) (string, error) {
	raw, err := os.ReadFile(leaderCfg)
	if err != nil {
		return "", err
	}
	lines := strings.SplitN(string(raw), "\n", 4) // log, server, listen: the third line
	if len(lines) < 4 || !strings.HasPrefix(strings.TrimSpace(lines[2]), "listen:") {
		return "", errors.New("follower: the leader's configuration has no listen line where expected")
	}
	lines[2] = fmt.Sprintf("  listen: %q", addr)
	path := filepath.Join(dir, "follower.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600)
}
