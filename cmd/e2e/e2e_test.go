package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
)

// The fleet. Rancher clusters are named by their display name; their
// identity is their Rancher id, and their Secrets are named from both
// (secretName).
var (
	acmeProd    = rancherCluster{ID: "c-m-acme0001", Name: "acme-prod", State: "active", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "prod"}}
	acmeStaging = rancherCluster{ID: "c-m-acme0002", Name: "acme-staging", State: "active", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "staging"}}
	// acmeDev is being imported: never established, so pending, not served
	acmeDev    = inState(rancherCluster{ID: "c-m-acme0003", Name: "acme-dev", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "dev"}}, "provisioning")
	globexProd = rancherCluster{ID: "c-m-glbx0001", Name: "globex-prod", State: "active", Labels: map[string]string{"tenant": "globex", "argocd-project": "globex", "env": "prod"}}
	// acmeQA goes through the lifecycle scenarios; acmeQA2 is another
	// cluster that Rancher shows under the same display name.
	acmeQA  = rancherCluster{ID: "c-m-acme0004", Name: "acme-qa", State: "active", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "qa"}}
	acmeQA2 = rancherCluster{ID: "c-m-acme0099", Name: "acme-qa", State: "active", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "qa"}}
)

// inState returns c as Rancher shows it in a state: the state, and the
// conditions, transitioning and transitioningMessage that Rancher's
// controllers set for it (rancher/rancher pkg/schemas/status over
// rancher/wrangler pkg/summary, as sources/rancher's package doc sums up;
// the fixture is an established cluster: Waiting=True).
func inState(c rancherCluster, state string) rancherCluster {
	c.State, c.Conditions, c.Transitioning, c.Message, c.Removed = state, nil, "", "", ""
	switch state {
	case "active":
	case "provisioning":
		// created in Rancher, agent not deployed yet: Provisioned and
		// Waiting Unknown (the first Unknown names the state), never a
		// health check, so Waiting is not True
		c.Conditions = []rancherCondition{
			{Type: "Provisioned", Status: "Unknown"},
			{Type: "Waiting", Status: "Unknown", Message: "Waiting for API to be available"},
			{Type: "AgentDeployed"}, {Type: "Updated"}, {Type: "Connected"}, {Type: "Ready"},
		}
		c.Message = "Waiting for API to be available"
	case "updating":
		// a hosted cluster's operator phase is updating: Updated Unknown
		c.Conditions = []rancherCondition{{Type: "Updated", Status: "Unknown"}}
	case "unavailable":
		// the agent disconnected: clusterconnected sets Connected False and
		// Ready False, reason Disconnected
		c.Conditions = []rancherCondition{
			{Type: "Connected", Status: "False"},
			{Type: "Ready", Status: "False", Reason: "Disconnected", Message: "Cluster agent is not connected"},
		}
		c.Message = "Cluster agent is not connected"
	case "error":
		// the health check fails: healthsyncer sets Ready False with reason
		// Error (norman's condition.Do)
		msg := `cluster health check failed: Failed to communicate with API server during namespace check: Get "https://10.43.0.1:443/api/v1/namespaces/kube-system?timeout=45s": context deadline exceeded`
		c.Conditions = []rancherCondition{{Type: "Ready", Status: "False", Reason: "Error", Message: msg}}
		c.Transitioning, c.Message = "error", msg
	case "removing":
		// deletionTimestamp set, finalizers remain
		c.Removed = "2026-11-23T12:00:00Z"
		c.Message = "waiting on controller.cattle.io/cluster-agent-controller-cleanup"
	default:
		panic("inState: no conditions known for state " + state)
	}
	return c
}

// secretName is the name of the Secret of a Rancher cluster: from its
// display name and its identity.
func secretName(c rancherCluster) string {
	return clustersecret.SecretName("cluster", "rancher", c.Name, c.ID)
}

// onpremSecret is the static cluster's Secret: its identity is its name.
var onpremSecret = clustersecret.SecretName("cluster", "onprem", "globex-onprem", "globex-onprem")

const onprem = `clusters:
  - name: globex-onprem
    server: https://globex-onprem.example.com
    tenant: globex
    project: globex
    labels: {env: prod}
`

