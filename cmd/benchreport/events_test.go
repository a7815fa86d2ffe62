package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// eventsJSON is cmd/loadgen -events -json output, as a run wrote it.
const eventsJSON = `[
  {
    "clusters": 2000, "intervalNs": 300000000000, "pageLimit": 1000, "readyAfterNs": 751120231,
    "newCluster": {"cluster": "loadgen-new-cluster", "toAnswerNs": 1144405134, "resolutionNs": 21251274, "polls": 58, "listings": 1},
    "burst": {"changes": 200, "spanNs": 1991936326, "countedNs": 4534545184, "listings": 1, "pages": 3, "eventsReceived": 200},
    "steady": {"windowNs": 60000000000, "listings": 0, "pages": 0, "eventsReceived": 0, "reconnects": 0, "connected": true},
    "logLines": 9, "foreignLogLines": 0
  }
]`

const (
	eventsNewFigure    = "rancher events: new cluster in Rancher → in the plugin answer (2,000 clusters, interval 5m, defaults)"
	eventsBurstFigure  = "rancher events: listings for a burst of 200 changes within 2 s (2,000 clusters)"
	eventsSteadyFigure = "rancher events: extra listings in 60 s with no change (2,000 clusters)"
)

// TestEventsRows: the events run's three figures against the issue's
// targets (a new cluster in the answer within 5 s, a burst of 200 changes
// 1 to 2 listings, no listing at rest), read from loadgen's JSON; a
// figure the run did not give is not measured, with the reason, never
// read as 0.
func TestEventsRows(t *testing.T) {
	o := defaultOptions(t)
	const (
		newOK    = "1.14 s (from the change to the first answer for every cluster holding it, asked every 20 ms, within 21 ms; 1 listing(s); up to the answer: the Application step is proven end to end by TestRancherEvents)"
		burstOK  = "1 listing(s), 3 page(s) at pageLimit 1,000 for 200 changes in 1.99 s; 200 change events received by the service"
		steadyOK = "0 listing(s) in 1m0s, 0 reconnect(s), the subscription open, 0 events received"
	)
	for _, tc := range []struct {
		name                string
		json                string // loadgen's output; "" for none
		newRow, burst, rest row
	}{
		{name: "within the targets", json: eventsJSON,
			newRow: row{eventsNewFigure, newOK, "≤ 5 s", verdictOK},
			burst:  row{eventsBurstFigure, burstOK, "≤ 2 listings", verdictOK},
			rest:   row{eventsSteadyFigure, steadyOK, "0 (pings only)", verdictOK}},
		{name: "every target missed", json: `[{"clusters": 2000, "intervalNs": 300000000000, "pageLimit": 1000,
			"newCluster": {"toAnswerNs": 5200000000, "resolutionNs": 20000000, "listings": 2},
			"burst": {"changes": 200, "spanNs": 1990000000, "listings": 3, "pages": 7, "eventsReceived": 100},
			"steady": {"windowNs": 60000000000, "listings": 1, "reconnects": 1, "connected": true}}]`,
			newRow: row{eventsNewFigure, "5.20 s (from the change to the first answer for every cluster holding it, asked every 20 ms, within 20 ms; 2 listing(s); up to the answer: the Application step is proven end to end by TestRancherEvents)", "≤ 5 s", verdictMissed},
			burst:  row{eventsBurstFigure, "3 listing(s), 7 page(s) at pageLimit 1,000 for 200 changes in 1.99 s; 100 change events received by the service", "≤ 2 listings", verdictMissed},
			rest:   row{eventsSteadyFigure, "1 listing(s) in 1m0s, 1 reconnect(s), the subscription open, 0 events received", "0 (pings only)", verdictMissed}},
		{name: "no listing for a burst, the subscription closed at rest", json: `[{"clusters": 2000, "intervalNs": 300000000000, "pageLimit": 1000,
			"newCluster": {"error": "not in the answer 30s after the change (1400 answers): context deadline exceeded"},
			"burst": {"changes": 200, "spanNs": 1990000000, "listings": 0, "pages": 0},
			"steady": {"windowNs": 60000000000, "connected": false}}]`,
			newRow: notMeasured(eventsNewFigure, "≤ 5 s", "not in the answer: not in the answer 30s after the change (1400 answers): context deadline exceeded"),
			burst:  row{eventsBurstFigure, "0 listing(s), 0 page(s) at pageLimit 1,000 for 200 changes in 1.99 s; 0 change events received by the service; no listing: the events did not reach the service", "≤ 2 listings", verdictMissed},
			rest:   row{eventsSteadyFigure, "0 listing(s) in 1m0s, 0 reconnect(s), the subscription **closed**, 0 events received", "0 (pings only)", verdictMissed}},
		{name: "another interval: nothing is ok", json: `[{"clusters": 2000, "intervalNs": 60000000000, "pageLimit": 1000,
			"newCluster": {"toAnswerNs": 1000000000, "resolutionNs": 20000000, "listings": 1},
			"burst": {"changes": 200, "spanNs": 1990000000, "listings": 1, "pages": 2},
			"steady": {"windowNs": 60000000000, "connected": true}}]`,
			newRow: row{eventsNewFigure, "1.00 s (from the change to the first answer for every cluster holding it, asked every 20 ms, within 20 ms; 1 listing(s); up to the answer: the Application step is proven end to end by TestRancherEvents; **the run's interval was 1m0s**)", "≤ 5 s", verdictMissed},
			burst:  row{eventsBurstFigure, "1 listing(s), 2 page(s) at pageLimit 1,000 for 200 changes in 1.99 s; 0 change events received by the service; **the run's interval was 1m0s**", "≤ 2 listings", verdictMissed},
			rest:   row{eventsSteadyFigure, "0 listing(s) in 1m0s, 0 reconnect(s), the subscription open, 0 events received; **the run's interval was 1m0s**", "0 (pings only)", verdictMissed}},
		{name: "stopped before the burst", json: `[{"clusters": 2000, "intervalNs": 300000000000, "pageLimit": 1000, "error": "listings did not stop for 4s within 1m0s (40 so far)",
			"newCluster": {"toAnswerNs": 1000000000, "resolutionNs": 20000000, "listings": 1}}]`,
			newRow: row{eventsNewFigure, "1.00 s (from the change to the first answer for every cluster holding it, asked every 20 ms, within 20 ms; 1 listing(s); up to the answer: the Application step is proven end to end by TestRancherEvents)", "≤ 5 s", verdictOK},
			burst:  notMeasured(eventsBurstFigure, "≤ 2 listings", "the events run stopped before it: listings did not stop for 4s within 1m0s (40 so far)"),
			rest:   notMeasured(eventsSteadyFigure, "0 (pings only)", "the events run stopped before it: listings did not stop for 4s within 1m0s (40 so far)")},
		{name: "a run at another size only", json: `[{"clusters": 500}]`,
			newRow: notMeasured(eventsNewFigure, "≤ 5 s", "the events run failed"),
			burst:  notMeasured(eventsBurstFigure, "≤ 2 listings", "the events run failed"),
			rest:   notMeasured(eventsSteadyFigure, "0 (pings only)", "the events run failed")},
		{name: "no events run",
			newRow: notMeasured(eventsNewFigure, "≤ 5 s", "the events run failed"),
			burst:  notMeasured(eventsBurstFigure, "≤ 2 listings", "the events run failed"),
			rest:   notMeasured(eventsSteadyFigure, "0 (pings only)", "the events run failed")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.json")
			if tc.json != "" {
				require.NoError(t, os.WriteFile(path, []byte(tc.json), 0o600))
			}
			byFigure := map[string]row{}
			var order []string
			for _, r := range figures(nil, nil, nil, readEvents(path, o.eventsClusters), nil, o) {
				byFigure[r.figure] = r
				order = append(order, r.figure)
			}
			assert.Equal(t, tc.newRow, byFigure[eventsNewFigure])
			assert.Equal(t, tc.burst, byFigure[eventsBurstFigure])
			assert.Equal(t, tc.rest, byFigure[eventsSteadyFigure])
			at := 0
			for i, f := range order {
				if f == eventsNewFigure {
					at = i
				}
			}
			assert.Equal(t, []string{"rancher: requests per listing (10,000 clusters, warm client)", eventsNewFigure, eventsBurstFigure, eventsSteadyFigure},
				order[at-1:at+3], "after the rancher benchmark's row")
		})
	}
}

