package e2e

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// The clusters of TestRancherEvents, in a fake Rancher of the test's own.
var (
	evAlpha = InState(fakerancher.Cluster{ID: "c-m-evalpha1", Name: "ev-alpha"}, "active")
	evBeta  = InState(fakerancher.Cluster{ID: "c-m-evbeta01", Name: "ev-beta"}, "active")
	evGamma = InState(fakerancher.Cluster{ID: "c-m-evgamma1", Name: "ev-gamma"}, "active")
	// evDelta is registered in Rancher during the test
	evDelta = InState(fakerancher.Cluster{ID: "c-m-evdelta1", Name: "ev-delta"}, "active")
)

const (
	// eventsNewTarget is the target: a cluster added to Rancher
	// has its Application within it, at a 5-minute interval
	eventsNewTarget = 5 * time.Second
	// eventsQuiet is how long no listing must begin before a step
	// starts: past the debounce's longest wait (3 s) and a listing
	eventsQuiet = 3500 * time.Millisecond
	// eventsBurst changes are made within eventsBurstSpan, eventsBurstBatch
	// at a time
	eventsBurst      = 200
	eventsBurstBatch = 10
	eventsBurstSpan  = 2 * time.Second
	// eventsSteady is the window with no change: two of Rancher's pings
	eventsSteady = 11 * time.Second
)

// TestRancherEvents runs a deployment of its own (its own fake Rancher,
// configuration, port, owner id, Lease, plugin ConfigMap and
// ApplicationSet) with one rancher source at `interval: 5m` and Rancher's
// change events at their default (on), Secrets with policy sync,
// `departure: {afterListings: 3, gracePeriod: 1s}` and the refresh trigger
// on, under Argo CD's real ApplicationSet controller. With that interval
// no periodic listing comes during the test: every listing after the
// first is one an event (or the subscription's drop and reconnect) asked
// for, counted at the fake (Served: one page a listing here).
//
// A cluster added to Rancher (a resource.change) is in the answer, has
// its Secret and its Application within 5 s (logged). A cluster removed
// (a resource.remove) is listed at once, absent from that listing: it
// stays in the answer with phase absent, its Secret (phase absent) and
// its Application stay; no listing comes without an event; a change of
// another cluster lists again (the second listing without it), and it
// stays; the subscription cut (as Rancher cuts it every 30 minutes) is
// followed by a listing, the third without it, which confirms the
// departure: only then do its Application and Secret go. A burst of 200
// changes within 2 s is at most 2 listings; with no change for 11 s (two
// pings), no listing and no reconnect.
func TestRancherEvents(t *testing.T) {
	start := time.Now()
	sc := &eventsScenario{ev: e.StartEvents(t)}
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"the initial fleet: one Application per cluster, the subscription open", sc.fleet},
		{"a cluster added to Rancher: its Application within 5 s", sc.added},
		{"a cluster removed: listed at once, everything stays until the confirming listing", sc.removed},
		{"a burst of 200 changes within 2 s: at most 2 listings", sc.burst},
		{"no change: no listing, pings only", sc.steady},
	} {
		if !t.Run(step.name, step.run) {
			t.FailNow()
		}
	}
	t.Logf("events scenario took %s (%d listings answered, %d subscriptions opened)", time.Since(start).Round(100*time.Millisecond),
		sc.ev.Rancher.Served(), sc.ev.Rancher.SubscribeConnects())
}

// eventsScenario is the state TestRancherEvents' steps share.
type eventsScenario struct {
	ev *EventsEnv
	// served are the clusters in Rancher, by name
	served map[string]fakerancher.Cluster
}

func (sc *eventsScenario) fleet(t *testing.T) {
	ev := sc.ev
	sc.served = map[string]fakerancher.Cluster{}
	for _, c := range []fakerancher.Cluster{evAlpha, evBeta, evGamma} {
		ev.Rancher.Set(c)
		sc.served[c.Name] = c
	}
	ev.Start(t)
	ev.Eventually(t, 30*time.Second, "/readyz of the events deployment", func() error { return GetOK("http://" + ev.Addr + "/readyz") })
	ev.Apply(t)
	ev.Eventually(t, 30*time.Second, "one Application and one Secret per cluster", func() error { return sc.fleetIs(sc.served) })
	ev.Eventually(t, 15*time.Second, "the subscription to the fake's /v3/subscribe", func() error {
		if n := ev.Rancher.Subscribers(); n != 1 {
			return fmt.Errorf("%d subscribers", n)
		}
		return nil
	})
	sc.quiet(t)
}