// foreign are the Secrets of foreign-secrets.yaml as created.
var foreign []corev1.Secret

// TestEndToEnd runs the scenarios in order on the shared environment: each
// builds on the state the previous one left.
func TestEndToEnd(t *testing.T) {
	start := time.Now()
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"start: our Secrets for the fleet", testStart},
		{"plugin ApplicationSet: one Application per acme cluster", testPluginApplicationSet},
		{"cluster generator: our Secrets selected by tenant label", testClusterGenerator},
		{"self-registration: a cluster becomes active in Rancher", testSelfRegistration},
		{"removal under sync: Application and Secret go once the departure is confirmed", testRemovalSync},
		{"lifecycle: an established cluster is never removed for its state or a namesake", testLifecycle},
		{"CA fetch failure: a served static cluster not ready keeps its last rendering", testCAFetchFailure},
		{"duplicate: a Rancher cluster listed again by a static source with its proxy URL is served once", testDuplicate},
		{"foreign Secret with our server: a clash, ours kept, theirs untouched", testForeignClash},
		{"rename: a static cluster with a fixed id keeps its one Secret", testRename},
		{"Secret names: aws/prod-eu and aws-prod/eu get two Secrets", testNameCollision},
		{"mass drop: half of a source's clusters missing at once are held", testMassDrop},
		{"late source: a static source that lists only after a restart keeps every answer 503", testLateSource},
		{"outage: Rancher answers 500, stale answers keep everything", testOutageStale},
		{"outage across a restart: 503 with our message, nothing removed", testOutageRestart},
		{"recovery: Rancher is back", testRecovery},
		{"removal under upsert-only: the Application goes after the confirmation, the Secret stays", testRemovalUpsertOnly},
		{"foreign Secrets: never modified", testForeignSecrets},
	} {
		if !t.Run(step.name, step.run) {
			t.FailNow()
		}
	}
	e.stopService(t)
	t.Logf("scenarios took %s", time.Since(start).Round(100*time.Millisecond))
}

