package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
// environment), an AKS source (a fake ARM over TLS, its token from an App
// Service managed identity endpoint) and an ARO source (an ARM endpoint of
// its own, the same identity; tokens bound by Secrets in Argo CD's
// namespace: aro_test.go), and a plugin ApplicationSet of its own.
// Through the cloud states of clusters that have not left (EKS UPDATING,
// FAILED with an endpoint; AKS Upgrading, Succeeded+Stopped, Failed with
// an FQDN; ARO Updating, AdminUpdating, Succeeded again), for
// SteadyListings listings each, every Application keeps its UID and every
// Secret its UID, data and annotations, their phase and state labels
// showing the state. An EKS cluster gone from ListClusters keeps its
// Application and Secret through listings 1 and 2 without it and loses
// both after the confirming 3rd. An AKS and an ARO subscription that drop
// out of their subscription lists are held drops of their one cluster
// each: kept through CloudHeldListings-1 listings, gone after the last.
//
// Every EKS and AKS Secret it writes is first proven to authenticate
// through Argo CD's code and argocd-k8s-auth (secretsConnect), every ARO
// Secret to connect through Argo CD's code with its bound token
// (aroConnect).
//
// ARO (aro_test.go): a cluster with no token Secret bound is listed not
// ready through the cloud states, with no Secret and no Application, until
// its token is bound; nothing ever calls listCredentials or
// listAdminCredentials.
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
	c := e.StartCloud(t, aroPayments, aroContoso, aroSandbox)
	fleet, aroTokens := serveFleet(t, c, start)
	if !t.Run("EKS and Rancher list eks-platform from the start: served once, the EKS listing (inventory.prefer cloud)", func(t *testing.T) {
		c.Eventually(t, 15*time.Second, "eks-platform served once, from EKS; Rancher's listing a duplicate by cloudID", func() error {
			return errors.Join(c.ServedOnce(eksPlatform.Name, eksPlatform.Server()), c.Duplicate(eksPlatform.Name, true))
		})
	}) {
		t.FailNow()
	}
	t.Run("every EKS and AKS Secret it writes authenticates through Argo CD's code and argocd-k8s-auth", func(t *testing.T) { secretsConnect(t, c) })
	t.Run("every ARO Secret it writes connects through Argo CD's code with its bound token; a wrong CA, no public root or a wrong token fail", func(t *testing.T) {
		aroConnect(t, c, aroTokens)
	})
	t.Run("the chart's alerts and dashboard name only metrics and labels the binary exports", func(t *testing.T) { opsKitExported(t, c) })

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

	// through the cloud states, aro-sandbox has no token bound: not ready,
	// neither Secret nor Application; then its token is bound
	cloudStates(t, c, checkAll, aroUnbound(c, checkAll))
	aroBindsToken(t, c, fleet, st, checkAll)
	rancherListsEKS(t, c, checkAll)

	// the departures: each leaves its Application and Secret through
	// listings 1 and 2 without it, and loses both after the 3rd
	if !t.Run("an AKS and an ARO subscription drop out of their lists: the one cluster of each is a held drop, gone only after heldListings", func(t *testing.T) {
		a0 := c.Fake.SetSubscriptions(cloudSubA)
		r0 := c.Fake.SetAROSubscriptions(aroSubA)
		departs(t, c, st, checkAll,
			departure{name: aksSandbox.Name, listings: c.Fake.AKSListings, n0: a0, need: CloudHeldListings},
			departure{name: aroSandbox.Name, listings: c.Fake.AROListings, n0: r0, need: CloudHeldListings})
	}) {
		t.FailNow()
	}
	if !t.Run("an EKS cluster gone from ListClusters: Application and Secret go after the 3rd listing", func(t *testing.T) {
		n0 := c.Fake.SetEKS(nil, eksPayments.Name)
		departs(t, c, st, checkAll, departure{name: eksPayments.Name, listings: c.Fake.EKSListings, n0: n0, need: DepartureListings})
	}) {
		t.FailNow()
	}
	// the clusters that stayed: unchanged, and what stays served
	delete(fleet, aksSandbox.Name)
	delete(fleet, aroSandbox.Name)
	delete(fleet, eksPayments.Name)
	if err := errors.Join(checkAll(), c.AppsAre(fleet)); err != nil {
		t.Fatalf("at the end: %v\n%s", err, c.Logs())
	}
	if bad, tokens := c.Fake.BadAuth(); len(bad) > 0 || tokens == 0 {
		t.Errorf("requests without the expected credentials: %v; ARM tokens handed out: %d", bad, tokens)
	}
	if calls := c.Fake.AROCredentialCalls(); len(calls) > 0 {
		t.Errorf("the ARO credential actions were called (admin material): %q", calls)
	}
	t.Logf("cloud lifecycle took %s (EKS listings %d, AKS listings %d, ARO listings %d)", time.Since(start).Round(100*time.Millisecond),
		c.Fake.EKSListings(), c.Fake.AKSListings(), c.Fake.AROListings())
}

