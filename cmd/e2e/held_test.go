package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/clusterprofile"
)

// testMassDrop: the fleet source lists 2 of its 4 served clusters. Half of
// them at once is a mass drop (above departure.maxFraction): the 2 missing
// clusters keep their Applications and Secrets through SteadyListings
// listings (phase absent), /status shows 2 held departures; with the
// kubernetes ledger no count of listings releases it (heldListings
// neither): it is confirmed once an operator acknowledges it on the
// ClusterProfiles.
func testMassDrop(t *testing.T) {
	if err := e.WriteSource("fleet", stores...); err != nil {
		t.Fatal(err)
	}
	for _, c := range stores {
		globexApps["monitoring-"+c.Name] = StaticSecret("fleet", c)
	}
	was := settledFleet(t)
	missing := stores[2:]
	held := massDropHeld(missing)
	n0 := e.WriteSourceAt(t, "fleet", stores[:2]...)
	t.Run("held: the missing clusters keep their Applications and Secrets", func(t *testing.T) {
		e.Through(t, "fleet", n0, SteadyListings, e.SameFleet(was), held)
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("past heldListings still held: only an acknowledgement confirms a held drop", func(t *testing.T) {
		e.Through(t, "fleet", n0, DepartureHeldListings+2, e.SameFleet(was), held)
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("acknowledged on the ClusterProfiles: confirmed", func(t *testing.T) {
		// kubectl -n argocd annotate clusterprofiles -l argocd-cluster-discovery.io/source=fleet,argocd-cluster-discovery.io/phase=absent \
		//   argocd-cluster-discovery.io/acknowledge-departure=true
		if n := acknowledgeDepartures(t, "fleet"); n != len(missing) {
			t.Fatalf("acknowledged %d ClusterProfiles, want %d", n, len(missing))
		}
		for _, c := range missing {
			delete(globexApps, "monitoring-"+c.Name)
		}
		e.Eventually(t, 2*Interval+10*time.Second, "their Applications go", func() error {
			return e.AppsAre("globex-monitoring", "globex", globexApps)
		})
		e.Eventually(t, 2*Interval+10*time.Second, "their Secrets are pruned", func() error {
			secrets, err := e.ClusterSecrets()
			if err != nil {
				return err
			}
			for _, c := range missing {
				if _, ok := secrets[StaticSecret("fleet", c)]; ok {
					return fmt.Errorf("Secret %s still there", StaticSecret("fleet", c))
				}
			}
			return nil
		})
		doc, err := e.StatusDoc()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range missing {
			found := false
			for _, d := range doc.Departed {
				found = found || d.Source == "fleet" && d.ID == c.Name
			}
			if !found {
				t.Errorf("/status departed %+v: no fleet %s", doc.Departed, c.Name)
			}
		}
	})
}

// acknowledgeDepartures does what an operator does to confirm the held
// departures of a source: annotate its absent ClusterProfiles, as kubectl
// annotate would. It returns how many it annotated.
func acknowledgeDepartures(t *testing.T, source string) int {
	t.Helper()
	ctx := context.Background()
	res := e.Dyn.Resource(clusterprofile.Resource).Namespace(ArgoNS)
	list, err := res.List(ctx, metav1.ListOptions{LabelSelector: clusterprofile.LabelSource + "=" + source + "," + clusterprofile.LabelPhase + "=absent"})
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"annotations":{"` + clusterprofile.AnnotationAcknowledge + `":"true"}}}`)
	for _, p := range list.Items {
		if _, err := res.Patch(ctx, p.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-annotate"}); err != nil {
			t.Fatal(err)
		}
	}
	return len(list.Items)
}

// massDropHeld returns a check that the mass drop of missing is held:
// /status shows their 2 held departures (4 served, 2 absent), and so does
// the metric; they stay in the plugin answer and on their Secrets with
// phase absent.
func massDropHeld(missing []StaticCluster) func() error {
	return func() error {
		st, err := e.Status()
		if err != nil {
			return err
		}
		if f := st["fleet"]; f.HeldDepartures != 2 || f.Served != 4 || f.Absent != 2 {
			return fmt.Errorf("/status fleet: %+v, want 2 held departures, 4 served, 2 absent", f)
		}
		var errs []error
		if n, err := e.Metric("argocd_cluster_discovery_source_departures_held", `{source="fleet"}`); err != nil || n != 2 {
			errs = append(errs, fmt.Errorf("metric source_departures_held{source=fleet}: %v (%v), want 2", n, err)) //nolint:errorlint // err may be nil
		}
		secrets, err := e.ClusterSecrets()
		if err != nil {
			return err
		}
		for _, c := range missing {
			errs = append(errs, e.Served("globex", c.Name, "fleet", c.Server, "absent")())
			if p := secrets[StaticSecret("fleet", c)].Labels[clustersecret.LabelPhase]; p != "absent" {
				errs = append(errs, fmt.Errorf("Secret of %s: phase %q, want absent", c.Name, p))
			}
		}
		return errors.Join(errs...)
	}
}

// lateSource is the static source testLateSource adds to the configuration.
const lateSource = "late"

// testLateSource restarts our service with a source added to its
// configuration (late) that cannot complete its first listing: its file is
// a FIFO that nobody writes after the start-up check read it. The ledger
// has never held a listing of it, but holds an answer: late waits alone.
// Every plugin answer is a 200 naming late in its stale header where it
// may select it, the ApplicationSet shows no error, Argo CD keeps every
// Application and no Secret is written or deleted. Then the file comes
// back: the header clears and nothing was removed. (A source the ledger
// knows is served from the ledger after a restart, listed or not:
// testOutageRestart.)
func testLateSource(t *testing.T) {
	was := settledFleet(t)
	e.StopService(t)
	stopped, err := e.FleetNow()
	if err != nil {
		t.Fatal(err)
	}
	e.AddedSources = append(e.AddedSources, lateSource)
	path, content := restartWithLateSource(t)
	unwritten := e.SecretsUnwritten(stopped)
	same := e.SameFleet(was)
	// the controller may have asked while the service was stopped (connection refused); its next reconcile, against
	// the new process (which refreshes the ApplicationSets once it leads), clears that: what it shows from then on is
	// the late source's doing
	e.Eventually(t, 2*Interval+20*time.Second, "the ApplicationSet without the stop's error", noAppSetError)
	t.Run("late has not listed: every answer a 200 naming it stale, nothing removed, no Secret written", func(t *testing.T) {
		n0 := e.Rancher.Served()
		e.Through(t, "rancher", n0, SteadyListings, func() error { return errors.Join(same(), unwritten(), noAppSetError()) },
			e.AnswersWaitingFor(lateSource))
		if err := errors.Join(same(), unwritten()); err != nil {
			t.Fatal(err)
		}
	})
	refillLateSource(t, path, content)
	if t.Failed() {
		t.FailNow()
	}
	t.Run("late lists: the stale header clears, nothing was removed", func(t *testing.T) {
		e.Eventually(t, Interval+10*time.Second, "the plugin answers without a stale source", func() error {
			_, stale, err := e.ParamsAndStale(map[string]string{"tenant": "acme"})
			if err == nil && stale != "" {
				err = fmt.Errorf("stale %q", stale)
			}
			return err
		})
		n0 := e.ListingsOf(t, lateSource)
		e.Through(t, lateSource, n0, 2, same, func() error {
			_, err := e.Params(map[string]string{"tenant": "acme"})
			return err
		})
	})
}

// restartWithLateSource starts our service while late's file is a FIFO
// fed once, for the start-up check: its first listing blocks. It returns
// the FIFO's path and the content late lists once it is fed again (no
// cluster).
func restartWithLateSource(t *testing.T) (string, []byte) {
	t.Helper()
	path := e.SourceFile(lateSource)
	content, err := json.Marshal(map[string]any{"clusters": []StaticCluster{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// the start-up check (static.New) reads the file once: feed it once
	fed := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			fed <- err
			return
		}
		_, err = w.Write(content)
		fed <- errors.Join(err, w.Close())
	}()
	e.StartService(t, "sync")
	select {
	case err := <-fed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the service never read late's file at start-up")
	}
	return path, content
}

// noAppSetError checks that the acme ApplicationSet shows no error: a
// source that has not listed makes no answer fail.
func noAppSetError() error {
	s, msg, err := e.Condition("acme-guestbook", "ErrorOccurred")
	if err == nil && s == "True" {
		err = fmt.Errorf("ErrorOccurred=%s %q", s, msg)
	}
	return err
}

// refillLateSource brings late's file back: the blocked listing gets
// its content from the FIFO, the next ones read a regular file again.
func refillLateSource(t *testing.T, path string, content []byte) {
	t.Helper()
	back := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(path, os.O_WRONLY, 0) // the blocked listing is its reader
		if err != nil {
			back <- err
			return
		}
		tmp := path + ".tmp"
		err = os.WriteFile(tmp, content, 0o600)
		if err == nil {
			err = os.Rename(tmp, path)
		}
		_, werr := w.Write(content)
		back <- errors.Join(err, werr, w.Close())
	}()
	select {
	case err := <-back:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nobody was reading late's FIFO: its listing was not blocked")
	}
}