func testStart(t *testing.T) {
	for _, c := range []rancherCluster{acmeProd, acmeStaging, acmeDev, globexProd} {
		e.rancher.Set(c)
	}
	if err := e.writeStatic(onprem); err != nil {
		t.Fatal(err)
	}
	// the other static sources list nothing yet
	for _, src := range []string{"aws", "aws-prod", "fleet"} {
		if err := e.writeSource(src); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.apply("foreign-secrets.yaml"); err != nil {
		t.Fatal(err)
	}
	secrets, err := e.clusterSecrets()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names(secrets) {
		foreign = append(foreign, secrets[n])
	}
	e.startService(t, "sync")
	eventually(t, 30*time.Second, "/readyz", func() error { return getOK("http://" + e.apiAddr + "/readyz") })
	want := map[string]string{
		secretName(acmeProd):                 e.rancher.Server(acmeProd.ID),
		secretName(acmeStaging):              e.rancher.Server(acmeStaging.ID),
		secretName(globexProd):               e.rancher.Server(globexProd.ID),
		onpremSecret:                         "https://globex-onprem.example.com",
		"handmade-cluster":                   "https://handmade.example.com",
		"cluster-agent-edge-1":               "https://argocd-agent-resource-proxy:9090?agentName=edge-1",
		"cluster-rancher-acme-staging-other": "https://rancher.other.example.com/k8s/clusters/c-m-acme2",
	}
	eventually(t, 30*time.Second, "a Secret per established cluster, the provisioning one left out", func() error {
		return secretServers(want)
	})
	// ours carry the identity and the phase
	secrets, err = e.clusterSecrets()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []rancherCluster{acmeProd, acmeStaging, globexProd} {
		s := secrets[secretName(c)]
		if id, phase, state := s.Annotations[clustersecret.AnnotationClusterID], s.Labels[clustersecret.LabelPhase], s.Labels[clustersecret.LabelState]; id != c.ID || phase != "ready" || state != "active" {
			t.Errorf("Secret %s: cluster-id %q phase %q state %q, want %q ready active", s.Name, id, phase, state, c.ID)
		}
	}
	// the cluster being imported is listed, pending, and not served
	eventually(t, 10*time.Second, "/status lists acme-dev as unserved and pending", func() error {
		doc, err := e.statusDoc()
		if err != nil {
			return err
		}
		for _, u := range doc.Unserved {
			if u.ID == acmeDev.ID && u.Phase == "pending" && u.State == "provisioning" {
				return nil
			}
		}
		return fmt.Errorf("unserved: %+v", doc.Unserved)
	})
}

// secretServers checks that exactly the cluster Secrets of want exist,
// with those servers.
func secretServers(want map[string]string) error {
	secrets, err := e.clusterSecrets()
	if err != nil {
		return err
	}
	got := map[string]string{}
	for n, s := range secrets {
		got[n] = string(s.Data["server"])
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("cluster Secrets %v, want %v", got, want)
	}
	return nil
}

// appsAre checks the Applications of an ApplicationSet: names, project, and
// a destination equal to the server of the cluster's Secret.
func appsAre(appSet, project string, want map[string]string) error {
	apps, err := e.apps(appSet)
	if err != nil {
		return err
	}
	if !slices.Equal(names(apps), names(want)) {
		return fmt.Errorf("Applications of %s: %v, want %v", appSet, names(apps), names(want))
	}
	secrets, err := e.clusterSecrets()
	if err != nil {
		return err
	}
	for name, secret := range want {
		a := apps[name]
		if a.Project != project {
			return fmt.Errorf("%s: project %q, want %q", name, a.Project, project)
		}
		s, ok := secrets[secret]
		if !ok {
			return fmt.Errorf("%s: its cluster's Secret %s is missing", name, secret)
		}
		if a.Server != string(s.Data["server"]) {
			return fmt.Errorf("%s: destination.server %q, Secret %s has server %q", name, a.Server, secret, s.Data["server"])
		}
	}
	return nil
}

var (
	acmeApps = map[string]string{
		"guestbook-acme-prod":    secretName(acmeProd),
		"guestbook-acme-staging": secretName(acmeStaging),
	}
	globexApps = map[string]string{
		"monitoring-globex-prod":   secretName(globexProd),
		"monitoring-globex-onprem": onpremSecret,
	}
)

func testPluginApplicationSet(t *testing.T) {
	if _, err := e.apply("appset-acme-plugin.yaml"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "one Application per acme cluster", func() error {
		return appsAre("acme-guestbook", "acme", acmeApps)
	})
}

func testClusterGenerator(t *testing.T) {
	if _, err := e.apply("appset-globex-clusters.yaml"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "one Application per globex cluster Secret (Rancher and static)", func() error {
		return appsAre("globex-monitoring", "globex", globexApps)
	})
	// the project the Applications name is the tenant's AppProject
	if _, err := e.dyn.Resource(gvrByKind["AppProject"]).Namespace(argoNS).Get(context.Background(), "globex", metav1.GetOptions{}); err != nil {
		t.Fatalf("AppProject globex: %v", err)
	}
}

func testSelfRegistration(t *testing.T) {
	active := inState(acmeDev, "active")
	t0 := time.Now()
	e.rancher.Set(active)
	var toSecret, toApp time.Duration
	eventually(t, interval+20*time.Second, "Secret and Application of the new cluster", func() error {
		secrets, err := e.clusterSecrets()
		if err != nil {
			return err
		}
		if _, ok := secrets[secretName(acmeDev)]; ok && toSecret == 0 {
			toSecret = time.Since(t0)
		}
		apps, err := e.apps("acme-guestbook")
		if err != nil {
			return err
		}
		if _, ok := apps["guestbook-acme-dev"]; !ok {
			return errors.New("no Application guestbook-acme-dev yet")
		}
		toApp = time.Since(t0)
		return nil
	})
	t.Logf("time-to-Secret: %.1fs, time-to-Application: %.1fs (refresh interval %s, trigger on)", toSecret.Seconds(), toApp.Seconds(), interval)
	fmt.Printf("time-to-Application: %.1fs\n", toApp.Seconds())
	if limit := interval + 10*time.Second; toApp > limit {
		t.Errorf("time-to-Application %s exceeds the target of %s (refresh interval + 10 s)", toApp.Round(100*time.Millisecond), limit)
	}
	acmeApps["guestbook-acme-dev"] = secretName(acmeDev)
	eventually(t, 10*time.Second, "the new Application targets the new Secret's server", func() error {
		return appsAre("acme-guestbook", "acme", acmeApps)
	})
}

func testRemovalSync(t *testing.T) {
	secret := secretName(acmeStaging)
	left := time.Now()
	n0 := e.rancher.Change(nil, acmeStaging.ID)
	phases := map[string]bool{}
	untilConfirmed(t, n0, "acme-staging", func() error {
		if err := appsAre("acme-guestbook", "acme", acmeApps); err != nil {
			return err
		}
		s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phases[s.Labels[clustersecret.LabelPhase]] = true
		return nil
	})
	delete(acmeApps, "guestbook-acme-staging")
	eventually(t, 2*interval+10*time.Second, "the Application of the cluster that left is removed", func() error {
		return appsAre("acme-guestbook", "acme", acmeApps)
	})
	eventually(t, 2*interval+10*time.Second, "its Secret is pruned", func() error {
		_, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
	gone := time.Since(left)
	t.Logf("Application and Secret %s removed %.1fs after the cluster left (%d listings, grace period %s)", secret, gone.Seconds(), departureListings, departureGrace)
	if !phases["absent"] {
		t.Errorf("the Secret never showed phase absent before its departure was confirmed (phases seen: %v)", names(phases))
	}
	if err := departedListed(acmeStaging); err != nil {
		t.Error(err)
	}
	// the other deployment's Secret for a cluster of that name is not ours
	if _, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), "cluster-rancher-acme-staging-other", metav1.GetOptions{}); err != nil {
		t.Errorf("another deployment's Secret: %v", err)
	}
}

// untilConfirmed checks, from the listing after n0 (the count of Rancher
// listings answered before the cluster left) until the listing that
// confirms the departure, that the cluster is still served: in the plugin
// answer, with phase absent or leaving once a listing missed it, and check
// (its Application and Secret are there) holds. It returns when the
// confirming listing has been answered, and fails if the cluster left
// earlier.
func untilConfirmed(t *testing.T, n0 int, name string, check func() error) {
	t.Helper()
	confirm := n0 + departureListings
	deadline := time.Now().Add(time.Duration(departureListings+3) * interval * 2)
	sawTwo := false
	for {
		n := e.rancher.Served()
		if n >= confirm {
			break
		}
		err := check()
		if err == nil {
			var ps map[string]param
			if ps, err = e.params(map[string]string{"tenant": "acme"}); err == nil {
				p, ok := ps[name]
				switch {
				case !ok:
					err = fmt.Errorf("%s is not in the plugin answer", name)
				case n > n0+1 && p.Phase != "absent" && p.Phase != "leaving":
					err = fmt.Errorf("%s in the plugin answer after %d listings without it: phase %q", name, n-n0, p.Phase)
				}
			}
		}
		// a check that ran into the confirming listing proves nothing
		if after := e.rancher.Served(); err != nil && after < confirm {
			t.Fatalf("%s removed after %d listing(s) without it, before the confirmation (%d listings): %v\n%s", name, after-n0, departureListings, err, e.logs())
		}
		if n >= n0+2 {
			sawTwo = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("Rancher answered %d listings since the cluster left, want %d, by %s", n-n0, departureListings, deadline.Format(time.TimeOnly))
		}
		time.Sleep(150 * time.Millisecond)
	}
	if !sawTwo {
		t.Fatalf("never checked %s after 2 listings without it", name)
	}
}

// departedListed checks that /status lists the cluster's departure.
func departedListed(c rancherCluster) error {
	doc, err := e.statusDoc()
	if err != nil {
		return err
	}
	for _, d := range doc.Departed {
		if d.Source == "rancher" && d.ID == c.ID {
			return nil
		}
	}
	return fmt.Errorf("/status departed %+v: no rancher %s", doc.Departed, c.ID)
}

// steady is an established cluster's Application and Secret as they must
// stay while the cluster has not left: the same objects (UIDs), the same
// destination, the same Secret content but for the phase and state labels.
type steady struct {
	c      rancherCluster
	app    app
	secret *corev1.Secret
}

func established(t *testing.T, c rancherCluster) *steady {
	t.Helper()
	st := &steady{c: c}
	eventually(t, 10*time.Second, c.Name+" served ready, with its Application and Secret", func() error {
		apps, err := e.apps("acme-guestbook")
		if err != nil {
			return err
		}
		a, ok := apps["guestbook-"+c.Name]
		if !ok {
			return fmt.Errorf("no Application guestbook-%s", c.Name)
		}
		s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secretName(c), metav1.GetOptions{})
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
	apps, err := e.apps("acme-guestbook")
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
	s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), st.secret.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("Secret %s: %w", st.secret.Name, err)
	}
	return sameSecret(s, st.secret)
}

