package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/clusterprofile"
)

// steady is an established cluster's Application and Secret as they must
// stay while the cluster has not left: the same objects (UIDs), the same
// destination, the same Secret content but for the phase and state labels.
type steady struct {
	c      fakerancher.Cluster
	app    App
	secret *corev1.Secret
}

func established(t *testing.T, c fakerancher.Cluster) *steady {
	t.Helper()
	st := &steady{c: c}
	e.Eventually(t, 10*time.Second, c.Name+" served ready, with its Application and Secret", func() error {
		apps, err := e.Apps("acme-guestbook")
		if err != nil {
			return err
		}
		a, ok := apps["guestbook-"+c.Name]
		if !ok {
			return fmt.Errorf("no Application guestbook-%s", c.Name)
		}
		s, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), RancherSecret(c), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Labels[clustersecret.LabelPhase] != "ready" || s.Annotations[clustersecret.AnnotationClusterID] != c.ID {
			return fmt.Errorf("Secret %s: labels %v annotations %v", s.Name, s.Labels, s.Annotations)
		}
		st.app, st.secret = a, s
		return nil
	})
	return st
}

// check returns why the cluster's Application or Secret is not as it was.
func (st *steady) check() error {
	apps, err := e.Apps("acme-guestbook")
	if err != nil {
		return err
	}
	a, ok := apps[st.app.Name]
	switch {
	case !ok:
		return fmt.Errorf("Application %s was deleted", st.app.Name)
	case a != st.app:
		return fmt.Errorf("Application %s changed: %+v, was %+v", st.app.Name, a, st.app)
	}
	s, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), st.secret.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("Secret %s: %w", st.secret.Name, err)
	}
	return SameSecret(s, st.secret)
}

// shows returns a check that the cluster is served with phase and state:
// in the plugin answer and on its Secret's labels.
func (st *steady) shows(phase, state string) func() error {
	return func() error {
		ps, err := e.Params(map[string]string{"tenant": "acme"})
		if err != nil {
			return err
		}
		if p := ps[st.c.Name]; p.Phase != phase || p.State != state || p.Server != e.Rancher.Server(st.c.ID) {
			return fmt.Errorf("plugin answer for %s: %+v, want phase %q state %q server %s", st.c.Name, p, phase, state, e.Rancher.Server(st.c.ID))
		}
		s, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), st.secret.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Labels[clustersecret.LabelPhase] != phase || s.Labels[clustersecret.LabelState] != state {
			return fmt.Errorf("Secret %s: phase %q state %q, want %q %q", s.Name, s.Labels[clustersecret.LabelPhase], s.Labels[clustersecret.LabelState], phase, state)
		}
		return nil
	}
}

