package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
)

// The static fleet of the scenarios below. Every static cluster of tenant
// globex gets an Application of globex-monitoring (Argo CD's cluster
// generator over our Secrets).
var (
	// globexOnprem is the onprem cluster as the start writes it (onprem).
	globexOnprem = staticCluster{Name: "globex-onprem", Server: "https://globex-onprem.example.com",
		Tenant: "globex", Project: "globex", Labels: map[string]string{"env": "prod"}}
	// labA has a fixed identity: the rename scenario renames it labB.
	labA = staticCluster{Name: "lab-a", ID: "lab-0001", Server: "https://lab.example.com"}
	labB = staticCluster{Name: "lab-b", ID: "lab-0001", Server: "https://lab.example.com"}
	// awsProdEU (source aws) and awsEU (source aws-prod) join into the same
	// "aws-prod-eu"; their Secrets must still be two.
	awsProdEU = staticCluster{Name: "prod-eu", Server: "https://prod-eu.aws.example.com", Tenant: "globex", Project: "globex"}
	awsEU     = staticCluster{Name: "eu", Server: "https://eu.aws-prod.example.com", Tenant: "globex", Project: "globex"}
	// stores are the fleet source's clusters (the mass drop).
	stores = func() []staticCluster {
		var out []staticCluster
		for i := 1; i <= 4; i++ {
			out = append(out, staticCluster{Name: fmt.Sprintf("store-%d", i), Server: fmt.Sprintf("https://store-%d.example.com", i),
				Tenant: "globex", Project: "globex"})
		}
		return out
	}()
)

// staticSecret is the name of a static cluster's Secret.
func staticSecret(source string, c staticCluster) string {
	id := c.ID
	if id == "" {
		id = c.Name
	}
	return clustersecret.SecretName("cluster", source, c.Name, id)
}

// fleet is every Application of the suite's ApplicationSets and every
// cluster Secret at one moment.
type fleet struct {
	apps    map[string]app // by "<ApplicationSet>/<name>"
	secrets map[string]corev1.Secret
}

func fleetNow() (*fleet, error) {
	f := &fleet{apps: map[string]app{}}
	for _, as := range []string{"acme-guestbook", "globex-monitoring"} {
		apps, err := e.apps(as)
		if err != nil {
			return nil, err
		}
		for n, a := range apps {
			f.apps[as+"/"+n] = a
		}
	}
	secrets, err := e.clusterSecrets()
	if err != nil {
		return nil, err
	}
	f.secrets = secrets
	return f, nil
}

// settledFleet waits until the Applications match the Secrets (appsAre
// for both ApplicationSets) and returns the fleet.
func settledFleet(t *testing.T) *fleet {
	t.Helper()
	eventually(t, 2*interval+20*time.Second, "Applications of both ApplicationSets as expected", func() error {
		return errors.Join(appsAre("acme-guestbook", "acme", acmeApps), appsAre("globex-monitoring", "globex", globexApps))
	})
	f, err := fleetNow()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// sameFleet returns a check that every Application of was is still there,
// the same object (UID) with the same destination and project, that every
// cluster Secret of was is still there, the same object with the same data,
// annotations and labels (the phase and state labels aside), and that no
// Application or cluster Secret was added. skip names objects the scenario
// changes ("app:<ApplicationSet>/<name>", "secret:<name>"): they are not
// compared.
func sameFleet(was *fleet, skip ...string) func() error {
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[s] = true
	}
	withoutPhase := func(m map[string]string) map[string]string {
		m = maps.Clone(m)
		delete(m, clustersecret.LabelPhase)
		delete(m, clustersecret.LabelState)
		return m
	}
	return func() error {
		now, err := fleetNow()
		if err != nil {
			return err
		}
		var errs []error
		for k, a := range was.apps {
			if skipped["app:"+k] {
				continue
			}
			switch b, ok := now.apps[k]; {
			case !ok:
				errs = append(errs, fmt.Errorf("Application %s was deleted", k))
			case b != a:
				errs = append(errs, fmt.Errorf("Application %s changed or was replaced: %+v, was %+v", k, b, a))
			}
		}
		for k := range now.apps {
			if _, ok := was.apps[k]; !ok && !skipped["app:"+k] {
				errs = append(errs, fmt.Errorf("Application %s was created", k))
			}
		}
		for n, s := range was.secrets {
			if skipped["secret:"+n] {
				continue
			}
			c, ok := now.secrets[n]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("Secret %s was deleted", n))
			case c.UID != s.UID:
				errs = append(errs, fmt.Errorf("Secret %s was replaced (UID %s, was %s)", n, c.UID, s.UID))
			case !maps.EqualFunc(c.Data, s.Data, bytes.Equal):
				errs = append(errs, fmt.Errorf("Secret %s: data changed (name %q server %q, were %q %q)", n, c.Data["name"], c.Data["server"], s.Data["name"], s.Data["server"]))
			case !maps.Equal(withoutPhase(c.Labels), withoutPhase(s.Labels)):
				errs = append(errs, fmt.Errorf("Secret %s: labels %v, were %v", n, c.Labels, s.Labels))
			case !maps.Equal(c.Annotations, s.Annotations):
				errs = append(errs, fmt.Errorf("Secret %s: annotations %v, were %v", n, c.Annotations, s.Annotations))
			}
		}
		for n := range now.secrets {
			if _, ok := was.secrets[n]; !ok && !skipped["secret:"+n] {
				errs = append(errs, fmt.Errorf("Secret %s was created", n))
			}
		}
		return errors.Join(errs...)
	}
}