// shows returns a check that the cluster is served with phase and state:
// in the plugin answer and on its Secret's labels.
func (st *steady) shows(phase, state string) func() error {
	return func() error {
		ps, err := e.params(map[string]string{"tenant": "acme"})
		if err != nil {
			return err
		}
		if p := ps[st.c.Name]; p.Phase != phase || p.State != state || p.Server != e.rancher.Server(st.c.ID) {
			return fmt.Errorf("plugin answer for %s: %+v, want phase %q state %q server %s", st.c.Name, p, phase, state, e.rancher.Server(st.c.ID))
		}
		s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), st.secret.Name, metav1.GetOptions{})
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
	deadline := time.Now().Add(time.Duration(listings+3) * interval * 2)
	for {
		n := e.rancher.Served()
		if err := st.check(); err != nil {
			t.Fatalf("after %d listing(s): %v\n%s", n-n0, err, e.logs())
		}
		if n >= n0+2 {
			if err := want(); err != nil {
				t.Fatalf("after %d listing(s): %v\n%s", n-n0, err, e.logs())
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
func noSecretFor(c rancherCluster) error {
	secrets, err := e.clusterSecrets()
	if err != nil {
		return err
	}
	for n, s := range secrets {
		if s.Annotations[clustersecret.AnnotationClusterID] == c.ID || n == secretName(c) {
			return fmt.Errorf("Secret %s was written for %s (%s)", n, c.Name, c.ID)
		}
	}
	return nil
}

// conflictKept returns a check that /status reports the name conflict of
// name, kept by the rancher source (keep), or no conflict on it (!keep).
func conflictKept(name string, keep bool) func() error {
	return func() error {
		doc, err := e.statusDoc()
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

// testLifecycle takes an established Rancher cluster through the states
// Rancher shows for a cluster that has not left, then through a newcomer
// with its display name: through each, for steadyListings listings, its
// Application keeps its UID and its Secret its content (but for the phase
// and state labels). Then it truly leaves: removing, then gone from
// Rancher; its Application and Secret go once the departure is confirmed,
// not before.
func testLifecycle(t *testing.T) {
	start := time.Now()
	e.rancher.Change([]rancherCluster{acmeQA})
	acmeApps["guestbook-acme-qa"] = secretName(acmeQA)
	eventually(t, 2*interval+20*time.Second, "acme-qa established: its Secret and Application", func() error {
		return appsAre("acme-guestbook", "acme", acmeApps)
	})
	st := established(t, acmeQA)
	for _, step := range []struct {
		name         string
		set          []rancherCluster
		phase, state string
		also         func() error
	}{
		{name: "updating: its hosted update runs (Updated Unknown)",
			set: []rancherCluster{inState(acmeQA, "updating")}, phase: "degraded", state: "updating"},
		{name: "unavailable: its agent disconnected (Connected False, Ready False Disconnected)",
			set: []rancherCluster{inState(acmeQA, "unavailable")}, phase: "degraded", state: "unavailable"},
		{name: "error: its health check fails (Ready False, reason Error)",
			set: []rancherCluster{inState(acmeQA, "error")}, phase: "degraded", state: "error"},
		{name: "a new cluster with its display name: the established one keeps the name",
			set: []rancherCluster{acmeQA, acmeQA2}, phase: "ready", state: "active",
			also: func() error {
				if err := noSecretFor(acmeQA2); err != nil {
					return err
				}
				if err := appsAre("acme-guestbook", "acme", acmeApps); err != nil {
					return err
				}
				return conflictKept("acme-qa", true)()
			}},
	} {
		ok := t.Run(step.name, func(t *testing.T) {
			n0 := e.rancher.Change(step.set)
			want := st.shows(step.phase, step.state)
			if step.also != nil {
				want = func() error { return errors.Join(st.shows(step.phase, step.state)(), step.also()) }
			}
			st.stays(t, n0, steadyListings, want)
		})
		if !ok {
			t.FailNow()
		}
	}
	t.Run("the newcomer leaves: the established cluster stays", func(t *testing.T) {
		n0 := e.rancher.Change(nil, acmeQA2.ID)
		// the newcomer's own departure is confirmed after departureListings
		st.stays(t, n0, departureListings, func() error { return noSecretFor(acmeQA2) })
		eventually(t, 2*interval, "no conflict left on acme-qa", conflictKept("acme-qa", false))
		if err := errors.Join(st.check(), st.shows("ready", "active")()); err != nil {
			t.Fatal(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("true removal: removing, then gone; Application and Secret go after the confirmation", func(t *testing.T) {
		left := time.Now()
		n0 := e.rancher.Change([]rancherCluster{inState(acmeQA, "removing")})
		removed := false
		phases := map[string]bool{}
		untilConfirmed(t, n0, acmeQA.Name, func() error {
			// Rancher's finalizers are done after two listings
			if !removed && e.rancher.Served() >= n0+2 {
				e.rancher.Change(nil, acmeQA.ID)
				removed = true
			}
			if err := st.check(); err != nil {
				return err
			}
			s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), st.secret.Name, metav1.GetOptions{})
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
		eventually(t, 2*interval+10*time.Second, "its Application goes", func() error {
			return appsAre("acme-guestbook", "acme", acmeApps)
		})
		eventually(t, 2*interval+10*time.Second, "its Secret is pruned", func() error {
			_, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), st.secret.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return errors.New("still there")
		})
		t.Logf("acme-qa's Application and Secret removed %.1fs after it began removing (phases seen on its Secret: %v)", time.Since(left).Seconds(), names(phases))
		if !phases["leaving"] {
			t.Errorf("the Secret never showed phase leaving while Rancher removed the cluster (phases seen: %v)", names(phases))
		}
		if err := departedListed(acmeQA); err != nil {
			t.Error(err)
		}
	})
	t.Logf("lifecycle scenarios took %s", time.Since(start).Round(100*time.Millisecond))
}

// state is what must not change while Rancher is down.
func state() (string, error) {
	var parts []string
	for _, as := range []string{"acme-guestbook", "globex-monitoring"} {
		apps, err := e.apps(as)
		if err != nil {
			return "", err
		}
		parts = append(parts, as+"="+strings.Join(names(apps), ","))
	}
	secrets, err := e.clusterSecrets()
	if err != nil {
		return "", err
	}
	return strings.Join(append(parts, "secrets="+strings.Join(names(secrets), ",")), " "), nil
}

// unchanged returns a check that the state is still before.
func unchanged(before string) func() error {
	return func() error {
		now, err := state()
		if err != nil {
			return err
		}
		if now != before {
			return fmt.Errorf("changed:\n  before %s\n  now    %s", before, now)
		}
		return nil
	}
}

var beforeOutage string

func testOutageStale(t *testing.T) {
	var err error
	if beforeOutage, err = state(); err != nil {
		t.Fatal(err)
	}
	t.Logf("before the outage: %s", beforeOutage)
	e.rancher.SetDown(true)
	eventually(t, interval+10*time.Second, "/status shows the rancher source stale", func() error {
		st, err := e.status()
		if err != nil {
			return err
		}
		if r := st["rancher"]; !r.Stale || !strings.Contains(r.LastError, "500") {
			return fmt.Errorf("rancher: %+v", r)
		}
		return nil
	})
	holds(t, 3*interval, "nothing disappears while the last complete listing is served", unchanged(beforeOutage))
	st, err := e.status()
	if err != nil {
		t.Fatal(err)
	}
	if r := st["rancher"]; !r.Stale || r.ConsecutiveFailures < 3 {
		t.Errorf("after several intervals, rancher: %+v", r)
	}
	if s, msg, err := e.condition("acme-guestbook", "ErrorOccurred"); err != nil || s == "True" {
		t.Errorf("a stale answer is a 200: no error expected, got ErrorOccurred=%s %q (%v)", s, msg, err)
	}
}

func testOutageRestart(t *testing.T) {
	e.stopService(t)
	e.startService(t, "upsert-only") // Rancher is still down
	st, err := e.status()
	if err != nil {
		t.Fatal(err)
	}
	if r := st["rancher"]; r.Synced {
		t.Fatalf("rancher synced while down: %+v", r)
	}
	const ours = "source(s) rancher have not completed a listing yet"
	eventually(t, 20*time.Second, "the ApplicationSet shows our 503 message", func() error {
		s, msg, err := e.condition("acme-guestbook", "ErrorOccurred")
		if err != nil {
			return err
		}
		if s != "True" || !strings.Contains(msg, ours) {
			return fmt.Errorf("ErrorOccurred=%s %q", s, msg)
		}
		return nil
	})
	_, msg, _ := e.condition("acme-guestbook", "ErrorOccurred")
	t.Logf("ApplicationSet condition: %s", msg)
	holds(t, 2*interval, "Argo CD keeps every Application on an error; no Secret of an unsynced source is touched", unchanged(beforeOutage))
}

func testRecovery(t *testing.T) {
	e.rancher.SetDown(false)
	recovered := time.Now()
	eventually(t, interval+10*time.Second, "/status: rancher synced and fresh", func() error {
		st, err := e.status()
		if err != nil {
			return err
		}
		if r := st["rancher"]; !r.Synced || r.Stale || r.LastError != "" {
			return fmt.Errorf("rancher: %+v", r)
		}
		return nil
	})
	eventually(t, interval+10*time.Second, "the ApplicationSet error clears without waiting for Argo CD's 3-minute retry", func() error {
		s, msg, err := e.condition("acme-guestbook", "ErrorOccurred")
		if err != nil {
			return err
		}
		if s != "False" {
			return fmt.Errorf("ErrorOccurred=%s %q", s, msg)
		}
		return nil
	})
	t.Logf("ApplicationSet healthy %.1fs after Rancher came back", time.Since(recovered).Seconds())
	if err := unchanged(beforeOutage)(); err != nil {
		t.Fatal(err)
	}
	// the annotation was still set by the failed reconcile: set again
	if n, err := e.metric("argocd_cluster_discovery_appset_refresh_patches_total", `{outcome="repatched"}`); err != nil || n < 1 {
		t.Errorf("repatched refreshes: %v (%v)", n, err)
	}
}

func testRemovalUpsertOnly(t *testing.T) {
	secret := secretName(acmeDev)
	before, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameSecret := func() error {
		s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.UID != before.UID || string(s.Data["server"]) != string(before.Data["server"]) {
			return fmt.Errorf("Secret %s replaced or changed", secret)
		}
		return nil
	}
	n0 := e.rancher.Change(nil, acmeDev.ID)
	untilConfirmed(t, n0, "acme-dev", func() error {
		if err := appsAre("acme-guestbook", "acme", acmeApps); err != nil {
			return err
		}
		return sameSecret()
	})
	delete(acmeApps, "guestbook-acme-dev")
	eventually(t, 2*interval+10*time.Second, "the Application goes (the plugin no longer lists the cluster)", func() error {
		return appsAre("acme-guestbook", "acme", acmeApps)
	})
	if err := departedListed(acmeDev); err != nil {
		t.Error(err)
	}
	holds(t, 3*interval, "under upsert-only the Secret stays", sameSecret)
}

func testForeignSecrets(t *testing.T) {
	if len(foreign) != 3 {
		t.Fatalf("foreign Secrets recorded: %d, want 3", len(foreign))
	}
	for _, was := range foreign {
		now, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), was.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", was.Name, err)
			continue
		}
		if now.ResourceVersion != was.ResourceVersion {
			t.Errorf("%s was modified (resourceVersion %s → %s): labels %v annotations %v", was.Name,
				was.ResourceVersion, now.ResourceVersion, now.Labels, now.Annotations)
		}
	}
}
