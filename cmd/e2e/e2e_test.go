package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
)

// The fleet. Rancher clusters are named by their display name; their
// identity is their Rancher id, and their Secrets are named from both
// (RancherSecret).
var (
	acmeProd    = fakerancher.Cluster{ID: "c-m-acme0001", Name: "acme-prod", State: "active", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "prod"}}
	acmeStaging = fakerancher.Cluster{ID: "c-m-acme0002", Name: "acme-staging", State: "active", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "staging"}}
	// acmeDev is being imported: never established, so pending, not served
	acmeDev    = InState(fakerancher.Cluster{ID: "c-m-acme0003", Name: "acme-dev", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "dev"}}, "provisioning")
	globexProd = fakerancher.Cluster{ID: "c-m-glbx0001", Name: "globex-prod", State: "active", Labels: map[string]string{"tenant": "globex", "argocd-project": "globex", "env": "prod"}}
	// acmeQA goes through the lifecycle scenarios; acmeQA2 is another
	// cluster that Rancher shows under the same display name.
	acmeQA  = fakerancher.Cluster{ID: "c-m-acme0004", Name: "acme-qa", State: "active", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "qa"}}
	acmeQA2 = fakerancher.Cluster{ID: "c-m-acme0099", Name: "acme-qa", State: "active", Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "qa"}}
)

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
		{"claimed tenant: a Rancher cluster's label claims a tenant no rule admits from Rancher: not served, no Secret", testClaimedTenant},
		{"removal under sync: Application and Secret go once the departure is confirmed", testRemovalSync},
		{"lifecycle: an established cluster is never removed for its state or a namesake", testLifecycle},
		{"CA fetch failure: a served static cluster not ready keeps its last rendering", testCAFetchFailure},
		{"duplicate: a Rancher cluster listed again by a static source with its proxy URL is served once", testDuplicate},
		{"foreign Secret with our server: a clash, ours kept, theirs untouched", testForeignClash},
		{"rename: a static cluster with a fixed id keeps its one Secret", testRename},
		{"Secret names: aws/prod-eu and aws-prod/eu get two Secrets", testNameCollision},
		{"mass drop: half of a source's clusters missing at once are held", testMassDrop},
		{"pin: a pinned cluster's due departure waits for the pin's removal", testPinnedDeparture},
		{"dry run: a departure comes due and is not confirmed; the next process confirms it", testDryRunDeparture},
		{"late source: a source added to the configuration and not listed yet waits alone: every answer 200, nothing removed", testLateSource},
		{"outage: Rancher answers 500, stale answers keep everything", testOutageStale},
		{"outage across a restart: the ledger's answer at once, nothing removed", testOutageRestart},
		{"recovery: Rancher is back", testRecovery},
		{"held drop across restarts: Rancher lists nothing, each new process answers as the last", testHeldDropSurvivesRestarts},
		{"upgrade from a version without the ledger while Rancher lists nothing: 503, nothing removed", testUpgradeFromNoLedger},
		{"two replicas: one answer, a leader change recreates nothing, a removal still goes", testReplicas},
		{"lifecycle again, two replicas restarted in turn, then the whole service: every answer as with one process", testLifecycleRolling},
		{"removal under upsert-only: the Application goes after the confirmation, the Secret stays", testRemovalUpsertOnly},
		{"foreign Secrets: never modified", testForeignSecrets},
	} {
		if !t.Run(step.name, step.run) {
			t.FailNow()
		}
	}
	e.StopService(t)
	t.Logf("scenarios took %s", time.Since(start).Round(100*time.Millisecond))
}