// listingsOf returns how many listings of source our service made.
func listingsOf(t *testing.T, source string) int {
	t.Helper()
	var n int
	eventually(t, 10*time.Second, "listings of "+source, func() (err error) {
		n, err = e.listings(source)
		return err
	})
	return n
}

// through checks, through listings n0+1 .. n0+listings of source and one
// listing more, that same holds (fatal at once), and that want holds from
// the second listing on.
func through(t *testing.T, source string, n0, listings int, same, want func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(listings+3) * interval * 2)
	for {
		n, err := e.listings(source)
		if err != nil {
			t.Fatal(err)
		}
		if err := same(); err != nil {
			t.Fatalf("after %d listing(s) of %s: %v\n%s", n-n0, source, err, e.logs())
		}
		if n >= n0+2 && want != nil {
			if err := want(); err != nil {
				t.Fatalf("after %d listing(s) of %s: %v\n%s", n-n0, source, err, e.logs())
			}
		}
		if n > n0+listings {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d listings, want %d, by %s", source, n-n0, listings+1, deadline.Format(time.TimeOnly))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// writeSourceAt writes a static source's file and returns the count of its
// listings before the change.
func writeSourceAt(t *testing.T, source string, clusters ...staticCluster) int {
	t.Helper()
	n0 := listingsOf(t, source)
	if err := e.writeSource(source, clusters...); err != nil {
		t.Fatal(err)
	}
	return n0
}

// served returns a check that the plugin answer for tenant has the cluster
// from source, with server and phase.
func served(tenant, name, source, server, phase string) func() error {
	return func() error {
		ps, err := e.params(map[string]string{"tenant": tenant})
		if err != nil {
			return err
		}
		p, ok := ps[name]
		switch {
		case !ok:
			return fmt.Errorf("%s is not in the plugin answer for tenant %s", name, tenant)
		case p.Source != source || p.Server != server || p.Phase != phase:
			return fmt.Errorf("plugin answer for %s: %+v, want source %s server %s phase %s", name, p, source, server, phase)
		}
		return nil
	}
}

// testCAFetchFailure: a served static cluster becomes not ready, as a
// cluster whose CA could not be fetched is listed. It keeps its last good
// rendering: in the answer, its Secret and Application as they were, /status
// kept names it. Then it is ready again.
func testCAFetchFailure(t *testing.T) {
	was := settledFleet(t)
	const reason = `fetch CA of https://globex-onprem.example.com: Get "https://globex-onprem.example.com/ca.crt": dial tcp: lookup globex-onprem.example.com: no such host`
	notReady := globexOnprem
	notReady.Ready, notReady.NotReadyReason = new(bool), reason
	keptIs := func(want bool) func() error {
		return func() error {
			doc, err := e.statusDoc()
			if err != nil {
				return err
			}
			for _, k := range doc.Kept {
				if k.Name == globexOnprem.Name {
					if !want {
						return fmt.Errorf("/status kept still lists %+v", k)
					}
					if k.Source != "onprem" || k.Reason != reason {
						return fmt.Errorf("/status kept: %+v, want source onprem, reason %q", k, reason)
					}
					return nil
				}
			}
			if want {
				return fmt.Errorf("/status kept %+v: no %s", doc.Kept, globexOnprem.Name)
			}
			return nil
		}
	}
	inAnswer := served("globex", globexOnprem.Name, "onprem", globexOnprem.Server, "ready")
	t.Run("not ready: its CA could not be fetched", func(t *testing.T) {
		n0 := writeSourceAt(t, "onprem", notReady)
		through(t, "onprem", n0, steadyListings, sameFleet(was), func() error {
			return errors.Join(inAnswer(), keptIs(true)())
		})
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("ready again", func(t *testing.T) {
		n0 := writeSourceAt(t, "onprem", globexOnprem)
		through(t, "onprem", n0, 2, sameFleet(was), func() error {
			return errors.Join(inAnswer(), keptIs(false)())
		})
	})
}

// testDuplicate: a second source lists an established Rancher cluster under
// the same name and server (Rancher's proxy URL). It is served once, from
// the established Rancher listing; no name conflict; /status duplicates
// lists it; no Application or Secret changes, none is created.
func testDuplicate(t *testing.T) {
	was := settledFleet(t)
	dup := staticCluster{Name: acmeProd.Name, Server: e.rancher.Server(acmeProd.ID), Tenant: "acme", Project: "acme"}
	duplicate := func(want bool) func() error {
		return func() error {
			doc, err := e.statusDoc()
			if err != nil {
				return err
			}
			found := false
			for _, d := range doc.Duplicates {
				if d.Name == dup.Name && d.Source == "onprem" {
					if d.KeptName != acmeProd.Name || d.KeptSource != "rancher" || d.Reason != "server" {
						return fmt.Errorf("/status duplicate %+v, want kept rancher %s by server", d, acmeProd.Name)
					}
					found = true
				}
			}
			if found != want {
				return fmt.Errorf("/status duplicates %+v: onprem %s listed %v, want %v", doc.Duplicates, dup.Name, found, want)
			}
			for _, c := range doc.Conflicts {
				if c.Name == dup.Name {
					return fmt.Errorf("/status reports a name conflict on %s: %+v", dup.Name, c)
				}
			}
			return nil
		}
	}
	t.Run("listed by onprem with Rancher's proxy URL: served once, from Rancher", func(t *testing.T) {
		n0 := writeSourceAt(t, "onprem", globexOnprem, dup)
		through(t, "onprem", n0, steadyListings, sameFleet(was), func() error {
			return errors.Join(served("acme", acmeProd.Name, "rancher", e.rancher.Server(acmeProd.ID), "ready")(), duplicate(true)())
		})
		if _, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), staticSecret("onprem", dup), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s of the duplicate: %v, want not found", staticSecret("onprem", dup), err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("onprem no longer lists it: nothing changes", func(t *testing.T) {
		// onprem's listing of it departs like any other: the duplicate is
		// reported until that departure is confirmed
		n0 := writeSourceAt(t, "onprem", globexOnprem)
		through(t, "onprem", n0, departureListings+1, sameFleet(was), served("acme", acmeProd.Name, "rancher", e.rancher.Server(acmeProd.ID), "ready"))
		eventually(t, 2*interval, "no duplicate left", duplicate(false))
		if err := sameFleet(was)(); err != nil {
			t.Fatal(err)
		}
	})
}

// testForeignClash: a cluster Secret that is not ours (no owner label) with
// the server of an established cluster. Ours keeps its UID and content,
// /status reports the clash, the foreign one is never modified.
func testForeignClash(t *testing.T) {
	was := settledFleet(t)
	ours := onpremSecret
	if _, ok := was.secrets[ours]; !ok {
		t.Fatalf("no Secret %s", ours)
	}
	f, err := e.kube.CoreV1().Secrets(argoNS).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "handmade-globex-onprem", Namespace: argoNS,
			Labels: map[string]string{clustersecret.LabelSecretType: "cluster"}},
		StringData: map[string]string{"name": "globex-onprem-by-hand", "server": globexOnprem.Server,
			"config": `{"tlsClientConfig":{"insecure":false}}`},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// the suite's own clean-up: later scenarios count the cluster Secrets
		if err := e.kube.CoreV1().Secrets(argoNS).Delete(context.Background(), f.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete %s: %v", f.Name, err)
		}
	}()
	untouched := func() error {
		now, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), f.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if now.ResourceVersion != f.ResourceVersion {
			return fmt.Errorf("the foreign Secret %s was modified (resourceVersion %s → %s): labels %v annotations %v",
				f.Name, f.ResourceVersion, now.ResourceVersion, now.Labels, now.Annotations)
		}
		return nil
	}
	clash := func() error {
		doc, err := e.statusDoc()
		if err != nil {
			return err
		}
		for _, c := range doc.Secrets.Clashes {
			if c.Cluster == globexOnprem.Name && c.Secret == f.Name && c.By == "server" {
				return nil
			}
		}
		return fmt.Errorf("/status secrets.clashes %+v: no clash of %s with %s by server", doc.Secrets.Clashes, globexOnprem.Name, f.Name)
	}
	n0 := listingsOf(t, "onprem")
	same := sameFleet(was, "secret:"+f.Name)
	through(t, "onprem", n0, steadyListings, func() error { return errors.Join(same(), untouched()) }, clash)
	t.Logf("%d listings with the foreign Secret %s: ours (%s) and its Application unchanged, the clash reported", steadyListings, f.Name, ours)
}

