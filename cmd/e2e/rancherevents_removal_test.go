package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
)

// The removal step of TestRancherEvents: with a 5-minute interval, the
// listings after a resource.remove come only from events.

// eventsDeparture follows a cluster from its removal from Rancher to its
// confirmed departure.
type eventsDeparture struct {
	sc          *eventsScenario
	c           fakerancher.Cluster
	app, secret string
	// uid is its Application's, was its Secret as it was before
	uid types.UID
	was *corev1.Secret
	// sawAbsent: the answer showed it absent
	sawAbsent bool
	// n0 is the count of listings answered before the removal, confirm
	// the count that confirms the departure
	n0, confirm int
}

func (sc *eventsScenario) newDeparture(t *testing.T, c fakerancher.Cluster) *eventsDeparture {
	t.Helper()
	d := &eventsDeparture{sc: sc, c: c, app: EventsAppName(c.Name), secret: RancherSecret(c)}
	apps, err := sc.ev.Apps()
	if err != nil {
		t.Fatal(err)
	}
	d.uid = apps[d.app].UID
	if d.was, err = sc.ev.Secret(d.secret); err != nil {
		t.Fatal(err)
	}
	return d
}

// stays checks that the cluster is still served (phase ready, then absent
// once the answer showed it so), its Application the same object, its
// Secret the same object but for its phase.
func (d *eventsDeparture) stays() error {
	ev := d.sc.ev
	ps, err := ev.Params()
	if err != nil {
		return err
	}
	p, ok := ps[d.c.Name]
	switch {
	case !ok:
		return fmt.Errorf("%s is not in the answer", d.c.Name)
	case d.sawAbsent && p.Phase != "absent", p.Phase != "absent" && p.Phase != "ready":
		return fmt.Errorf("%s in the answer with phase %q", d.c.Name, p.Phase)
	}
	apps, err := ev.Apps()
	if err != nil {
		return err
	}
	if a, ok := apps[d.app]; !ok || a.UID != d.uid {
		return fmt.Errorf("the Application %s is gone or was replaced (%+v)", d.app, a)
	}
	s, err := ev.Secret(d.secret)
	if err != nil {
		return err
	}
	return SameSecret(s, d.was)
}

// holds checks stays until until returns true; a check that ran into the
// confirming listing proves nothing.
func (d *eventsDeparture) holds(t *testing.T, what string, until func() bool) {
	t.Helper()
	ev := d.sc.ev
	deadline := time.Now().Add(20 * time.Second)
	for !until() {
		if err := d.stays(); err != nil && ev.Rancher.Served() < d.confirm {
			t.Fatalf("%s: %s left after %d listing(s) without it, before the confirmation (%d): %v\n%s",
				what, d.c.Name, ev.Rancher.Served()-d.n0, EventsDepartureListings, err, ev.Logs())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s\n%s", what, ev.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// listings checks that want listings were answered since the removal.
func (d *eventsDeparture) listings(t *testing.T, want int) {
	t.Helper()
	if n := d.sc.ev.Rancher.Served() - d.n0; n != want {
		t.Fatalf("%d listings since the removal, want %d", n, want)
	}
}

// removeLists removes the cluster (a resource.remove): listed at once,
// phase absent in the answer and on its Secret, everything stays, and
// with a 5-minute interval no listing comes without an event.
func (d *eventsDeparture) removeLists(t *testing.T) {
	ev := d.sc.ev
	d.n0 = ev.Rancher.Change(nil, d.c.ID)
	d.confirm = d.n0 + EventsDepartureListings
	removed := time.Now()
	d.holds(t, "the listing the resource.remove asked for", func() bool { return ev.Rancher.Served() > d.n0 })
	listed := time.Since(removed)
	d.holds(t, "phase absent in the answer and on the Secret", func() bool {
		ps, err := ev.Params()
		s, serr := ev.Secret(d.secret)
		d.sawAbsent = d.sawAbsent || err == nil && ps[d.c.Name].Phase == "absent"
		return d.sawAbsent && serr == nil && s.Labels[clustersecret.LabelPhase] == "absent"
	})
	d.listings(t, 1)
	until := time.Now().Add(3 * time.Second)
	d.holds(t, "no listing without an event", func() bool { return time.Now().After(until) })
	d.listings(t, 1)
	t.Logf("%s removed: listed %.2f s after its resource.remove; phase absent, its Application and Secret stay (3 s, no listing)", d.c.Name, listed.Seconds())
}

// changeLists changes another cluster: the second listing without the
// removed one, recorded by the service, and it stays.
func (d *eventsDeparture) changeLists(t *testing.T, other fakerancher.Cluster) {
	sc, ev := d.sc, d.sc.ev
	other.Labels = map[string]string{"e2e-events": "changed"}
	ev.Rancher.Change([]fakerancher.Cluster{other})
	sc.served[other.Name] = other
	d.holds(t, "the listing a change of "+other.Name+" asked for", func() bool { return ev.Rancher.Served() >= d.n0+2 })
	recorded := sc.recorded(t, d.n0+2)
	until := time.Now().Add(2 * time.Second)
	d.holds(t, "after the second listing without it", func() bool { return time.Now().After(until) })
	d.listings(t, 2)
	t.Logf("the change of %s listed (the 2nd listing without %s, %g recorded by the service): %s stays", other.Name, d.c.Name, recorded, d.c.Name)
}

// cutConfirms cuts the subscription (a drop and a reconnect, each a
// hint): the listing that follows confirms the departure, and only then
// do the Application and the Secret go.
func (d *eventsDeparture) cutConfirms(t *testing.T) {
	sc, ev := d.sc, d.sc.ev
	c0 := ev.Rancher.SubscribeConnects()
	ev.Rancher.CutSubscribers()
	d.holds(t, "the listing after the subscription's cut", func() bool { return ev.Rancher.Served() >= d.confirm })
	confirmed := time.Now()
	delete(sc.served, d.c.Name)
	var goneAfter int // listings without it when they were seen gone
	ev.Eventually(t, 20*time.Second, "the Application and the Secret of "+d.c.Name+" go after the confirming listing", func() error {
		goneAfter = ev.Rancher.Served() - d.n0
		return sc.fleetIs(sc.served)
	})
	if ps, err := ev.Params(); err != nil || slices.Contains(Names(ps), d.c.Name) {
		t.Errorf("%s still in the answer (%v) after its departure", d.c.Name, err)
	}
	ev.Eventually(t, 15*time.Second, "the subscription reopened", func() error {
		if n := ev.Rancher.SubscribeConnects(); n <= c0 || ev.Rancher.Subscribers() != 1 {
			return fmt.Errorf("%d subscriptions opened since the cut, %d open", n-c0, ev.Rancher.Subscribers())
		}
		return nil
	})
	t.Logf("the subscription cut: reconnected, listed (listing %d without %s confirms): its Application and Secret gone %.2f s after that listing was answered, %d listings without it answered by then",
		EventsDepartureListings, d.c.Name, time.Since(confirmed).Seconds(), goneAfter)
}
