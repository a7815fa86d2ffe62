package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
)

// TestCloudLifecycle runs a second deployment of our service, with its own
// configuration, port, owner id, Lease and plugin ConfigMap, over an EKS
// source (a fake EKS and tagging API, static AWS credentials in its
// environment) and an AKS source (a fake ARM over TLS, its token from an App
// Service managed identity endpoint), and a plugin ApplicationSet of its
// own. Through the cloud states of clusters that have not left (EKS
// UPDATING, FAILED with an endpoint; AKS Upgrading, Succeeded+Stopped,
// Failed with an FQDN), for SteadyListings listings each, every Application
// keeps its UID and every Secret its UID, data and annotations, their phase
// and state labels showing the state. An EKS cluster gone from
// ListClusters keeps its Application and Secret through listings 1 and 2
// without it and loses both after the confirming 3rd. A subscription that
// drops out of the subscription list is a held drop of its one cluster:
// kept through CloudHeldListings-1 listings, gone after the last.
//
// Every EKS and AKS Secret it writes is first proven to authenticate
// through Argo CD's code and argocd-k8s-auth (secretsConnect).
//
// One cluster under one name from Rancher and from EKS: a Rancher source
// over the suite's fake Rancher (behind a front that makes its clusters
// hosted EKS clusters, namePrefix eks-) lists eks-platform from the start
// and eks-payments once it is established. Both are the EKS clusters by
// CloudID: served once, from EKS (established, else inventory.prefer
// cloud), /status listing Rancher's as duplicates by cloudID, with no name
// conflict and no Secret for them; through SteadyListings listings every
// Application and Secret is kept; Rancher's listings then leave with
// nothing changed.
func TestCloudLifecycle(t *testing.T) {
	start := time.Now()
	c := e.StartCloud(t)
	fleet := serveFleet(t, c, start)
	if !t.Run("EKS and Rancher list eks-platform from the start: served once, the EKS listing (inventory.prefer cloud)", func(t *testing.T) {
		c.Eventually(t, 15*time.Second, "eks-platform served once, from EKS; Rancher's listing a duplicate by cloudID", func() error {
			return errors.Join(c.ServedOnce(eksPlatform.Name, eksPlatform.Server()), c.Duplicate(eksPlatform.Name, true))
		})
	}) {
		t.FailNow()
	}
	t.Run("every EKS and AKS Secret it writes authenticates through Argo CD's code and argocd-k8s-auth", func(t *testing.T) { secretsConnect(t, c) })

	st := map[string]*CloudSteady{}
	for _, name := range Names(fleet) {
		st[name] = c.SteadyOf(t, name)
	}
	checkAll := func() error {
		var errs []error
		for _, name := range Names(st) {
			errs = append(errs, st[name].Check())
		}
		return errors.Join(errs...)
	}

	cloudStates(t, c, checkAll)
	rancherListsEKS(t, c, checkAll)

	// the departures: each leaves its Application and Secret through
	// listings 1 and 2 without it, and loses both after the 3rd
	if !t.Run("an AKS subscription drops out of the list: its one cluster is a held drop, gone only after heldListings", func(t *testing.T) {
		n0 := c.Fake.SetSubscriptions(cloudSubA)
		departs(t, c, st, checkAll, aksSandbox.Name, c.Fake.AKSListings, n0, CloudHeldListings)
	}) {
		t.FailNow()
	}
	if !t.Run("an EKS cluster gone from ListClusters: Application and Secret go after the 3rd listing", func(t *testing.T) {
		n0 := c.Fake.SetEKS(nil, eksPayments.Name)
		departs(t, c, st, checkAll, eksPayments.Name, c.Fake.EKSListings, n0, DepartureListings)
	}) {
		t.FailNow()
	}
	// the clusters that stayed: unchanged, and what stays served
	delete(fleet, aksSandbox.Name)
	delete(fleet, eksPayments.Name)
	if err := errors.Join(checkAll(), c.AppsAre(fleet)); err != nil {
		t.Fatalf("at the end: %v\n%s", err, c.Logs())
	}
	if bad, tokens := c.Fake.BadAuth(); len(bad) > 0 || tokens == 0 {
		t.Errorf("requests without the expected credentials: %v; ARM tokens handed out: %d", bad, tokens)
	}
	t.Logf("cloud lifecycle took %s (EKS listings %d, AKS listings %d)", time.Since(start).Round(100*time.Millisecond), c.Fake.EKSListings(), c.Fake.AKSListings())
}

