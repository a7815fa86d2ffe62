package main

// Rancher's change events (-events): the built binary with one rancher
// source at inventory.interval 5m, every other setting at its default
// (rancher.events on, pageLimit 1000, no Secrets), against a fake Rancher
// (internal/fake/rancher, the repository's fixtures) of n clusters made
// from the single-cluster fixture (~10 KB each). With a 5-minute interval
// the periodic listing does not come during the run: every listing after
// the first is one the events asked for. Three figures:
//
//   - a new cluster, active, set in Rancher (a resource.change): from the
//     change to the first answer for every cluster that holds it, asked
//     every pollPeriod. This is up to the plugin answer; the step from the
//     answer to an Application (the refresh trigger, Argo CD's controller)
//     is proven end to end by the e2e suite (TestRancherEvents).
//   - a burst of burstChanges changes within burstSpan (one label of as
//     many clusters, evenly spaced): the listings it causes.
//   - a window of o.eventsSteady with no change: the listings it causes
//     (pings only, every 5 s, which list nothing), the sockets opened and
//     the events the service received.
//
// A listing is counted at the fake as its first page: a GET /v3/clusters
// without a marker (the next pages follow the collection's next links,
// with one); the pages are counted too (2 for 2,000 clusters at
// pageLimit 1000).

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

const (
	// rancherToken is the fake Rancher's API token, the source's.
	rancherToken = "token-loadgen:q8w2e4r6t8y0u2i4o6p8a0s2d4f6g8h0j2k4l6z8x0c2v4b6n8m0"
	// eventsInterval is the source's interval in this mode: the periodic
	// listing does not come during the run.
	eventsInterval = 5 * time.Minute
	// eventsPageLimit is the source's default page size (not set in the
	// configuration): the figures say how many pages a listing is.
	eventsPageLimit = 1000
	// burstChanges changes are made within burstSpan.
	burstChanges = 200
	burstSpan    = 2 * time.Second
	// eventsQuiet is how long no listing must begin before a measurement
	// starts or a burst's count ends: past the debounce's longest wait
	// (inventory.HintMaxDelay) and a listing's pages.
	eventsQuiet = inventory.HintMaxDelay + time.Second
	// newClusterTimeout bounds the wait for the new cluster in the answer.
	newClusterTimeout = 30 * time.Second
	// The targets: a new cluster in the answer within eventsNewTarget; a
	// burst at most burstTarget listings (and at least one); no listing
	// at rest.
	eventsNewTarget = 5 * time.Second
	burstTarget     = 2
)

// newClusterID and newClusterName are the cluster the first figure adds.
const (
	newClusterID   = "c-m-loadgen1"
	newClusterName = "loadgen-new-cluster"
)

// eventsResult is one fleet size's figures with -events, also written with
// -json.
type eventsResult struct {
	Clusters  int           `json:"clusters"`
	Interval  time.Duration `json:"intervalNs"`
	PageLimit int           `json:"pageLimit"`
	// ReadyAfter is from the start to the first listing served.
	ReadyAfter time.Duration       `json:"readyAfterNs"`
	New        *newClusterResult   `json:"newCluster,omitempty"`
	Burst      *burstResult        `json:"burst,omitempty"`
	Steady     *steadyEventsResult `json:"steady,omitempty"`
	// Error is why the run stopped before a figure, if it did.
	Error               string `json:"error,omitempty"`
	LogLines            int    `json:"logLines"`
	ForeignLogLines     int    `json:"foreignLogLines"`
	FirstForeignLogLine string `json:"firstForeignLogLine,omitempty"`
}

// newClusterResult is a cluster set in Rancher, timed to the answer.
type newClusterResult struct {
	Cluster string `json:"cluster"`
	// ToAnswer is from the change to the sending of the first request
	// whose answer held the cluster; Resolution the time between that
	// request and the one before (ToAnswer is known to that).
	ToAnswer   time.Duration `json:"toAnswerNs"`
	Resolution time.Duration `json:"resolutionNs"`
	Polls      int           `json:"polls"`
	// Listings begun from the change to the sighting.
	Listings int    `json:"listings"`
	Error    string `json:"error,omitempty"`
}

// burstResult is a burst of changes and the listings it caused.
type burstResult struct {
	Changes int `json:"changes"`
	// Span is from the first change to the last; Counted the time from
	// the last change to the end of the count (eventsQuiet without a
	// listing).
	Span    time.Duration `json:"spanNs"`
	Counted time.Duration `json:"countedNs"`
	// Listings and Pages are what the fake served from the first change
	// to the end of the count.
	Listings int `json:"listings"`
	Pages    int `json:"pages"`
	// Received is the change events the service counted meanwhile.
	Received float64 `json:"eventsReceived"`
	Error    string  `json:"error,omitempty"`
}

