package main

// The -events mode's run and measurements (events.go says what they are).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
)

// listingCounter counts the fake's listings (first pages) and pages.
type listingCounter struct {
	f        *fakerancher.Fake
	listings atomic.Int64
}

// countListings makes the fake count every GET /v3/clusters without a
// marker as a listing begun.
func countListings(f *fakerancher.Fake) *listingCounter {
	c := &listingCounter{f: f}
	f.Intercept(func(_ http.ResponseWriter, r *http.Request, _ http.Handler) bool {
		if r.Method == http.MethodGet && r.URL.Path == "/v3/clusters" && r.URL.Query().Get("marker") == "" {
			c.listings.Add(1)
		}
		return false
	})
	return c
}

// counts returns the listings begun and the pages served so far.
func (c *listingCounter) counts() (listings, pages int) {
	return int(c.listings.Load()), c.f.Served()
}

// waitQuiet returns once no listing has begun for quiet, or an error
// after timeout.
func (c *listingCounter) waitQuiet(quiet, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last, since := c.listings.Load(), time.Now()
	for {
		time.Sleep(50 * time.Millisecond)
		if n := c.listings.Load(); n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) >= quiet {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("listings did not stop for %s within %s (%d so far)", quiet, timeout, last)
		}
	}
}

// runEvents runs the -events mode at n clusters in dir.
func runEvents(o options, n int, dir string, log io.Writer) (*eventsResult, error) {
	ctx := context.Background()
	root, err := moduleRoot(ctx)
	if err != nil {
		return nil, err
	}
	f, err := fakerancher.New(filepath.Join(root, "testdata", "fixtures", "rancher"), rancherToken)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	f.Generate(n)
	counter := countListings(f)
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	cfg, err := writeEventsService(dir, f.URL(), addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "loadgen: events, %d clusters in a fake Rancher: starting %s on %s (interval %s, every other setting its default)\n", n, o.binary, addr, eventsInterval)
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
	r := &eventsResult{Clusters: n, Interval: eventsInterval, PageLimit: eventsPageLimit, ReadyAfter: time.Since(started)}
	r.Error = r.prepare(ctx, f, counter, svc, n, log)
	if r.Error == "" {
		fmt.Fprintf(log, "loadgen: events: a new cluster set in Rancher; asking for every cluster every %s until the answer holds it\n", pollPeriod)
		r.New = measureNewCluster(ctx, f, counter, svc.base, pollPeriod)
		if err := counter.waitQuiet(eventsQuiet, time.Minute); err != nil {
			r.Error = err.Error()
		}
	}
	if r.Error == "" {
		fmt.Fprintf(log, "loadgen: events: %d changes within %s\n", burstChanges, burstSpan)
		r.Burst = measureBurst(f, counter, burstChanges, burstSpan, eventsQuiet, svc.eventsReceived)
		fmt.Fprintf(log, "loadgen: events: %s with no change\n", o.eventsSteady)
		r.Steady = measureSteadyEvents(f, counter, o.eventsSteady, svc.eventsReceived)
	}
	stopped = true
	if err := svc.stop(30 * time.Second); err != nil {
		return nil, err
	}
	if r.LogLines, r.ForeignLogLines, r.FirstForeignLogLine, err = svc.logFormat(); err != nil {
		return nil, fmt.Errorf("read the service's log: %w", err)
	}
	return r, nil
}