// testRename: a static cluster with a fixed id changes its name. Its one
// Secret is updated in place: the same object, the new name in its data; no
// second Secret for its server.
func testRename(t *testing.T) {
	secret := staticSecret("onprem", labA)
	if err := e.writeSource("onprem", globexOnprem, labA); err != nil {
		t.Fatal(err)
	}
	var before corev1.Secret
	eventually(t, 2*interval+10*time.Second, "the Secret of lab-a", func() error {
		s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(s.Data["name"]) != labA.Name || string(s.Data["server"]) != labA.Server || s.Annotations[clustersecret.AnnotationClusterID] != labA.ID {
			return fmt.Errorf("Secret %s: name %q server %q cluster-id %q", secret, s.Data["name"], s.Data["server"], s.Annotations[clustersecret.AnnotationClusterID])
		}
		before = *s
		return nil
	})
	was := settledFleet(t)
	renamedInPlace := func() error {
		secrets, err := e.clusterSecrets()
		if err != nil {
			return err
		}
		var forServer []string
		for n, s := range secrets {
			if string(s.Data["server"]) == labA.Server {
				forServer = append(forServer, n)
			}
		}
		if len(forServer) != 1 || forServer[0] != secret {
			return fmt.Errorf("Secrets for %s: %v, want only %s", labA.Server, forServer, secret)
		}
		s := secrets[secret]
		switch {
		case s.UID != before.UID:
			return fmt.Errorf("Secret %s was replaced (UID %s, was %s)", secret, s.UID, before.UID)
		case string(s.Data["name"]) != labB.Name:
			return fmt.Errorf("Secret %s: name %q, want %q", secret, s.Data["name"], labB.Name)
		case s.Annotations[clustersecret.AnnotationClusterID] != labA.ID:
			return fmt.Errorf("Secret %s: cluster-id %q, want %q", secret, s.Annotations[clustersecret.AnnotationClusterID], labA.ID)
		}
		return nil
	}
	n0 := writeSourceAt(t, "onprem", globexOnprem, labB)
	through(t, "onprem", n0, steadyListings, sameFleet(was, "secret:"+secret), func() error {
		return errors.Join(renamedInPlace(), served("", labB.Name, "onprem", labB.Server, "ready")())
	})
	if _, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), staticSecret("onprem", labB), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Secret under the new name's hash %s: %v, want not found", staticSecret("onprem", labB), err)
	}
}

