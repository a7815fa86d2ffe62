package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// The answer difference between two replicas after a change. Once every
// other figure is read, loadgen appends one cluster to the static clusters
// file its source reads (fleetCluster(n): the shape of the others, its own
// CA; written to a temporary file renamed over the old one), then asks both
// replicas for every cluster every pollPeriod until each answer holds it.
// The leader reads the file at its next listing (the static source re-reads
// it at every listing) and writes the cluster's ClusterProfile; every
// replica, the leader included, answers from its watch on the ledger, so
// the difference between the two is the watch latency.
//
// inventory.interval is left at the binary's default (1m, ±10% jitter), as
// every other figure is measured with it: a shorter interval would list
// more often during the load and the readings at rest. The next listing
// comes within 66 s of the change, then the listing, the ledger's write and
// the watches; changeTimeout bounds a run where the cluster never shows.

const (
	// pollPeriod is how often each replica is asked; a request that takes
	// longer is followed by the next at once.
	pollPeriod = 20 * time.Millisecond
	// changeTimeout bounds the wait for both replicas: the default
	// interval and its jitter, and time for the listing and the watches.
	changeTimeout = 90 * time.Second
)

// changeResult is when a cluster added upstream showed in each replica's
// answer for every cluster, from the change.
type changeResult struct {
	Cluster string `json:"cluster"`
	// Leader and Follower are from the change to the sending of the
	// first request whose answer held the cluster.
	Leader   time.Duration `json:"leaderNs"`
	Follower time.Duration `json:"followerNs"`
	// Difference is |Follower - Leader|, the figure.
	Difference time.Duration `json:"differenceNs"`
	// Resolution is the longer of the two replicas' intervals between the
	// last request whose answer lacked the cluster and the first that held
	// it: each time is known to that.
	Resolution time.Duration `json:"resolutionNs"`
	Polls      int           `json:"polls"`
	// Error is why the change was not seen by both, if it was not.
	Error string `json:"error,omitempty"`
}

// measureChange adds fleetCluster(n) to the clusters files in dir and
// measures when the leader's and the follower's answers (at their base
// URLs) to the input asking for every cluster hold it. A failure is kept
// in the result's Error.
func measureChange(ctx context.Context, dir string, n int, leader, follower string, ins []*input) *changeResult {
	c := fleetCluster(n)
	cr := &changeResult{Cluster: c.name}
	all := slices.IndexFunc(ins, func(in *input) bool { return in.kind == "all" })
	if all < 0 {
		cr.Error = "no input asks for every cluster"
		return cr
	}
	ca, err := newCAs(1, true)
	if err == nil {
		err = appendCluster(filepath.Join(dir, c.source+".yaml"), &c, ca[0])
	}
	if err != nil {
		cr.Error = err.Error()
		return cr
	}
	changed := time.Now()
	ctx, cancel := context.WithTimeout(ctx, changeTimeout)
	defer cancel()
	if err := cr.sight(ctx, leader, follower, ins[all].body, []byte(strconv.Quote(c.name)), pollPeriod, changed); err != nil {
		cr.Error = err.Error()
	}
	return cr
}

// appendCluster adds c to the clusters file at path, atomically: the file
// with c appended is written beside it, then renamed over it.
func appendCluster(path string, c *cluster, caData string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("append a cluster: %w", err)
	}
	var b bytes.Buffer
	b.Write(old)
	if len(old) > 0 && old[len(old)-1] != '\n' {
		b.WriteByte('\n')
	}
	writeCluster(&b, c, caData)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("append a cluster: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("append a cluster: %w", err)
	}
	return nil
}

// sight asks the leader and the follower at the same time, every period,
// with body until each answer holds want, and records into cr when each
// first did, from changed.
func (cr *changeResult) sight(ctx context.Context, leader, follower string, body, want []byte, period time.Duration, changed time.Time) error {
	var l, f sighting
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range []struct {
		name, base string
		into       *sighting
	}{{"leader", leader, &l}, {"follower", follower, &f}} {
		g.Go(func() error {
			s, err := firstSighting(gctx, r.base, token, body, want, period, changed)
			*r.into = s
			if err != nil {
				return fmt.Errorf("the %s: %w", r.name, err)
			}
			return nil
		})
	}
	err := g.Wait()
	cr.Polls = l.polls + f.polls
	if err != nil {
		return err
	}
	cr.Leader, cr.Follower = l.at.Sub(changed), f.at.Sub(changed)
	cr.Difference = (cr.Follower - cr.Leader).Abs()
	cr.Resolution = max(l.gap, f.gap)
	return nil
}

// sighting is when a poller first saw what it waited for.
type sighting struct {
	// at is when the request of the first answer holding it was sent, gap
	// how long after the request before it (or the start).
	at    time.Time
	gap   time.Duration
	polls int
}

// firstSighting posts body to base every period over one keep-alive
// connection until an answer (status 200) holds want, and returns when
// that request was sent. since is the start the first gap counts from.
func firstSighting(ctx context.Context, base, token string, body, want []byte, period time.Duration, since time.Time) (sighting, error) {
	var dials atomic.Int64
	c, tr := newConn(&dials)
	defer tr.CloseIdleConnections()
	tick := time.NewTicker(period)
	defer tick.Stop()
	var (
		s      sighting
		answer bytes.Buffer
		buf    = make([]byte, 64<<10)
		last   = since
	)
	for {
		sent := time.Now()
		answer.Reset()
		code, _, err := post(ctx, c, base, token, body, &answer, buf)
		if ctx.Err() != nil {
			return s, fmt.Errorf("not in the answer %s after the change (%d answers): %w", time.Since(since).Round(time.Millisecond), s.polls, ctx.Err())
		}
		s.polls++
		switch {
		case err != nil:
			return s, fmt.Errorf("poll: %w", err)
		case code != http.StatusOK:
			return s, fmt.Errorf("poll: status %d: %.200s", code, answer.Bytes())
		case bytes.Contains(answer.Bytes(), want):
			s.at, s.gap = sent, sent.Sub(last)
			return s, nil
		}
		last = sent
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}