// stays checks, through listings n0+1 .. n0+listings of Rancher and one
// interval more, that the cluster keeps its Application and Secret
// (st.check, fatal at once), and that want holds from the second listing on.
func (st *steady) stays(t *testing.T, n0, listings int, want func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(listings+3) * Interval * 2)
	for {
		n := e.Rancher.Served()
		if err := st.check(); err != nil {
			t.Fatalf("after %d listing(s): %v\n%s", n-n0, err, e.Logs())
		}
		if n >= n0+e.SettleListings() {
			if err := want(); err != nil {
				t.Fatalf("after %d listing(s): %v\n%s", n-n0, err, e.Logs())
			}
		}
		if n > n0+listings {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Rancher answered %d listings, want %d, by %s", n-n0, listings+1, deadline.Format(time.TimeOnly))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// noSecretFor checks that no cluster Secret carries c's identity.
func noSecretFor(c fakerancher.Cluster) error {
	secrets, err := e.ClusterSecrets()
	if err != nil {
		return err
	}
	for n, s := range secrets {
		if s.Annotations[clustersecret.AnnotationClusterID] == c.ID || n == RancherSecret(c) {
			return fmt.Errorf("Secret %s was written for %s (%s)", n, c.Name, c.ID)
		}
	}
	return nil
}

// conflictKept returns a check that /status reports the name conflict of
// name, kept by the rancher source (keep), or no conflict on it (!keep).
func conflictKept(name string, keep bool) func() error {
	return func() error {
		doc, err := e.StatusDoc()
		if err != nil {
			return err
		}
		for _, c := range doc.Conflicts {
			if c.Name != name {
				continue
			}
			if !keep {
				return fmt.Errorf("/status still reports a conflict on %s: %+v", name, c)
			}
			if c.KeptSource != "rancher" {
				return fmt.Errorf("/status conflict on %s: %+v, want kept by rancher", name, c)
			}
			return nil
		}
		if keep {
			return fmt.Errorf("/status reports no conflict on %s: %+v", name, doc.Conflicts)
		}
		return nil
	}
}

// conflictOnProfiles checks that the ClusterProfiles of holder and
// newcomer, two clusters with one name, say which holds it: Conflict
// KeepsName and Served on the holder's, Conflict NameTaken and not served
// on the newcomer's.
func conflictOnProfiles(holder, newcomer fakerancher.Cluster) error {
	list, err := e.Dyn.Resource(clusterprofile.Resource).Namespace(ArgoNS).List(context.Background(),
		metav1.ListOptions{LabelSelector: clusterprofile.LabelSource + "=rancher"})
	if err != nil {
		return err
	}
	want := map[string]map[string]string{
		holder.ID:   {"Conflict": "True/KeepsName", "Served": "True/Served"},
		newcomer.ID: {"Conflict": "True/NameTaken", "Served": "False/NameConflict"},
	}
	var errs []error
	for _, p := range list.Items {
		var rec struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(p.GetAnnotations()[clusterprofile.AnnotationRecord]), &rec); err != nil {
			return fmt.Errorf("clusterprofile %s: %w", p.GetName(), err)
		}
		w, ok := want[rec.ID]
		if !ok {
			continue
		}
		delete(want, rec.ID)
		conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
		got := map[string]string{}
		for _, c := range conds {
			m, _ := c.(map[string]any)
			typ, _ := m["type"].(string)
			status, _ := m["status"].(string)
			reason, _ := m["reason"].(string)
			got[typ] = status + "/" + reason
		}
		for typ, v := range w {
			if got[typ] != v {
				errs = append(errs, fmt.Errorf("clusterprofile %s (%s): condition %s is %q, want %q", p.GetName(), rec.ID, typ, got[typ], v))
			}
		}
	}
	for id := range want {
		errs = append(errs, fmt.Errorf("no clusterprofile of %s", id))
	}
	return errors.Join(errs...)
}

// testLifecycle takes an established Rancher cluster through the states
// Rancher shows for a cluster that has not left, then through a newcomer
// with its display name: through each, for SteadyListings listings, its
// Application keeps its UID and its Secret its content (but for the phase
// and state labels). Then it truly leaves: removing, then gone from
// Rancher; its Application and Secret go once the departure is confirmed,
// not before.
func testLifecycle(t *testing.T) {
	start := time.Now()
	e.Rancher.Change([]fakerancher.Cluster{acmeQA})
	acmeApps["guestbook-acme-qa"] = RancherSecret(acmeQA)
	e.Eventually(t, 2*Interval+20*time.Second, "acme-qa established: its Secret and Application", func() error {
		return e.AppsAre("acme-guestbook", "acme", acmeApps)
	})
	st := established(t, acmeQA)
	lifecycleStates(t, st)
	t.Run("the newcomer leaves: the established cluster stays", func(t *testing.T) {
		n0 := e.Rancher.Change(nil, acmeQA2.ID)
		// the newcomer's own departure is confirmed after DepartureListings
		st.stays(t, n0, DepartureListings, func() error { return noSecretFor(acmeQA2) })
		e.Eventually(t, 2*Interval, "no conflict left on acme-qa", conflictKept("acme-qa", false))
		if err := errors.Join(st.check(), st.shows("ready", "active")()); err != nil {
			t.Fatal(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("true removal: removing, then gone; Application and Secret go after the confirmation", func(t *testing.T) {
		trueRemoval(t, st)
	})
	t.Logf("lifecycle scenarios took %s", time.Since(start).Round(100*time.Millisecond))
}

// lifecycleStates takes the established cluster of st through the states
// Rancher shows for a cluster that has not left, then through a newcomer
// with its display name, each for SteadyListings listings; it stops the
// test at the first that fails.
func lifecycleStates(t *testing.T, st *steady) {
	for _, step := range []struct {
		name         string
		set          []fakerancher.Cluster
		phase, state string
		also         func() error
	}{
		{name: "updating: its hosted update runs (Updated Unknown)",
			set: []fakerancher.Cluster{InState(acmeQA, "updating")}, phase: "degraded", state: "updating"},
		{name: "unavailable: its agent disconnected (Connected False, Ready False Disconnected)",
			set: []fakerancher.Cluster{InState(acmeQA, "unavailable")}, phase: "degraded", state: "unavailable"},
		{name: "error: its health check fails (Ready False, reason Error)",
			set: []fakerancher.Cluster{InState(acmeQA, "error")}, phase: "degraded", state: "error"},
		{name: "a new cluster with its display name: the established one keeps the name",
			set: []fakerancher.Cluster{acmeQA, acmeQA2}, phase: "ready", state: "active",
			also: func() error {
				if err := noSecretFor(acmeQA2); err != nil {
					return err
				}
				if err := e.AppsAre("acme-guestbook", "acme", acmeApps); err != nil {
					return err
				}
				return errors.Join(conflictKept("acme-qa", true)(), conflictOnProfiles(acmeQA, acmeQA2))
			}},
	} {
		ok := t.Run(step.name, func(t *testing.T) {
			n0 := e.Rancher.Change(step.set)
			want := st.shows(step.phase, step.state)
			if step.also != nil {
				want = func() error { return errors.Join(st.shows(step.phase, step.state)(), step.also()) }
			}
			st.stays(t, n0, SteadyListings, want)
		})
		if !ok {
			t.FailNow()
		}
	}
}

// trueRemoval takes the established cluster of st out of Rancher: removing,
// then gone once Rancher's finalizers are done. Its Application and Secret
// stay until the departure is confirmed, its Secret showing phase leaving,
// then go; /status lists the departure.
func trueRemoval(t *testing.T, st *steady) {
	left := time.Now()
	n0 := e.Rancher.Change([]fakerancher.Cluster{InState(acmeQA, "removing")})
	removed := false
	phases := map[string]bool{}
	e.UntilConfirmed(t, n0, acmeQA.Name, func() error {
		// Rancher's finalizers are done after two listings
		if !removed && e.Rancher.Served() >= n0+2 {
			e.Rancher.Change(nil, acmeQA.ID)
			removed = true
		}
		if err := st.check(); err != nil {
			return err
		}
		s, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), st.secret.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phases[s.Labels[clustersecret.LabelPhase]] = true
		return nil
	})
	if !removed {
		t.Fatal("the cluster was never removed from Rancher")
	}
	delete(acmeApps, "guestbook-acme-qa")
	e.Eventually(t, 2*Interval+10*time.Second, "its Application goes", func() error {
		return e.AppsAre("acme-guestbook", "acme", acmeApps)
	})
	e.Eventually(t, 2*Interval+10*time.Second, "its Secret is pruned", func() error {
		_, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), st.secret.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
	t.Logf("acme-qa's Application and Secret removed %.1fs after it began removing (phases seen on its Secret: %v)", time.Since(left).Seconds(), Names(phases))
	switch {
	case phases["leaving"]:
	case e.Rolling.Load():
		// two listings a moment apart across a leader change can pass
		// before the new leader writes the phase: liveness, not safety
		t.Logf("the Secret did not show phase leaving across the restarts (phases seen: %v)", Names(phases))
	default:
		t.Errorf("the Secret never showed phase leaving while Rancher removed the cluster (phases seen: %v)", Names(phases))
	}
	if err := e.DepartedListed(acmeQA); err != nil {
		t.Error(err)
	}
}