// serveFleet lists the fleet from the fakes (and eks-platform from Rancher
// too), starts the deployment and applies its ApplicationSet: a Secret and
// an Application per cluster. It returns the fleet, cluster → server.
func serveFleet(t *testing.T, c *CloudEnv, start time.Time) map[string]string {
	t.Helper()
	c.Fake.SetEKS([]CloudEKSCluster{eksPayments, eksPlatform})
	c.Fake.SetAKS(aksPayments, aksSandbox)
	c.Fake.SetSubscriptions(cloudSubA, cloudSubB)
	c.Rancher.Host(rancherPlatform, eksPlatform.Name)

	c.Start(t)
	c.Eventually(t, 30*time.Second, "/readyz of the cloud deployment", func() error { return GetOK("http://" + c.Addr + "/readyz") })

	fleet := map[string]string{ // cluster → server
		eksPayments.Name: eksPayments.Server(), eksPlatform.Name: eksPlatform.Server(),
		aksPayments.Name: aksPayments.Server(), aksSandbox.Name: aksSandbox.Server(),
	}
	c.Eventually(t, 30*time.Second, "a Secret per cluster, ready, with its state", func() error {
		return c.SecretsAre(fleet, map[string]string{
			eksPayments.Name: "ACTIVE", eksPlatform.Name: "ACTIVE", aksPayments.Name: "Succeeded", aksSandbox.Name: "Succeeded",
		})
	})
	c.Apply(t)
	c.Eventually(t, 30*time.Second, "one Application per cluster, targeting its Secret's server", func() error {
		return c.AppsAre(fleet)
	})
	t.Logf("EKS and AKS clusters served, Secrets and Applications created %.1fs after the start", time.Since(start).Seconds())
	return fleet
}

// cloudStates takes eks-payments and aks-payments through the cloud states
// of clusters that have not left, for SteadyListings listings each: every
// Application and Secret is kept (checkAll), the phase and state labels
// follow. It stops the test at the first step that fails.
func cloudStates(t *testing.T, c *CloudEnv, checkAll func() error) {
	for _, step := range []struct {
		name     string
		eks      string
		aks      CloudAKSCluster
		eksPhase string
		aksPhase string
		aksState string
	}{
		{name: "EKS UPDATING, AKS Upgrading", eks: "UPDATING", eksPhase: "degraded",
			aks: withAKSState(aksPayments, "Upgrading", "Running"), aksPhase: "degraded", aksState: "Upgrading"},
		{name: "EKS FAILED with an endpoint, AKS Succeeded and Stopped", eks: "FAILED", eksPhase: "degraded",
			aks: withAKSState(aksPayments, "Succeeded", "Stopped"), aksPhase: "degraded", aksState: "Succeeded"},
		{name: "EKS ACTIVE again, AKS Failed with an FQDN", eks: "ACTIVE", eksPhase: "ready",
			aks: withAKSState(aksPayments, "Failed", "Running"), aksPhase: "degraded", aksState: "Failed"},
		{name: "AKS Succeeded and Running again", eks: "ACTIVE", eksPhase: "ready",
			aks: aksPayments, aksPhase: "ready", aksState: "Succeeded"},
	} {
		ok := t.Run(step.name, func(t *testing.T) {
			e0 := c.Fake.SetEKS([]CloudEKSCluster{{Name: eksPayments.Name, Status: step.eks}})
			a0 := c.Fake.SetAKS(step.aks)
			want := func() error {
				return errors.Join(
					c.Shows(eksPayments.Name, eksPayments.Server(), step.eksPhase, step.eks),
					c.Shows(aksPayments.Name, aksPayments.Server(), step.aksPhase, step.aksState),
					c.Shows(eksPlatform.Name, eksPlatform.Server(), "ready", "ACTIVE"),
					c.Shows(aksSandbox.Name, aksSandbox.Server(), "ready", "Succeeded"),
					c.ServedOnce(eksPlatform.Name, eksPlatform.Server()),
					c.Duplicate(eksPlatform.Name, true),
				)
			}
			c.Stays(t, e0, a0, SteadyListings, checkAll, want)
		})
		if !ok {
			t.FailNow()
		}
	}
}

