package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/clusterprofile"
)

// testPinnedDeparture: an operator pins the ClusterProfile of a fleet
// cluster, then the cluster goes from its source (one of four: no mass
// drop). Its departure comes due and is not confirmed: its Application
// and Secret stay through the listings after it, and /status counts one
// pinned departure. Once the pin is removed, the departure is confirmed
// and the Application and the Secret go.
func testPinnedDeparture(t *testing.T) {
	if err := e.WriteSource("fleet", stores...); err != nil {
		t.Fatal(err)
	}
	for _, c := range stores {
		globexApps["monitoring-"+c.Name] = StaticSecret("fleet", c)
	}
	was := settledFleet(t)
	gone := stores[3]
	// kubectl -n argocd label clusterprofile NAME argocd-cluster-discovery.io/pin=true
	pinProfile(t, "fleet", gone.Name, `"true"`)
	n0 := e.WriteSourceAt(t, "fleet", stores[:3]...)
	e.Through(t, "fleet", n0, DepartureListings+1, e.SameFleet(was), nil)
	t.Run("due and pinned: kept, counted as pinned", func(t *testing.T) {
		keptDue(t, was, gone, 4, func(f SourceStatus) int { return f.PinnedDepartures })
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("unpinned: confirmed", func(t *testing.T) {
		// kubectl -n argocd label clusterprofile NAME argocd-cluster-discovery.io/pin-
		pinProfile(t, "fleet", gone.Name, "null")
		fleetDeparts(t, gone, 2*Interval+10*time.Second)
	})
}

// pinProfile sets the pin label of the ClusterProfile of source's cluster
// name to value (JSON: "true", or null to remove it), as kubectl label
// would.
func pinProfile(t *testing.T, source, name, value string) {
	t.Helper()
	ctx := context.Background()
	res := e.Dyn.Resource(clusterprofile.Resource).Namespace(ArgoNS)
	list, err := res.List(ctx, metav1.ListOptions{LabelSelector: clusterprofile.LabelSource + "=" + source})
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"` + clusterprofile.LabelPin + `":` + value + `}}}`)
	for _, p := range list.Items {
		if display, _, _ := unstructured.NestedString(p.Object, "spec", "displayName"); display != name {
			continue
		}
		if _, err := res.Patch(ctx, p.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no ClusterProfile of %s/%s", source, name)
}

// testDryRunDeparture: our service restarted with --dry-run, a fleet
// cluster goes from its source (one of three, not a drop). Its departure
// comes due and is not confirmed: every Application keeps its UID, the
// answer has the cluster absent, /status counts one dry-run departure.
// The next process, not a dry run, confirms it: its Application and
// Secret go.
func testDryRunDeparture(t *testing.T) {
	was := settledFleet(t)
	e.StopService(t)
	e.StartService(t, "sync", "--dry-run")
	// the last scenario's departure (store-4, unpinned) vanished: within
	// the source's window (heldListings intervals) it would make this one
	// a slow loss, held as a drop
	time.Sleep(time.Duration(DepartureHeldListings) * Interval)
	gone := stores[2]
	n0 := e.WriteSourceAt(t, "fleet", stores[:2]...)
	e.Through(t, "fleet", n0, DepartureListings+1, e.SameFleet(was), nil)
	t.Run("due in a dry run: kept, counted", func(t *testing.T) {
		keptDue(t, was, gone, 3, func(f SourceStatus) int { return f.DryRunDepartures })
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("the next process, not a dry run, confirms it", func(t *testing.T) {
		e.StopService(t)
		e.StartService(t, "sync")
		fleetDeparts(t, gone, 4*Interval+20*time.Second)
	})
}

// keptDue checks, through SteadyListings listings of the fleet source,
// that every Application keeps its UID, that the answer has gone absent,
// and that /status counts one due departure kept (kept reads which: the
// pinned or the dry run's), none held, and served clusters served.
func keptDue(t *testing.T, was *Fleet, gone StaticCluster, served int, kept func(SourceStatus) int) {
	t.Helper()
	e.Through(t, "fleet", e.ListingsOf(t, "fleet"), SteadyListings, e.SameFleet(was), func() error {
		st, err := e.Status()
		if err != nil {
			return err
		}
		if f := st["fleet"]; kept(f) != 1 || f.HeldDepartures != 0 || f.Served != served {
			return fmt.Errorf("/status fleet: %+v, want 1 departure kept, none held, %d served", f, served)
		}
		return e.Served("globex", gone.Name, "fleet", gone.Server, "absent")()
	})
}

// fleetDeparts waits, up to within for each, until gone's Application and its
// Secret are gone.
func fleetDeparts(t *testing.T, gone StaticCluster, within time.Duration) {
	t.Helper()
	delete(globexApps, "monitoring-"+gone.Name)
	e.Eventually(t, within, "its Application goes", func() error {
		return e.AppsAre("globex-monitoring", "globex", globexApps)
	})
	e.Eventually(t, within, "its Secret is pruned", func() error {
		secrets, err := e.ClusterSecrets()
		if err != nil {
			return err
		}
		if _, ok := secrets[StaticSecret("fleet", gone)]; ok {
			return fmt.Errorf("Secret %s still there", StaticSecret("fleet", gone))
		}
		return nil
	})
}
