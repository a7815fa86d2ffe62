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
)

// The fleet. Rancher clusters are named by their display name; their
// Secrets are cluster-<source>-<name>.
var (
	acmeProd    = rancherCluster{ID: "c-m-acme0001", Name: "acme-prod", State: "active", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "prod"}}
	acmeStaging = rancherCluster{ID: "c-m-acme0002", Name: "acme-staging", State: "active", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "staging"}}
	acmeDev     = rancherCluster{ID: "c-m-acme0003", Name: "acme-dev", State: "provisioning", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "dev"}}
	globexProd  = rancherCluster{ID: "c-m-glbx0001", Name: "globex-prod", State: "active", Labels: map[string]string{"tenant": "globex", "argocd-project": "globex", "env": "prod"}}
)

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
		{"removal under sync: pruned after the grace period", testRemovalSync},
		{"outage: Rancher answers 500, stale answers keep everything", testOutageStale},
		{"outage across a restart: 503 with our message, nothing removed", testOutageRestart},
		{"recovery: Rancher is back", testRecovery},
		{"removal under upsert-only: the Secret stays", testRemovalUpsertOnly},
		{"foreign Secrets: never modified", testForeignSecrets},
	} {
		if !t.Run(step.name, step.run) {
			t.FailNow()
		}
	}
	e.stopService(t)
	t.Logf("scenarios took %s", time.Since(start).Round(100*time.Millisecond))
}

func secretName(source, cluster string) string { return "cluster-" + source + "-" + cluster }

func testStart(t *testing.T) {
	for _, c := range []rancherCluster{acmeProd, acmeStaging, acmeDev, globexProd} {
		e.rancher.Set(c)
	}
	if err := e.writeStatic(onprem); err != nil {
		t.Fatal(err)
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
		secretName("rancher", "acme-prod"):    e.rancher.Server(acmeProd.ID),
		secretName("rancher", "acme-staging"): e.rancher.Server(acmeStaging.ID),
		secretName("rancher", "globex-prod"):  e.rancher.Server(globexProd.ID),
		secretName("onprem", "globex-onprem"): "https://globex-onprem.example.com",
		"handmade-cluster":                    "https://handmade.example.com",
		"cluster-agent-edge-1":                "https://argocd-agent-resource-proxy:9090?agentName=edge-1",
		"cluster-rancher-acme-staging-other":  "https://rancher.other.example.com/k8s/clusters/c-m-acme2",
	}
	eventually(t, 30*time.Second, "a Secret per active cluster, the provisioning one left out", func() error {
		return secretServers(want)
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
		"guestbook-acme-prod":    secretName("rancher", "acme-prod"),
		"guestbook-acme-staging": secretName("rancher", "acme-staging"),
	}
	globexApps = map[string]string{
		"monitoring-globex-prod":   secretName("rancher", "globex-prod"),
		"monitoring-globex-onprem": secretName("onprem", "globex-onprem"),
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
	active := acmeDev
	active.State = "active"
	t0 := time.Now()
	e.rancher.Set(active)
	var toSecret, toApp time.Duration
	eventually(t, interval+20*time.Second, "Secret and Application of the new cluster", func() error {
		secrets, err := e.clusterSecrets()
		if err != nil {
			return err
		}
		if _, ok := secrets[secretName("rancher", "acme-dev")]; ok && toSecret == 0 {
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
	acmeApps["guestbook-acme-dev"] = secretName("rancher", "acme-dev")
	eventually(t, 10*time.Second, "the new Application targets the new Secret's server", func() error {
		return appsAre("acme-guestbook", "acme", acmeApps)
	})
}

func testRemovalSync(t *testing.T) {
	secret := secretName("rancher", "acme-staging")
	left := time.Now()
	e.rancher.Remove(acmeStaging.ID)
	delete(acmeApps, "guestbook-acme-staging")
	eventually(t, interval+10*time.Second, "the Application of the cluster that left is removed", func() error {
		return appsAre("acme-guestbook", "acme", acmeApps)
	})
	var countdown bool
	eventually(t, 30*time.Second, "its Secret is pruned", func() error {
		s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if s.Annotations["argocd-cluster-discovery.io/missing-since"] != "" {
			countdown = true
		}
		return errors.New("still there")
	})
	gone := time.Since(left)
	t.Logf("Secret %s pruned %.1fs after the cluster left (2 listings, grace period %s)", secret, gone.Seconds(), grace)
	if gone < grace {
		t.Errorf("pruned after %s, before the grace period of %s", gone, grace)
	}
	if !countdown {
		t.Errorf("the prune countdown was never visible on the Secret")
	}
	// the other deployment's Secret for a cluster of that name is not ours
	if _, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), "cluster-rancher-acme-staging-other", metav1.GetOptions{}); err != nil {
		t.Errorf("another deployment's Secret: %v", err)
	}
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
	secret := secretName("rancher", "acme-dev")
	before, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.rancher.Remove(acmeDev.ID)
	delete(acmeApps, "guestbook-acme-dev")
	eventually(t, interval+10*time.Second, "the Application goes (the plugin no longer lists the cluster)", func() error {
		return appsAre("acme-guestbook", "acme", acmeApps)
	})
	holds(t, 2*interval+grace+2*interval, "under upsert-only the Secret stays", func() error {
		s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.UID != before.UID || string(s.Data["server"]) != string(before.Data["server"]) {
			return fmt.Errorf("Secret %s replaced or changed", secret)
		}
		return nil
	})
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