// rancherListsEKS has Rancher list eks-payments, established from EKS, as
// well as eks-platform, then neither: the EKS listings stay served
// throughout and the Applications and Secrets are kept (checkAll).
func rancherListsEKS(t *testing.T, c *CloudEnv, checkAll func() error) {
	// Rancher starts listing eks-payments, established from EKS: the same
	// cluster (CloudID eks/<account>/<region>/eks-payments), not a name
	// conflict; the EKS listing stays served, no Secret is made for
	// Rancher's; nothing changes through SteadyListings listings of both
	onceFromEKS := func() error {
		return errors.Join(checkAll(), c.NoSecretOf("rancher"),
			c.ServedFrom(eksPayments.Name, "aws", eksPayments.Server()),
			c.ServedFrom(eksPlatform.Name, "aws", eksPlatform.Server()))
	}
	if !t.Run("Rancher starts listing the established eks-payments: served once, from EKS; Applications and Secrets kept", func(t *testing.T) {
		r0 := c.Rancher.Host(rancherPayments, eksPayments.Name)
		c.StaysWith(t, []CloudCounter{{Name: "Rancher", Count: c.Rancher.Listings, N0: r0}, {Name: "EKS", Count: c.Fake.EKSListings, N0: c.Fake.EKSListings()}},
			SteadyListings, onceFromEKS, func() error {
				return errors.Join(
					c.ServedOnce(eksPayments.Name, eksPayments.Server()), c.Duplicate(eksPayments.Name, true),
					c.ServedOnce(eksPlatform.Name, eksPlatform.Server()), c.Duplicate(eksPlatform.Name, true),
					c.Shows(eksPayments.Name, eksPayments.Server(), "ready", "ACTIVE"),
				)
			})
	}) {
		t.FailNow()
	}
	if !t.Run("Rancher no longer lists them: nothing changes, the duplicates go", func(t *testing.T) {
		c.Rancher.Unhost(rancherPlatform.ID)
		r0 := c.Rancher.Unhost(rancherPayments.ID)
		// Rancher's listings depart like any other: the duplicates are
		// reported until their departure is confirmed
		c.StaysWith(t, []CloudCounter{{Name: "Rancher", Count: c.Rancher.Listings, N0: r0}}, DepartureListings+1, onceFromEKS, func() error { return nil })
		c.Eventually(t, 3*CloudInterval+10*time.Second, "no duplicate left", func() error {
			return errors.Join(c.Duplicate(eksPayments.Name, false), c.Duplicate(eksPlatform.Name, false))
		})
		if err := onceFromEKS(); err != nil {
			t.Fatalf("after Rancher's listings left: %v\n%s", err, c.Logs())
		}
	}) {
		t.FailNow()
	}
}