// added registers evDelta in Rancher, active, and times its answer, its
// Secret and its Application.
func (sc *eventsScenario) added(t *testing.T) {
	ev := sc.ev
	n0 := ev.Rancher.Change([]fakerancher.Cluster{evDelta})
	changed := time.Now()
	var toAnswer, toSecret, toApp time.Duration
	secret := RancherSecret(evDelta)
	deadline := changed.Add(30 * time.Second)
	for toApp == 0 || toAnswer == 0 || toSecret == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: in the answer after %s, its Secret after %s, its Application after %s (0: not yet) within %s of the change\n%s",
				evDelta.Name, toAnswer, toSecret, toApp, time.Since(changed).Round(time.Millisecond), ev.Logs())
		}
		at := time.Since(changed)
		if toAnswer == 0 {
			if ps, err := ev.Params(); err == nil {
				if p, ok := ps[evDelta.Name]; ok && p.Phase == "ready" {
					toAnswer = at
				}
			}
		}
		if toSecret == 0 {
			if _, err := ev.Secret(secret); err == nil {
				toSecret = at
			}
		}
		if toApp == 0 {
			if apps, err := ev.Apps(); err == nil {
				if _, ok := apps[EventsAppName(evDelta.Name)]; ok {
					toApp = at
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	listings := ev.Rancher.Served() - n0
	t.Logf("%s added to Rancher: in the answer %.2f s, its Secret %.2f s, its Application %.2f s after the change (%d listing(s), interval %s)",
		evDelta.Name, toAnswer.Seconds(), toSecret.Seconds(), toApp.Seconds(), listings, EventsInterval)
	if toApp > eventsNewTarget {
		t.Errorf("the Application of %s came %.2f s after the change, target ≤ %s", evDelta.Name, toApp.Seconds(), eventsNewTarget)
	}
	if listings < 1 {
		t.Errorf("no listing answered since the change, yet %s is served", evDelta.Name)
	}
	sc.served[evDelta.Name] = evDelta
	if err := sc.fleetIs(sc.served); err != nil {
		t.Fatal(err)
	}
	sc.quiet(t)
}

// removed removes evBeta from Rancher and follows the listings: the
// resource.remove lists at once; a change of evGamma lists again; the
// subscription cut lists a third time, which confirms the departure.
func (sc *eventsScenario) removed(t *testing.T) {
	d := sc.newDeparture(t, evBeta)
	d.removeLists(t)
	d.changeLists(t, evGamma)
	d.cutConfirms(t)
	sc.quiet(t)
}

// burst makes eventsBurst changes of evAlpha within eventsBurstSpan and
// counts the listings until none begins for eventsQuiet. The service lists
// a burst at most inventory.HintMaxDelay after its first change, and once
// more for the changes that reach it during that listing: a burst made
// within that delay is at most 2 listings. One the machine could not make
// within it (the e2e suites run side by side on two cores) is made once
// more; if that one overruns too, it is held to what the same rule allows
// a burst of its span: a listing for each longest wait it spans, and one
// more (a debounce that listed at every change would make 200).
func (sc *eventsScenario) burst(t *testing.T) {
	for attempt := 1; ; attempt++ {
		span, listings := sc.burstOnce(t)
		most := burstListings(span)
		if span > inventory.HintMaxDelay && attempt < 2 {
			t.Logf("the burst took %s, over the debounce's longest wait (%s): once more", span, inventory.HintMaxDelay)
			continue
		}
		if span > inventory.HintMaxDelay {
			t.Logf("the burst took %s, over the debounce's longest wait (%s), twice: held to at most %d listings", span, inventory.HintMaxDelay, most)
		}
		if listings < 1 || listings > most {
			t.Errorf("%d listings for a burst of %d changes in %s, want 1 to %d", listings, eventsBurst, span, most)
		}
		break
	}
	if err := sc.fleetIs(sc.served); err != nil {
		t.Fatal(err)
	}
}

// burstListings is the most listings a burst made within span may
// cause: the first listing starts at most inventory.HintMaxDelay after
// its first change and each takes the changes made until it starts, so
// one per longest wait the span covers, and one more for the changes
// that reach the service during the last: 2 within one wait.
func burstListings(span time.Duration) int {
	return int(math.Ceil(float64(span)/float64(inventory.HintMaxDelay))) + 1
}

// burstOnce makes one burst and returns how long it took to make and the
// listings it caused.
func (sc *eventsScenario) burstOnce(t *testing.T) (span time.Duration, listings int) {
	ev := sc.ev
	r0, err := ev.Metric("argocd_cluster_discovery_rancher_events_received_total", `{name="change",source="`+EventsSource+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	n0 := ev.Rancher.Served()
	// the changes go in batches of eventsBurstBatch (one event each), so
	// that a busy machine's late wake-ups are few; the last batch is due
	// at 95% of the span
	batches := eventsBurst / eventsBurstBatch
	every := eventsBurstSpan * 19 / 20 / time.Duration(batches-1)
	start := time.Now()
	var last time.Time
	for b := range batches {
		time.Sleep(time.Until(start.Add(time.Duration(b) * every)))
		set := make([]fakerancher.Cluster, eventsBurstBatch)
		for j := range set {
			set[j] = evAlpha
			set[j].Labels = map[string]string{"e2e-burst": strconv.Itoa(b*eventsBurstBatch + j)}
		}
		ev.Rancher.Change(set)
		last = time.Now()
	}
	span = last.Sub(start)
	sc.quiet(t)
	listings = ev.Rancher.Served() - n0
	r1, err := ev.Metric("argocd_cluster_discovery_rancher_events_received_total", `{name="change",source="`+EventsSource+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d changes of %s in %.2f s: %d listing(s); the service received %g change events", eventsBurst, evAlpha.Name, span.Seconds(), listings, r1-r0)
	return span, listings
}

// steady waits eventsSteady with no change: no listing, no reconnect, the
// subscription open (Rancher's pings only).
func (sc *eventsScenario) steady(t *testing.T) {
	ev := sc.ev
	n0, c0 := ev.Rancher.Served(), ev.Rancher.SubscribeConnects()
	r0, err := ev.Metric("argocd_cluster_discovery_rancher_events_received_total", `{name="change",source="`+EventsSource+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(eventsSteady)
	n, c := ev.Rancher.Served()-n0, ev.Rancher.SubscribeConnects()-c0
	r1, err := ev.Metric("argocd_cluster_discovery_rancher_events_received_total", `{name="change",source="`+EventsSource+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	connected, err := ev.Metric("argocd_cluster_discovery_rancher_events_connected", `{source="`+EventsSource+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s with no change: %d listing(s), %d subscription(s) opened, %g change events, connected %g", eventsSteady, n, c, r1-r0, connected)
	if n != 0 || c != 0 || r1 != r0 || connected != 1 || ev.Rancher.Subscribers() != 1 {
		t.Errorf("with no change: %d listings, %d reconnects, %g events, connected %g, %d open at the fake; want 0, 0, 0, 1, 1",
			n, c, r1-r0, connected, ev.Rancher.Subscribers())
	}
}

// quiet waits until no listing has been answered for eventsQuiet: the
// listings an earlier step asked for are over.
func (sc *eventsScenario) quiet(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last, since := sc.ev.Rancher.Served(), time.Now()
	for time.Since(since) < eventsQuiet {
		if time.Now().After(deadline) {
			t.Fatalf("listings did not stop for %s within 30 s\n%s", eventsQuiet, sc.ev.Logs())
		}
		time.Sleep(100 * time.Millisecond)
		if n := sc.ev.Rancher.Served(); n != last {
			last, since = n, time.Now()
		}
	}
}

// recorded waits until the service recorded the listing that made the
// fake's count n (its listing duration histogram: listings ended), and
// returns its count.
func (sc *eventsScenario) recorded(t *testing.T, n int) float64 {
	t.Helper()
	var got float64
	// the first listing of the deployment was answered by the fake before
	// the service recorded anything: both count from it
	sc.ev.Eventually(t, 10*time.Second, "the service recorded the listing", func() error {
		v, err := sc.ev.Metric("argocd_cluster_discovery_source_listing_duration_seconds_count", `{source="`+EventsSource+`"}`)
		if err != nil {
			return err
		}
		if got = v; int(v) < n {
			return fmt.Errorf("%g listings recorded, the fake answered %d", v, n)
		}
		return nil
	})
	return got
}

// fleetIs checks the answer, the Secrets and the Applications against the
// clusters want: one of each per cluster, the Application's destination
// the Secret's server, the fake's proxy for the cluster.
func (sc *eventsScenario) fleetIs(want map[string]fakerancher.Cluster) error {
	ev := sc.ev
	ps, err := ev.Params()
	if err != nil {
		return err
	}
	if !slices.Equal(Names(ps), Names(want)) {
		return fmt.Errorf("plugin answer %v, want %v", Names(ps), Names(want))
	}
	secrets, err := ev.Secrets()
	if err != nil {
		return err
	}
	apps, err := ev.Apps()
	if err != nil {
		return err
	}
	var wantSecrets, wantApps []string
	for _, c := range want {
		wantSecrets, wantApps = append(wantSecrets, RancherSecret(c)), append(wantApps, EventsAppName(c.Name))
	}
	slices.Sort(wantSecrets)
	slices.Sort(wantApps)
	var errs []error
	if !slices.Equal(Names(secrets), wantSecrets) {
		errs = append(errs, fmt.Errorf("Secrets %v, want %v", Names(secrets), wantSecrets))
	}
	if !slices.Equal(Names(apps), wantApps) {
		errs = append(errs, fmt.Errorf("Applications %v, want %v", Names(apps), wantApps))
	}
	for name, c := range want {
		server := ev.Rancher.Server(c.ID)
		if p := ps[name]; p.Server != server {
			errs = append(errs, fmt.Errorf("plugin answer for %s: server %q, want %q", name, p.Server, server))
		}
		if s, ok := secrets[RancherSecret(c)]; ok && string(s.Data["server"]) != server {
			errs = append(errs, fmt.Errorf("Secret %s: server %q, want %q", s.Name, s.Data["server"], server))
		}
		if a, ok := apps[EventsAppName(name)]; ok && (a.Server != server || a.Project != "default") {
			errs = append(errs, fmt.Errorf("Application %s: %+v, want destination %s, project default", a.Name, a, server))
		}
	}
	return errors.Join(errs...)
}