// testNameCollision: sources aws and aws-prod list prod-eu and eu, whose
// source-cluster names are both aws-prod-eu: two Secrets, each with its own
// server, neither overwritten by the other.
func testNameCollision(t *testing.T) {
	sa, sb := staticSecret("aws", awsProdEU), staticSecret("aws-prod", awsEU)
	if sa == sb {
		t.Fatalf("one Secret name %s for both clusters", sa)
	}
	t.Logf("Secrets %s (aws prod-eu) and %s (aws-prod eu)", sa, sb)
	if err := errors.Join(e.writeSource("aws", awsProdEU), e.writeSource("aws-prod", awsEU)); err != nil {
		t.Fatal(err)
	}
	globexApps["monitoring-prod-eu"] = sa
	globexApps["monitoring-eu"] = sb
	both := func() error {
		secrets, err := e.clusterSecrets()
		if err != nil {
			return err
		}
		var errs []error
		for _, w := range []struct {
			secret, source string
			c              staticCluster
		}{{sa, "aws", awsProdEU}, {sb, "aws-prod", awsEU}} {
			s, ok := secrets[w.secret]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("no Secret %s", w.secret))
			case string(s.Data["server"]) != w.c.Server || string(s.Data["name"]) != w.c.Name || s.Labels[clustersecret.LabelSource] != w.source:
				errs = append(errs, fmt.Errorf("Secret %s: name %q server %q source %q, want %s %s %s", w.secret,
					s.Data["name"], s.Data["server"], s.Labels[clustersecret.LabelSource], w.c.Name, w.c.Server, w.source))
			}
		}
		return errors.Join(errs...)
	}
	eventually(t, 2*interval+10*time.Second, "two Secrets, each with its own server", both)
	was := settledFleet(t)
	n0 := listingsOf(t, "aws-prod")
	through(t, "aws-prod", n0, steadyListings, sameFleet(was), both)
}

