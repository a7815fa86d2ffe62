package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// eventsRun is the part of cmd/loadgen -events -json used here: the
// shipped binary with one rancher source at interval 5m, every other
// setting its default, against a fake Rancher.
type eventsRun struct {
	Clusters  int   `json:"clusters"`
	Interval  int64 `json:"intervalNs"`
	PageLimit int   `json:"pageLimit"`
	// New is a cluster set in Rancher, timed to the plugin answer.
	New *struct {
		ToAnswer   int64  `json:"toAnswerNs"`
		Resolution int64  `json:"resolutionNs"`
		Listings   int    `json:"listings"`
		Error      string `json:"error"`
	} `json:"newCluster"`
	// Burst is a burst of changes and the listings (first pages) and
	// pages it caused.
	Burst *struct {
		Changes  int     `json:"changes"`
		Span     int64   `json:"spanNs"`
		Listings int     `json:"listings"`
		Pages    int     `json:"pages"`
		Received float64 `json:"eventsReceived"`
		Error    string  `json:"error"`
	} `json:"burst"`
	// Steady is a window with no change.
	Steady *struct {
		Window     int64   `json:"windowNs"`
		Listings   int     `json:"listings"`
		Received   float64 `json:"eventsReceived"`
		Reconnects int     `json:"reconnects"`
		Connected  bool    `json:"connected"`
		Error      string  `json:"error"`
	} `json:"steady"`
	// Error is why the run stopped before a figure.
	Error           string `json:"error"`
	LogLines        int    `json:"logLines"`
	ForeignLogLines int    `json:"foreignLogLines"`
	FirstForeign    string `json:"firstForeignLogLine"`
}

// The events run's shape, as cmd/loadgen -events makes it: a burst of
// eventsBurst changes within eventsBurstSpan, a window of eventsSteady
// with no change (loadgen's default), at inventory.interval eventsInterval.
const (
	eventsBurst     = 200
	eventsBurstSpan = 2 * time.Second
	eventsSteady    = time.Minute
	eventsInterval  = 5 * time.Minute
	// eventsNewLimit is the target of a new cluster to the answer.
	eventsNewLimit = 5 * time.Second
	// eventsBurstLimit is the target of the burst's listings.
	eventsBurstLimit = 2
)

// readEvents reads cmd/loadgen -events -json output and returns the run at
// clusters (nil when there is none: the run failed).
func readEvents(path string, clusters int) *eventsRun {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var all []eventsRun
	if json.Unmarshal(b, &all) != nil {
		return nil
	}
	for i := range all {
		if all[i].Clusters == clusters {
			return &all[i]
		}
	}
	return nil
}

// eventsRows are Rancher's change events as a hint, measured on the
// shipped binary at a 5-minute interval: a new cluster to the answer, the
// listings of a burst of changes, and those of a window with no change.
func eventsRows(r *eventsRun, o options) []row {
	n := thousands(o.eventsClusters)
	newFig := fmt.Sprintf("rancher events: new cluster in Rancher → in the plugin answer (%s clusters, interval %s, defaults)", n, shortDuration(eventsInterval))
	burstFig := fmt.Sprintf("rancher events: listings for a burst of %d changes within %s (%s clusters)", eventsBurst, shortDuration(eventsBurstSpan), n)
	steadyFig := fmt.Sprintf("rancher events: extra listings in %s with no change (%s clusters)", shortDuration(eventsSteady), n)
	newTarget := fmt.Sprintf("≤ %s", shortDuration(eventsNewLimit))
	burstTarget := fmt.Sprintf("≤ %d listings", eventsBurstLimit)
	const steadyTarget = "0 (pings only)"
	if r == nil {
		return []row{notMeasured(newFig, newTarget, "the events run failed"), notMeasured(burstFig, burstTarget, "the events run failed"),
			notMeasured(steadyFig, steadyTarget, "the events run failed")}
	}
	stopped := "the events run stopped before it"
	if r.Error != "" {
		stopped += ": " + cell(r.Error)
	}
	interval := ""
	if d := time.Duration(r.Interval); d != eventsInterval {
		interval = fmt.Sprintf("; **the run's interval was %s**", d)
	}
	pages := func(listings, pages int) string {
		return fmt.Sprintf("%d listing(s), %d page(s) at pageLimit %s", listings, pages, thousands(r.PageLimit))
	}
	var rows []row
	switch nw := r.New; {
	case nw == nil:
		rows = append(rows, notMeasured(newFig, newTarget, stopped))
	case nw.Error != "":
		rows = append(rows, notMeasured(newFig, newTarget, "not in the answer: "+cell(nw.Error)))
	default:
		took := time.Duration(nw.ToAnswer)
		rows = append(rows, row{newFig,
			fmt.Sprintf("%.2f s (from the change to the first answer for every cluster holding it, asked every 20 ms, within %d ms; %d listing(s); up to the answer: the Application step is proven end to end by TestRancherEvents%s)",
				took.Seconds(), time.Duration(nw.Resolution).Milliseconds(), nw.Listings, interval),
			newTarget, judge(took > 0 && took <= eventsNewLimit && interval == "")})
	}
	switch b := r.Burst; {
	case b == nil:
		rows = append(rows, notMeasured(burstFig, burstTarget, stopped))
	case b.Error != "":
		rows = append(rows, notMeasured(burstFig, burstTarget, cell(b.Error)))
	default:
		measured := fmt.Sprintf("%s for %d changes in %.2f s; %g change events received by the service%s",
			pages(b.Listings, b.Pages), b.Changes, time.Duration(b.Span).Seconds(), b.Received, interval)
		if b.Listings == 0 {
			measured += "; no listing: the events did not reach the service"
		}
		rows = append(rows, row{burstFig, measured, burstTarget,
			judge(b.Listings >= 1 && b.Listings <= eventsBurstLimit && b.Changes == eventsBurst && time.Duration(b.Span) <= eventsBurstSpan && interval == "")})
	}
	switch s := r.Steady; {
	case s == nil:
		rows = append(rows, notMeasured(steadyFig, steadyTarget, stopped))
	case s.Error != "":
		rows = append(rows, notMeasured(steadyFig, steadyTarget, cell(s.Error)))
	default:
		open := "open"
		if !s.Connected {
			open = "**closed**"
		}
		rows = append(rows, row{steadyFig,
			fmt.Sprintf("%d listing(s) in %s, %d reconnect(s), the subscription %s, %g events received%s",
				s.Listings, time.Duration(s.Window), s.Reconnects, open, s.Received, interval),
			steadyTarget, judge(s.Listings == 0 && s.Reconnects == 0 && s.Connected && time.Duration(s.Window) >= eventsSteady && interval == "")})
	}
	return rows
}

// shortDuration writes d as the report's figures say it: 5m, 2 s, 60 s.
func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Minute && d%time.Minute == 0 && d > time.Minute:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return d.String()
}