// steadyEventsResult is a window with no change.
type steadyEventsResult struct {
	Window   time.Duration `json:"windowNs"`
	Listings int           `json:"listings"`
	Pages    int           `json:"pages"`
	// Received is the events the service counted in the window,
	// Reconnects the sockets opened at the fake, Connected whether one
	// was open at its end.
	Received   float64 `json:"eventsReceived"`
	Reconnects int     `json:"reconnects"`
	Connected  bool    `json:"connected"`
	Error      string  `json:"error,omitempty"`
}

// missed lists the figures that missed their targets or were not
// measured.
func (r *eventsResult) missed() []string {
	var out []string
	if r.Error != "" {
		out = append(out, r.Error)
	}
	switch n := r.New; {
	case n == nil:
		out = append(out, "new cluster: not measured")
	case n.Error != "":
		out = append(out, "new cluster: "+n.Error)
	case n.ToAnswer > eventsNewTarget:
		out = append(out, fmt.Sprintf("new cluster: %s to the answer, target %s", n.ToAnswer.Round(time.Millisecond), eventsNewTarget))
	}
	switch b := r.Burst; {
	case b == nil:
		out = append(out, "burst: not measured")
	case b.Error != "":
		out = append(out, "burst: "+b.Error)
	case b.Listings < 1 || b.Listings > burstTarget:
		out = append(out, fmt.Sprintf("burst: %d listings, target 1 to %d", b.Listings, burstTarget))
	}
	switch s := r.Steady; {
	case s == nil:
		out = append(out, "steady state: not measured")
	case s.Error != "":
		out = append(out, "steady state: "+s.Error)
	case s.Listings != 0 || s.Reconnects != 0 || !s.Connected:
		out = append(out, fmt.Sprintf("steady state: %d listings, %d reconnects, connected %v; target 0, 0, true", s.Listings, s.Reconnects, s.Connected))
	}
	return out
}

// reportEvents writes the -events figures with their targets.
func reportEvents(w io.Writer, r *eventsResult) {
	fmt.Fprintf(w, "\n== Rancher change events, %d clusters in a fake Rancher (pageLimit %d: %d pages a listing), interval %s, every other setting its default (answered after %s)\n",
		r.Clusters, r.PageLimit, (r.Clusters+r.PageLimit-1)/r.PageLimit, r.Interval, r.ReadyAfter.Round(time.Millisecond))
	if r.Error != "" {
		fmt.Fprintf(w, "  error         %s\n", r.Error)
	}
	if n := r.New; n != nil {
		if n.Error != "" {
			fmt.Fprintf(w, "  new cluster   %s set in Rancher, not in the answer: %s (%d listings)\n", n.Cluster, n.Error, n.Listings)
		} else {
			fmt.Fprintf(w, "  new cluster   %s set in Rancher: in the answer %s after the change (within %s, %d requests; %d listing(s)); target ≤ %s\n",
				n.Cluster, ms(n.ToAnswer), ms(n.Resolution), n.Polls, n.Listings, eventsNewTarget)
		}
	}
	if b := r.Burst; b != nil {
		fmt.Fprintf(w, "  burst         %d changes in %s: %d listing(s) (%d pages) until %s after the last, %g change events received; target 1 to %d",
			b.Changes, b.Span.Round(time.Millisecond), b.Listings, b.Pages, b.Counted.Round(100*time.Millisecond), b.Received, burstTarget)
		if b.Error != "" {
			fmt.Fprintf(w, "; error: %s", b.Error)
		}
		fmt.Fprintln(w)
	}
	if s := r.Steady; s != nil {
		fmt.Fprintf(w, "  steady state  %s with no change: %d listing(s) (%d pages), %d reconnects, subscribed %v, %g events received; target 0 listings",
			s.Window, s.Listings, s.Pages, s.Reconnects, s.Connected, s.Received)
		if s.Error != "" {
			fmt.Fprintf(w, "; error: %s", s.Error)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  log           %d lines, %d not in the configured format (JSON)\n", r.LogLines, r.ForeignLogLines)
	if r.FirstForeignLogLine != "" {
		fmt.Fprintf(w, "    first: %s\n", r.FirstForeignLogLine)
	}
}

// runEventsSizes runs the -events mode at each size, writes the results
// (and with -json the JSON), and returns the exit code: 1 when a figure
// missed its target or could not be measured.
func runEventsSizes(o options, tmp string, stdout, stderr io.Writer) int {
	var results []eventsResult
	var missed []string
	for _, n := range o.sizes {
		dir := filepath.Join(tmp, "events-"+strconv.Itoa(n))
		if err := os.Mkdir(dir, 0o700); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		r, err := runEvents(o, n, dir, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "loadgen: events, %d clusters: %v\n", n, err)
			return 1
		}
		reportEvents(stdout, r)
		missed = append(missed, r.missed()...)
		results = append(results, *r)
	}
	if o.jsonPath != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(o.jsonPath, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	if len(missed) > 0 {
		fmt.Fprintf(stdout, "FAIL: %s\n", strings.Join(missed, "; "))
		return 1
	}
	return 0
}