// TestEventsLogLines: the events run's log counts with every other run of
// the binary.
func TestEventsLogLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.json")
	require.NoError(t, os.WriteFile(path, []byte(`[{"clusters": 2000, "logLines": 9, "foreignLogLines": 1, "firstForeignLogLine": "W0101 klog | line"}]`), 0o600))
	o := defaultOptions(t)
	var got row
	for _, r := range figures(nil, nil, nil, readEvents(path, o.eventsClusters), nil, o) {
		if r.figure == "log lines outside the configured format (JSON), every run of the binary" {
			got = r
		}
	}
	assert.Equal(t, row{"log lines outside the configured format (JSON), every run of the binary", "1 of 9 lines (first: `W0101 klog \\| line`)", "0", verdictMissed}, got)
}

// TestEventsStep: make bench runs loadgen -events on the shipped binary at
// 2,000 clusters, its JSON where the report reads it.
func TestEventsStep(t *testing.T) {
	o := defaultOptions(t)
	var ev *step
	for _, s := range plan(o, "sync.json", "load.json", "events.json") {
		if s.file == "events.txt" {
			ev = s
		}
	}
	require.NotNil(t, ev)
	assert.Equal(t, []string{"run", "./cmd/loadgen", "-binary", "bin/argocd-cluster-discovery", "-ready-timeout", "8m", "-sync-timeout", "8m",
		"-events", "-clusters", "2000", "-json", "events.json"}, ev.args)
	assert.NotEmpty(t, stepNames[ev.file])
}