// serveFleet lists the fleet from the fakes (and eks-platform from Rancher
// too), binds a token to two of the three ARO clusters, starts the
// deployment and applies its ApplicationSet: a Secret and an Application
// per cluster but the ARO cluster without a token (aroSandbox). It returns
// the fleet, cluster → server, and the tokens bound, by cluster.
func serveFleet(t *testing.T, c *CloudEnv, start time.Time) (fleet, aroTokens map[string]string) {
	t.Helper()
	c.Fake.SetEKS([]CloudEKSCluster{eksPayments, eksPlatform})
	c.Fake.SetAKS(aksPayments, aksSandbox)
	c.Fake.SetSubscriptions(cloudSubA, cloudSubB)
	c.Fake.SetARO(aroPayments, aroContoso, aroSandbox)
	c.Fake.SetAROSubscriptions(aroSubA, aroSubB)
	// as an operator does, with the ids `az aro show` prints
	aroTokens = map[string]string{
		aroPayments.Name: c.BindAROToken(t, aroPayments, aroPayments.ID()),
		aroContoso.Name:  c.BindAROToken(t, aroContoso, aroContoso.ID()),
	}
	c.Rancher.Host(rancherPlatform, eksPlatform.Name)

	c.Start(t)
	c.Eventually(t, 30*time.Second, "/readyz of the cloud deployment", func() error { return GetOK("http://" + c.Addr + "/readyz") })

	fleet = map[string]string{ // cluster → server
		eksPayments.Name: eksPayments.Server(), eksPlatform.Name: eksPlatform.Server(),
		aksPayments.Name: aksPayments.Server(), aksSandbox.Name: aksSandbox.Server(),
		aroPayments.Name: aroPayments.Server(), aroContoso.Name: aroContoso.Server(),
	}
	c.Eventually(t, 30*time.Second, "a Secret per cluster, ready, with its state", func() error {
		return c.SecretsAre(fleet, map[string]string{
			eksPayments.Name: "ACTIVE", eksPlatform.Name: "ACTIVE", aksPayments.Name: "Succeeded", aksSandbox.Name: "Succeeded",
			aroPayments.Name: "Succeeded", aroContoso.Name: "Succeeded",
		})
	})
	c.Apply(t)
	c.Eventually(t, 30*time.Second, "one Application per cluster, targeting its Secret's server", func() error {
		return c.AppsAre(fleet)
	})
	t.Logf("EKS, AKS and ARO clusters served, Secrets and Applications created %.1fs after the start", time.Since(start).Seconds())
	return fleet, aroTokens
}