// departs checks the departure of name, gone from its source's listings
// (counted by listings) after n0: its Application and Secret stay through
// the need-1 listings without it, its Secret showing phase absent, and go
// after the last; the clusters that stay (st, checked by checkAll) are
// kept. It removes name from st.
func departs(t *testing.T, c *CloudEnv, st map[string]*CloudSteady, checkAll func() error, name string, listings func() int, n0, need int) {
	t.Helper()
	gone := st[name]
	delete(st, name)
	phases := map[string]bool{}
	confirm := n0 + need
	deadline := time.Now().Add(time.Duration(need+5) * 3 * time.Second)
	sawTwo := false
	for {
		n := listings()
		if n >= confirm {
			break
		}
		err := errors.Join(checkAll(), gone.Check())
		if err == nil {
			var ps map[string]CloudParam
			if ps, err = c.Params(); err == nil {
				p, ok := ps[name]
				switch {
				case !ok:
					err = fmt.Errorf("%s is not in the plugin answer", name)
				case n > n0+1 && p.Phase != "absent":
					err = fmt.Errorf("%s in the plugin answer after %d listings without it: phase %q, want absent", name, n-n0, p.Phase)
				}
			}
		}
		if err == nil {
			if s, gerr := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), gone.Secret.Name, metav1.GetOptions{}); gerr == nil {
				phases[s.Labels[clustersecret.LabelPhase]] = true
			}
		}
		// a check that ran into the confirming listing proves nothing
		if after := listings(); err != nil && after < confirm {
			t.Fatalf("%s removed after %d listing(s) without it, before the confirmation (%d listings): %v\n%s", name, after-n0, need, err, c.Logs())
		}
		if n >= n0+2 {
			sawTwo = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d listings since %s left, want %d, by %s\n%s", n-n0, name, need, deadline.Format(time.TimeOnly), c.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !sawTwo {
		t.Fatalf("never checked %s after 2 listings without it", name)
	}
	c.Eventually(t, 15*time.Second, "the Application and the Secret of "+name+" go after the confirmation", func() error {
		apps, err := e.Apps("cloud-lifecycle")
		if err != nil {
			return err
		}
		if _, ok := apps[gone.App.Name]; ok {
			return fmt.Errorf("Application %s is still there", gone.App.Name)
		}
		_, err = e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), gone.Secret.Name, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("Secret %s is still there", gone.Secret.Name)
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
	if !phases["absent"] {
		t.Errorf("the Secret of %s never showed phase absent before its departure was confirmed (phases seen: %v)", name, Names(phases))
	}
	if err := checkAll(); err != nil {
		t.Fatalf("after %s left: %v\n%s", name, err, c.Logs())
	}
}

// The cloud fleet of TestCloudLifecycle: two EKS and two AKS clusters.
var (
	eksPayments = CloudEKSCluster{Name: "eks-payments", Status: "ACTIVE"}
	// eks-platform has its own Argo CD role (tag argocd-role-arn)
	eksPlatform = CloudEKSCluster{Name: "eks-platform", Status: "ACTIVE", RoleTag: cloudPlatformRole}
	// aks-payments: AKS-managed Entra ID, the controller's own tenant;
	// aks-sandbox: legacy Entra ID with its own server application, in a
	// tenant whose subscription is delegated (Azure Lighthouse)
	aksPayments = CloudAKSCluster{Sub: cloudSubA, RG: "rg-payments", Name: "aks-payments-weu", Provisioning: "Succeeded", PowerState: "Running",
		Tenant: EntraHomeTenant}
	aksSandbox = CloudAKSCluster{Sub: cloudSubB, RG: "rg-sandbox", Name: "aks-sandbox-weu", Provisioning: "Succeeded", PowerState: "Running",
		Tenant: EntraLighthouseTenant, LegacyServerApp: AKSLegacyServerApp}
	// one cluster under one name from Rancher and from EKS: Rancher's
	// "platform" (namePrefix eks-) is the hosted EKS cluster eks-platform,
	// listed by both sources from the start; Rancher's "payments" joins
	// later (eks-payments)
	rancherPlatform = fakerancher.Cluster{ID: "c-m-eksplt01", Name: "platform", State: "active", Labels: map[string]string{"tenant": CloudTenant, "env": "e2e"}}
	rancherPayments = fakerancher.Cluster{ID: "c-m-ekspay01", Name: "payments", State: "active", Labels: map[string]string{"tenant": CloudTenant, "env": "e2e"}}
)

const (
	// the fleet's two Azure subscriptions
	cloudSubA = "9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41"
	cloudSubB = "5c7e9a1b-3d2f-4b6a-8e0c-7f1d2a3b4c5e"
	// cloudPlatformRole is eks-platform's own Argo CD role (its
	// argocd-role-arn tag); the account's is the deployment's
	// CloudAccountRole
	cloudPlatformRole = "arn:aws:iam::" + CloudAWSAccount + ":role/argocd-platform"
)

func withAKSState(c CloudAKSCluster, provisioning, power string) CloudAKSCluster {
	c.Provisioning, c.PowerState = provisioning, power
	return c
}