// testMassDrop: the fleet source lists 2 of its 4 served clusters. Half of
// them at once is a mass drop (above departure.maxFraction): the 2 missing
// clusters keep their Applications and Secrets through steadyListings
// listings (phase absent), /status shows 2 held departures; the drop is
// confirmed only after heldListings listings.
func testMassDrop(t *testing.T) {
	if err := e.writeSource("fleet", stores...); err != nil {
		t.Fatal(err)
	}
	for _, c := range stores {
		globexApps["monitoring-"+c.Name] = staticSecret("fleet", c)
	}
	was := settledFleet(t)
	missing := stores[2:]
	held := func() error {
		st, err := e.status()
		if err != nil {
			return err
		}
		if f := st["fleet"]; f.HeldDepartures != 2 || f.Served != 4 || f.Absent != 2 {
			return fmt.Errorf("/status fleet: %+v, want 2 held departures, 4 served, 2 absent", f)
		}
		var errs []error
		if n, err := e.metric("argocd_cluster_discovery_source_departures_held", `{source="fleet"}`); err != nil || n != 2 {
			errs = append(errs, fmt.Errorf("metric source_departures_held{source=fleet}: %v (%v), want 2", n, err))
		}
		secrets, err := e.clusterSecrets()
		if err != nil {
			return err
		}
		for _, c := range missing {
			errs = append(errs, served("globex", c.Name, "fleet", c.Server, "absent")())
			if p := secrets[staticSecret("fleet", c)].Labels[clustersecret.LabelPhase]; p != "absent" {
				errs = append(errs, fmt.Errorf("Secret of %s: phase %q, want absent", c.Name, p))
			}
		}
		return errors.Join(errs...)
	}
	n0 := writeSourceAt(t, "fleet", stores[:2]...)
	t.Run("held: the missing clusters keep their Applications and Secrets", func(t *testing.T) {
		through(t, "fleet", n0, steadyListings, sameFleet(was), held)
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("confirmed after heldListings listings", func(t *testing.T) {
		confirm := n0 + departureHeldListings
		same := sameFleet(was)
		deadline := time.Now().Add(time.Duration(departureHeldListings+3) * interval * 2)
		for {
			n := listingsOf(t, "fleet")
			if n >= confirm {
				break
			}
			// a check that ran into the confirming listing proves nothing
			if err := same(); err != nil && listingsOf(t, "fleet") < confirm {
				t.Fatalf("after %d listings without them (held for %d): %v\n%s", n-n0, departureHeldListings, err, e.logs())
			}
			if time.Now().After(deadline) {
				t.Fatalf("fleet: %d listings, want %d, by %s", n-n0, departureHeldListings, deadline.Format(time.TimeOnly))
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, c := range missing {
			delete(globexApps, "monitoring-"+c.Name)
		}
		eventually(t, 2*interval+10*time.Second, "their Applications go", func() error {
			return appsAre("globex-monitoring", "globex", globexApps)
		})
		eventually(t, 2*interval+10*time.Second, "their Secrets are pruned", func() error {
			secrets, err := e.clusterSecrets()
			if err != nil {
				return err
			}
			for _, c := range missing {
				if _, ok := secrets[staticSecret("fleet", c)]; ok {
					return fmt.Errorf("Secret %s still there", staticSecret("fleet", c))
				}
			}
			return nil
		})
		doc, err := e.statusDoc()
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

// testLateSource restarts our service while one static source (aws-prod)
// cannot complete its first listing: its file is a FIFO that nobody writes
// after the start-up check read it. Until it lists, every plugin answer is
// 503 whatever it selects, Argo CD keeps every Application and no Secret is
// written or deleted. Then the file comes back: answers are 200 again and
// nothing was removed.
func testLateSource(t *testing.T) {
	was := settledFleet(t)
	e.stopService(t)
	stopped, err := fleetNow()
	if err != nil {
		t.Fatal(err)
	}
	path := e.sourceFile("aws-prod")
	content, err := json.Marshal(map[string]any{"clusters": []staticCluster{awsEU}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
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
	e.startService(t, "sync")
	select {
	case err := <-fed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the service never read aws-prod's file at start-up")
	}
	all503 := func() error {
		var errs []error
		for _, in := range []map[string]string{{"tenant": "acme"}, {"tenant": "globex"}, nil, {"source": "rancher"}} {
			_, err := e.params(in)
			if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "aws-prod") {
				errs = append(errs, fmt.Errorf("getparams %v: %v, want 503 naming aws-prod", in, err))
			}
		}
		st, err := e.status()
		if err != nil {
			return err
		}
		if a := st["aws-prod"]; a.Synced {
			errs = append(errs, fmt.Errorf("aws-prod synced: %+v", a))
		}
		return errors.Join(errs...)
	}
	// nothing written or deleted: every cluster Secret as it was when the
	// previous process stopped, to the resourceVersion
	unwritten := func() error {
		secrets, err := e.clusterSecrets()
		if err != nil {
			return err
		}
		if !maps.EqualFunc(secrets, stopped.secrets, func(a, b corev1.Secret) bool { return a.ResourceVersion == b.ResourceVersion }) {
			var got, want []string
			for _, n := range names(secrets) {
				got = append(got, n+"@"+secrets[n].ResourceVersion)
			}
			for _, n := range names(stopped.secrets) {
				want = append(want, n+"@"+stopped.secrets[n].ResourceVersion)
			}
			return fmt.Errorf("cluster Secrets %v, were %v", got, want)
		}
		return nil
	}
	same := sameFleet(was)
	t.Run("aws-prod has not listed: 503 for every answer, nothing removed, no Secret written", func(t *testing.T) {
		n0 := e.rancher.Served()
		through(t, "rancher", n0, steadyListings, func() error { return errors.Join(same(), unwritten()) }, all503)
		eventually(t, 20*time.Second, "the ApplicationSet shows the 503", func() error {
			s, msg, err := e.condition("acme-guestbook", "ErrorOccurred")
			if err != nil {
				return err
			}
			if s != "True" || !strings.Contains(msg, "aws-prod") {
				return fmt.Errorf("ErrorOccurred=%s %q", s, msg)
			}
			return nil
		})
		_, msg, _ := e.condition("acme-guestbook", "ErrorOccurred")
		t.Logf("ApplicationSet condition: %s", msg)
		if err := errors.Join(same(), unwritten()); err != nil {
			t.Fatal(err)
		}
	})
	// the file comes back: the blocked listing gets its content, the next
	// ones read a regular file again
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
		t.Fatal("nobody was reading aws-prod's FIFO: its listing was not blocked")
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Run("aws-prod lists: 200 again, nothing was removed", func(t *testing.T) {
		eventually(t, interval+10*time.Second, "the plugin answers 200", func() error {
			_, err := e.params(map[string]string{"tenant": "acme"})
			return err
		})
		eventually(t, interval+10*time.Second, "the ApplicationSet error clears", func() error {
			s, msg, err := e.condition("acme-guestbook", "ErrorOccurred")
			if err != nil {
				return err
			}
			if s != "False" {
				return fmt.Errorf("ErrorOccurred=%s %q", s, msg)
			}
			return nil
		})
		n0 := listingsOf(t, "aws-prod")
		through(t, "aws-prod", n0, 2, same, served("globex", awsEU.Name, "aws-prod", awsEU.Server, "ready"))
	})
}