// cloudStates takes eks-payments, aks-payments and the two ARO clusters
// with a token (aro-payments-weu, aro-contoso-weu) through the cloud
// states of clusters that have not left, for SteadyListings listings of
// each source each: every Application and Secret is kept (checkAll), and
// the phase and state labels follow. unbound holds throughout too, and
// its want once the change is seen. It stops the test at the first step
// that fails.
func cloudStates(t *testing.T, c *CloudEnv, checkAll func() error, unbound aroUnboundCheck) {
	for _, step := range []struct {
		name     string
		eks      string
		aks      CloudAKSCluster
		eksPhase string
		aksPhase string
		aksState string
		// the states of aro-payments-weu and aro-contoso-weu
		aro      [2]string
		aroPhase [2]string
	}{
		{name: "EKS UPDATING, AKS Upgrading, ARO Updating and AdminUpdating", eks: "UPDATING", eksPhase: "degraded",
			aks: withAKSState(aksPayments, "Upgrading", "Running"), aksPhase: "degraded", aksState: "Upgrading",
			aro: [2]string{"Updating", "AdminUpdating"}, aroPhase: [2]string{"degraded", "degraded"}},
		{name: "EKS FAILED with an endpoint, AKS Succeeded and Stopped, ARO AdminUpdating and Updating", eks: "FAILED", eksPhase: "degraded",
			aks: withAKSState(aksPayments, "Succeeded", "Stopped"), aksPhase: "degraded", aksState: "Succeeded",
			aro: [2]string{"AdminUpdating", "Updating"}, aroPhase: [2]string{"degraded", "degraded"}},
		{name: "EKS ACTIVE again, AKS Failed with an FQDN, ARO Succeeded again", eks: "ACTIVE", eksPhase: "ready",
			aks: withAKSState(aksPayments, "Failed", "Running"), aksPhase: "degraded", aksState: "Failed",
			aro: [2]string{"Succeeded", "Succeeded"}, aroPhase: [2]string{"ready", "ready"}},
		{name: "AKS Succeeded and Running again", eks: "ACTIVE", eksPhase: "ready",
			aks: aksPayments, aksPhase: "ready", aksState: "Succeeded",
			aro: [2]string{"Succeeded", "Succeeded"}, aroPhase: [2]string{"ready", "ready"}},
	} {
		ok := t.Run(step.name, func(t *testing.T) {
			e0 := c.Fake.SetEKS([]CloudEKSCluster{{Name: eksPayments.Name, Status: step.eks}})
			a0 := c.Fake.SetAKS(step.aks)
			r0 := c.Fake.SetARO(withAROState(aroPayments, step.aro[0]), withAROState(aroContoso, step.aro[1]))
			want := func() error {
				return errors.Join(
					c.Shows(eksPayments.Name, eksPayments.Server(), step.eksPhase, step.eks),
					c.Shows(aksPayments.Name, aksPayments.Server(), step.aksPhase, step.aksState),
					c.Shows(aroPayments.Name, aroPayments.Server(), step.aroPhase[0], step.aro[0]),
					c.Shows(aroContoso.Name, aroContoso.Server(), step.aroPhase[1], step.aro[1]),
					c.Shows(eksPlatform.Name, eksPlatform.Server(), "ready", "ACTIVE"),
					c.Shows(aksSandbox.Name, aksSandbox.Server(), "ready", "Succeeded"),
					c.ServedOnce(eksPlatform.Name, eksPlatform.Server()),
					c.Duplicate(eksPlatform.Name, true),
					unbound.want(),
				)
			}
			c.StaysWith(t, []CloudCounter{
				{Name: "EKS", Count: c.Fake.EKSListings, N0: e0},
				{Name: "AKS", Count: c.Fake.AKSListings, N0: a0},
				{Name: "ARO", Count: c.Fake.AROListings, N0: r0},
			}, SteadyListings, unbound.check, want)
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

// departure is a cluster gone from its source's listings (counted by
// listings) after n0, which must stay through need-1 listings without it.
type departure struct {
	name     string
	listings func() int
	n0, need int
}

// stays checks, n listings after d.n0, that the departing cluster's
// Application and Secret are what they were (gone) and that the plugin
// answer lists it, with phase absent after the first listing without it;
// it records the phase its Secret shows.
func (d departure) stays(t *testing.T, c *CloudEnv, n int, gone *CloudSteady, phases map[string]bool) {
	t.Helper()
	err := gone.Check()
	if err == nil {
		var ps map[string]CloudParam
		if ps, err = c.Params(); err == nil {
			p, ok := ps[d.name]
			switch {
			case !ok:
				err = fmt.Errorf("%s is not in the plugin answer", d.name)
			case n > d.n0+1 && p.Phase != "absent":
				err = fmt.Errorf("%s in the plugin answer after %d listings without it: phase %q, want absent", d.name, n-d.n0, p.Phase)
			}
		}
	}
	if err == nil {
		if s, gerr := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), gone.Secret.Name, metav1.GetOptions{}); gerr == nil {
			phases[s.Labels[clustersecret.LabelPhase]] = true
		}
	}
	// a check that ran into the confirming listing proves nothing
	if after := d.listings(); err != nil && after < d.n0+d.need {
		t.Fatalf("%s removed after %d listing(s) without it, before the confirmation (%d listings): %v\n%s", d.name, after-d.n0, d.need, err, c.Logs())
	}
}

// departs checks the departures ds, at once: each cluster's Application
// and Secret stay through the need-1 listings without it, its Secret
// showing phase absent, and go after the last; the clusters that stay
// (st, checked by checkAll) are kept throughout. It removes the departing
// clusters from st.
func departs(t *testing.T, c *CloudEnv, st map[string]*CloudSteady, checkAll func() error, ds ...departure) {
	t.Helper()
	gone := map[string]*CloudSteady{}
	phases := map[string]map[string]bool{}
	sawTwo := map[string]bool{}
	longest := 0
	for _, d := range ds {
		gone[d.name], phases[d.name] = st[d.name], map[string]bool{}
		delete(st, d.name)
		longest = max(longest, d.need)
	}
	deadline := time.Now().Add(time.Duration(longest+5) * 3 * time.Second)
	for confirmed := map[string]bool{}; len(confirmed) < len(ds); time.Sleep(100 * time.Millisecond) {
		if err := checkAll(); err != nil {
			t.Fatalf("while %v depart: %v\n%s", Names(gone), err, c.Logs())
		}
		for _, d := range ds {
			n := d.listings()
			if confirmed[d.name] || n >= d.n0+d.need {
				confirmed[d.name] = true
				continue
			}
			d.stays(t, c, n, gone[d.name], phases[d.name])
			if n >= d.n0+2 {
				sawTwo[d.name] = true
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d listings since %s left, want %d, by %s\n%s", n-d.n0, d.name, d.need, deadline.Format(time.TimeOnly), c.Logs())
			}
		}
	}
	for _, d := range ds {
		if !sawTwo[d.name] {
			t.Fatalf("never checked %s after 2 listings without it", d.name)
		}
	}
	c.Eventually(t, 15*time.Second, "the Applications and the Secrets of "+strings.Join(Names(gone), ", ")+" go after the confirmation", func() error {
		apps, err := e.Apps("cloud-lifecycle")
		if err != nil {
			return err
		}
		for _, name := range Names(gone) {
			if _, ok := apps[gone[name].App.Name]; ok {
				return fmt.Errorf("Application %s is still there", gone[name].App.Name)
			}
			_, err = e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), gone[name].Secret.Name, metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("Secret %s is still there", gone[name].Secret.Name)
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
	for _, name := range Names(gone) {
		if !phases[name]["absent"] {
			t.Errorf("the Secret of %s never showed phase absent before its departure was confirmed (phases seen: %v)", name, Names(phases[name]))
		}
	}
	if err := checkAll(); err != nil {
		t.Fatalf("after %v left: %v\n%s", Names(gone), err, c.Logs())
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