// prepare checks that the answer holds the n clusters, waits for the
// service's subscription and for the listings it asked for to end; "" or
// why the run cannot go on.
func (r *eventsResult) prepare(ctx context.Context, f *fakerancher.Fake, counter *listingCounter, svc *service, n int, log io.Writer) string {
	if got, err := answerCount(ctx, svc.base); err != nil || got != n {
		return fmt.Sprintf("the answer for every cluster holds %d clusters, want %d (%v)", got, n, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for f.Subscribers() < 1 {
		if time.Now().After(deadline) {
			return "the service did not subscribe to the fake's /v3/subscribe within 30 s"
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := counter.waitQuiet(eventsQuiet, time.Minute); err != nil {
		return err.Error()
	}
	listings, pages := counter.counts()
	fmt.Fprintf(log, "loadgen: events: answered %d clusters %s after the start; subscribed; %d listings (%d pages) so far\n",
		n, r.ReadyAfter.Round(time.Millisecond), listings, pages)
	return ""
}

// writeEventsService writes the token files and the configuration: one
// rancher source at rancherURL, inventory.interval eventsInterval, every
// other setting its default.
func writeEventsService(dir, rancherURL, listen string) (string, error) {
	for name, content := range map[string]string{"token": token + "\n", "rancher-token": rancherToken + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return "", err
		}
	}
	cfg := fmt.Sprintf(`log: {level: info, format: json}
server:
  listen: %q
  tokens: [{file: token}]
inventory: {interval: %s}
sources:
  - name: rancher
    provider: rancher
    rancher:
      url: %s
      token: {file: rancher-token}
`, listen, eventsInterval, rancherURL)
	path := filepath.Join(dir, "config.yaml")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// allBody is the request for every cluster.
var allBody = []byte(`{"applicationSetName":"load","input":{}}` + "\n")

// answerCount is the number of parameter sets in the answer for every
// cluster.
func answerCount(ctx context.Context, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+getParamsPath, strings.NewReader(string(allBody)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := opsClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	var answer struct {
		Output struct {
			Parameters []json.RawMessage `json:"parameters"`
		} `json:"output"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return 0, err
	}
	return len(answer.Output.Parameters), nil
}

// measureNewCluster sets an active cluster in the fake (a resource.change)
// and asks base for every cluster every period until the answer holds it.
func measureNewCluster(ctx context.Context, f *fakerancher.Fake, counter *listingCounter, base string, period time.Duration) *newClusterResult {
	nr := &newClusterResult{Cluster: newClusterName}
	before, _ := counter.counts()
	changed := time.Now()
	f.Set(fakerancher.Cluster{ID: newClusterID, Name: newClusterName, State: "active"})
	ctx, cancel := context.WithTimeout(ctx, newClusterTimeout)
	defer cancel()
	s, err := firstSighting(ctx, base, token, allBody, []byte(strconv.Quote(newClusterName)), period, changed)
	nr.Polls = s.polls
	after, _ := counter.counts()
	nr.Listings = after - before
	if err != nil {
		nr.Error = err.Error()
		return nr
	}
	nr.ToAnswer, nr.Resolution = s.at.Sub(changed), s.gap
	return nr
}

// measureBurst changes one label of changes clusters (c-m-00000000 on, as
// Generate names them), evenly within span, then counts the listings from
// the first change until none began for quiet. received reads the change
// events the service counted (nil: not read).
func measureBurst(f *fakerancher.Fake, counter *listingCounter, changes int, span, quiet time.Duration, received func() (float64, error)) *burstResult {
	br := &burstResult{Changes: changes}
	var recv0 float64
	if received != nil {
		recv0, _ = received()
	}
	l0, p0 := counter.counts()
	// the last change is due at 95% of the span: a busy machine's delays
	// stay within it
	every := span * 19 / 20 / time.Duration(max(changes-1, 1))
	start := time.Now()
	var last time.Time
	for i := range changes {
		if d := time.Until(start.Add(time.Duration(i) * every)); d > 0 {
			time.Sleep(d)
		}
		id := fmt.Sprintf("c-m-%08d", i)
		err := f.Edit(id, func(obj map[string]any) {
			labels, _ := obj["labels"].(map[string]any)
			if labels == nil {
				labels = map[string]any{}
			}
			labels["loadgen-burst"] = fmt.Sprint(start.UnixNano())
			obj["labels"] = labels
		})
		if err != nil {
			br.Error = fmt.Sprintf("change %d: %v", i, err)
			return br
		}
		last = time.Now()
	}
	br.Span = last.Sub(start)
	if err := counter.waitQuiet(quiet, time.Minute); err != nil {
		br.Error = err.Error()
	}
	br.Counted = time.Since(last)
	l1, p1 := counter.counts()
	br.Listings, br.Pages = l1-l0, p1-p0
	if received != nil {
		if recv1, err := received(); err == nil {
			br.Received = recv1 - recv0
		}
	}
	return br
}

// measureSteadyEvents counts, over window with no change, the listings,
// the sockets opened at the fake and the events the service received.
func measureSteadyEvents(f *fakerancher.Fake, counter *listingCounter, window time.Duration, received func() (float64, error)) *steadyEventsResult {
	sr := &steadyEventsResult{Window: window}
	var recv0 float64
	var err error
	if received != nil {
		if recv0, err = received(); err != nil {
			sr.Error = err.Error()
			return sr
		}
	}
	l0, p0 := counter.counts()
	c0 := f.SubscribeConnects()
	time.Sleep(window)
	l1, p1 := counter.counts()
	sr.Listings, sr.Pages = l1-l0, p1-p0
	sr.Reconnects, sr.Connected = f.SubscribeConnects()-c0, f.Subscribers() > 0
	if received != nil {
		recv1, err := received()
		if err != nil {
			sr.Error = err.Error()
			return sr
		}
		sr.Received = recv1 - recv0
	}
	return sr
}

// eventsReceived is the events the service received from Rancher
// (argocd_cluster_discovery_rancher_events_received_total, every name).
func (s *service) eventsReceived() (float64, error) {
	const name = "argocd_cluster_discovery_rancher_events_received_total"
	families, err := s.metrics()
	if err != nil {
		return 0, err
	}
	fam := families[name]
	if fam == nil {
		return 0, errors.New("/metrics has no " + name)
	}
	var sum float64
	for _, m := range fam.GetMetric() {
		sum += m.GetCounter().GetValue()
	}
	return sum, nil
}