func testStart(t *testing.T) {
	for _, c := range []fakerancher.Cluster{acmeProd, acmeStaging, acmeDev, globexProd} {
		e.Rancher.Set(c)
	}
	if err := e.WriteStatic(onprem); err != nil {
		t.Fatal(err)
	}
	// the other static sources list nothing yet
	for _, src := range []string{"aws", "aws-prod", "fleet"} {
		if err := e.WriteSource(src); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Apply("foreign-secrets.yaml"); err != nil {
		t.Fatal(err)
	}
	secrets, err := e.ClusterSecrets()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range Names(secrets) {
		foreign = append(foreign, secrets[n])
	}
	e.StartService(t, "sync")
	e.Eventually(t, 30*time.Second, "/readyz", func() error { return GetOK("http://" + e.APIAddr + "/readyz") })
	want := map[string]string{
		RancherSecret(acmeProd):              e.Rancher.Server(acmeProd.ID),
		RancherSecret(acmeStaging):           e.Rancher.Server(acmeStaging.ID),
		RancherSecret(globexProd):            e.Rancher.Server(globexProd.ID),
		onpremSecret:                         "https://globex-onprem.example.com",
		"handmade-cluster":                   "https://handmade.example.com",
		"cluster-agent-edge-1":               "https://argocd-agent-resource-proxy:9090?agentName=edge-1",
		"cluster-rancher-acme-staging-other": "https://rancher.other.example.com/k8s/clusters/c-m-acme2",
	}
	e.Eventually(t, 30*time.Second, "a Secret per established cluster, the provisioning one left out", func() error {
		return secretServers(want)
	})
	// ours carry the identity and the phase
	secrets, err = e.ClusterSecrets()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []fakerancher.Cluster{acmeProd, acmeStaging, globexProd} {
		s := secrets[RancherSecret(c)]
		if id, phase, state := s.Annotations[clustersecret.AnnotationClusterID], s.Labels[clustersecret.LabelPhase], s.Labels[clustersecret.LabelState]; id != c.ID || phase != "ready" || state != "active" {
			t.Errorf("Secret %s: cluster-id %q phase %q state %q, want %q ready active", s.Name, id, phase, state, c.ID)
		}
	}
	// the cluster being imported is listed, pending, and not served
	e.Eventually(t, 10*time.Second, "/status lists acme-dev as unserved and pending", func() error {
		doc, err := e.StatusDoc()
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
	secrets, err := e.ClusterSecrets()
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

var (
	acmeApps = map[string]string{
		"guestbook-acme-prod":    RancherSecret(acmeProd),
		"guestbook-acme-staging": RancherSecret(acmeStaging),
	}
	globexApps = map[string]string{
		"monitoring-globex-prod":   RancherSecret(globexProd),
		"monitoring-globex-onprem": onpremSecret,
	}
)

func testPluginApplicationSet(t *testing.T) {
	if _, err := e.Apply("appset-acme-plugin.yaml"); err != nil {
		t.Fatal(err)
	}
	e.Eventually(t, 20*time.Second, "one Application per acme cluster", func() error {
		return e.AppsAre("acme-guestbook", "acme", acmeApps)
	})
}

func testClusterGenerator(t *testing.T) {
	if _, err := e.Apply("appset-globex-clusters.yaml"); err != nil {
		t.Fatal(err)
	}
	e.Eventually(t, 20*time.Second, "one Application per globex cluster Secret (Rancher and static)", func() error {
		return e.AppsAre("globex-monitoring", "globex", globexApps)
	})
	// the project the Applications name is the tenant's AppProject
	if _, err := e.Dyn.Resource(GVRByKind["AppProject"]).Namespace(ArgoNS).Get(context.Background(), "globex", metav1.GetOptions{}); err != nil {
		t.Fatalf("AppProject globex: %v", err)
	}
}

func testSelfRegistration(t *testing.T) {
	active := InState(acmeDev, "active")
	t0 := time.Now()
	e.Rancher.Set(active)
	var toSecret, toApp time.Duration
	e.Eventually(t, Interval+20*time.Second, "Secret and Application of the new cluster", func() error {
		secrets, err := e.ClusterSecrets()
		if err != nil {
			return err
		}
		if _, ok := secrets[RancherSecret(acmeDev)]; ok && toSecret == 0 {
			toSecret = time.Since(t0)
		}
		apps, err := e.Apps("acme-guestbook")
		if err != nil {
			return err
		}
		if _, ok := apps["guestbook-acme-dev"]; !ok {
			return errors.New("no Application guestbook-acme-dev yet")
		}
		toApp = time.Since(t0)
		return nil
	})
	t.Logf("time-to-Secret: %.1fs, time-to-Application: %.1fs (refresh interval %s, trigger on)", toSecret.Seconds(), toApp.Seconds(), Interval)
	fmt.Printf("time-to-Application: %.1fs\n", toApp.Seconds())
	if limit := Interval + 10*time.Second; toApp > limit {
		t.Errorf("time-to-Application %s exceeds the target of %s (refresh interval + 10 s)", toApp.Round(100*time.Millisecond), limit)
	}
	acmeApps["guestbook-acme-dev"] = RancherSecret(acmeDev)
	e.Eventually(t, 10*time.Second, "the new Application targets the new Secret's server", func() error {
		return e.AppsAre("acme-guestbook", "acme", acmeApps)
	})
}

func testForeignSecrets(t *testing.T) {
	if len(foreign) != 3 {
		t.Fatalf("foreign Secrets recorded: %d, want 3", len(foreign))
	}
	for _, was := range foreign {
		now, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), was.Name, metav1.GetOptions{})
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
