package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
)

// TestCloudLifecycle runs a second deployment of our service, with its own
// configuration, port, owner id, Lease and plugin ConfigMap, over an EKS
// source (a fake EKS and tagging API, static AWS credentials in its
// environment) and an AKS source (a fake ARM over TLS, its token from an App
// Service managed identity endpoint), and a plugin ApplicationSet of its
// own. Through the cloud states of clusters that have not left (EKS
// UPDATING, FAILED with an endpoint; AKS Upgrading, Succeeded+Stopped,
// Failed with an FQDN), for steadyListings listings each, every Application
// keeps its UID and every Secret its UID, data and annotations, their phase
// and state labels showing the state. A subscription that drops out of the
// subscription list and an EKS cluster gone from ListClusters keep their
// Application and Secret through listings 1 and 2 without them and lose
// both after the confirming 3rd.
//
// One cluster under one name from Rancher and from EKS: a Rancher source
// over the suite's fake Rancher (behind a front that makes its clusters
// hosted EKS clusters, namePrefix eks-) lists eks-platform from the start
// and eks-payments once it is established. Both are the EKS clusters by
// CloudID: served once, from EKS (established, else inventory.prefer
// cloud), /status listing Rancher's as duplicates by cloudID, with no name
// conflict and no Secret for them; through steadyListings listings every
// Application and Secret is kept; Rancher's listings then leave with
// nothing changed.
func TestCloudLifecycle(t *testing.T) {
	start := time.Now()
	c := startCloud(t)

	eksPayments := cloudEKSCluster{Name: "eks-payments", Status: "ACTIVE"}
	eksPlatform := cloudEKSCluster{Name: "eks-platform", Status: "ACTIVE"}
	aksPayments := cloudAKSCluster{Sub: cloudSubA, RG: "rg-payments", Name: "aks-payments-weu", Provisioning: "Succeeded", PowerState: "Running"}
	aksSandbox := cloudAKSCluster{Sub: cloudSubB, RG: "rg-sandbox", Name: "aks-sandbox-weu", Provisioning: "Succeeded", PowerState: "Running"}
	c.fake.SetEKS([]cloudEKSCluster{eksPayments, eksPlatform})
	c.fake.SetAKS(aksPayments, aksSandbox)
	c.fake.SetSubscriptions(cloudSubA, cloudSubB)
	// one cluster under one name from Rancher and from EKS: Rancher's
	// "platform" (namePrefix eks-) is the hosted EKS cluster eks-platform,
	// listed by both sources from the start; Rancher's "payments" joins
	// later (eks-payments)
	rancherPlatform := rancherCluster{ID: "c-m-eksplt01", Name: "platform", State: "active", Labels: map[string]string{"tenant": cloudTenant, "env": "e2e"}}
	rancherPayments := rancherCluster{ID: "c-m-ekspay01", Name: "payments", State: "active", Labels: map[string]string{"tenant": cloudTenant, "env": "e2e"}}
	c.rancher.Host(rancherPlatform, eksPlatform.Name)

	c.start(t)
	c.eventually(t, 30*time.Second, "/readyz of the cloud deployment", func() error { return getOK("http://" + c.addr + "/readyz") })

	fleet := map[string]string{ // cluster → server
		eksPayments.Name: eksPayments.server(), eksPlatform.Name: eksPlatform.server(),
		aksPayments.Name: aksPayments.server(), aksSandbox.Name: aksSandbox.server(),
	}
	c.eventually(t, 30*time.Second, "a Secret per cluster, ready, with its state", func() error {
		return c.secretsAre(fleet, map[string]string{
			eksPayments.Name: "ACTIVE", eksPlatform.Name: "ACTIVE", aksPayments.Name: "Succeeded", aksSandbox.Name: "Succeeded",
		})
	})
	c.apply(t)
	c.eventually(t, 30*time.Second, "one Application per cluster, targeting its Secret's server", func() error {
		return c.appsAre(fleet)
	})
	t.Logf("EKS and AKS clusters served, Secrets and Applications created %.1fs after the start", time.Since(start).Seconds())
	if !t.Run("EKS and Rancher list eks-platform from the start: served once, the EKS listing (inventory.prefer cloud)", func(t *testing.T) {
		c.eventually(t, 15*time.Second, "eks-platform served once, from EKS; Rancher's listing a duplicate by cloudID", func() error {
			return errors.Join(c.servedOnce(eksPlatform.Name, eksPlatform.server()), c.duplicate(eksPlatform.Name, true))
		})
	}) {
		t.FailNow()
	}

	st := map[string]*cloudSteady{}
	for _, name := range names(fleet) {
		st[name] = c.steadyOf(t, name)
	}
	checkAll := func() error {
		var errs []error
		for _, name := range names(st) {
			errs = append(errs, st[name].check())
		}
		return errors.Join(errs...)
	}

	for _, step := range []struct {
		name     string
		eks      string
		aks      cloudAKSCluster
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
			e0 := c.fake.SetEKS([]cloudEKSCluster{{Name: eksPayments.Name, Status: step.eks}})
			a0 := c.fake.SetAKS(step.aks)
			want := func() error {
				return errors.Join(
					c.shows(eksPayments.Name, eksPayments.server(), step.eksPhase, step.eks),
					c.shows(aksPayments.Name, aksPayments.server(), step.aksPhase, step.aksState),
					c.shows(eksPlatform.Name, eksPlatform.server(), "ready", "ACTIVE"),
					c.shows(aksSandbox.Name, aksSandbox.server(), "ready", "Succeeded"),
					c.servedOnce(eksPlatform.Name, eksPlatform.server()),
					c.duplicate(eksPlatform.Name, true),
				)
			}
			c.stays(t, e0, a0, steadyListings, checkAll, want)
		})
		if !ok {
			t.FailNow()
		}
	}

	// Rancher starts listing eks-payments, established from EKS: the same
	// cluster (CloudID eks/<account>/<region>/eks-payments), not a name
	// conflict; the EKS listing stays served, no Secret is made for
	// Rancher's; nothing changes through steadyListings listings of both
	onceFromEKS := func() error {
		return errors.Join(checkAll(), c.noSecretOf("rancher"),
			c.servedFrom(eksPayments.Name, "aws", eksPayments.server()),
			c.servedFrom(eksPlatform.Name, "aws", eksPlatform.server()))
	}
	if !t.Run("Rancher starts listing the established eks-payments: served once, from EKS; Applications and Secrets kept", func(t *testing.T) {
		r0 := c.rancher.Host(rancherPayments, eksPayments.Name)
		c.staysWith(t, []cloudCounter{{"Rancher", c.rancher.Listings, r0}, {"EKS", c.fake.EKSListings, c.fake.EKSListings()}},
			steadyListings, onceFromEKS, func() error {
				return errors.Join(
					c.servedOnce(eksPayments.Name, eksPayments.server()), c.duplicate(eksPayments.Name, true),
					c.servedOnce(eksPlatform.Name, eksPlatform.server()), c.duplicate(eksPlatform.Name, true),
					c.shows(eksPayments.Name, eksPayments.server(), "ready", "ACTIVE"),
				)
			})
	}) {
		t.FailNow()
	}
	if !t.Run("Rancher no longer lists them: nothing changes, the duplicates go", func(t *testing.T) {
		c.rancher.Unhost(rancherPlatform.ID)
		r0 := c.rancher.Unhost(rancherPayments.ID)
		// Rancher's listings depart like any other: the duplicates are
		// reported until their departure is confirmed
		c.staysWith(t, []cloudCounter{{"Rancher", c.rancher.Listings, r0}}, departureListings+1, onceFromEKS, func() error { return nil })
		c.eventually(t, 3*cloudInterval+10*time.Second, "no duplicate left", func() error {
			return errors.Join(c.duplicate(eksPayments.Name, false), c.duplicate(eksPlatform.Name, false))
		})
		if err := onceFromEKS(); err != nil {
			t.Fatalf("after Rancher's listings left: %v\n%s", err, c.logs())
		}
	}) {
		t.FailNow()
	}

	// the departures: each leaves its Application and Secret through
	// listings 1 and 2 without it, and loses both after the 3rd
	departs := func(t *testing.T, name string, listings func() int, n0 int) {
		t.Helper()
		gone := st[name]
		delete(st, name)
		phases := map[string]bool{}
		confirm := n0 + departureListings
		deadline := time.Now().Add(time.Duration(departureListings+5) * 3 * time.Second)
		sawTwo := false
		for {
			n := listings()
			if n >= confirm {
				break
			}
			err := errors.Join(checkAll(), gone.check())
			if err == nil {
				var ps map[string]cloudParam
				if ps, err = c.params(); err == nil {
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
				if s, gerr := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), gone.secret.Name, metav1.GetOptions{}); gerr == nil {
					phases[s.Labels[clustersecret.LabelPhase]] = true
				}
			}
			// a check that ran into the confirming listing proves nothing
			if after := listings(); err != nil && after < confirm {
				t.Fatalf("%s removed after %d listing(s) without it, before the confirmation (%d listings): %v\n%s", name, after-n0, departureListings, err, c.logs())
			}
			if n >= n0+2 {
				sawTwo = true
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d listings since %s left, want %d, by %s\n%s", n-n0, name, departureListings, deadline.Format(time.TimeOnly), c.logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !sawTwo {
			t.Fatalf("never checked %s after 2 listings without it", name)
		}
		c.eventually(t, 15*time.Second, "the Application and the Secret of "+name+" go after the confirmation", func() error {
			apps, err := e.apps("cloud-lifecycle")
			if err != nil {
				return err
			}
			if _, ok := apps[gone.app.Name]; ok {
				return fmt.Errorf("Application %s is still there", gone.app.Name)
			}
			_, err = e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), gone.secret.Name, metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("Secret %s is still there", gone.secret.Name)
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		})
		if !phases["absent"] {
			t.Errorf("the Secret of %s never showed phase absent before its departure was confirmed (phases seen: %v)", name, names(phases))
		}
		if err := checkAll(); err != nil {
			t.Fatalf("after %s left: %v\n%s", name, err, c.logs())
		}
	}
	if !t.Run("an AKS subscription drops out of the list: its cluster goes after the confirmation", func(t *testing.T) {
		n0 := c.fake.SetSubscriptions(cloudSubA)
		departs(t, aksSandbox.Name, c.fake.AKSListings, n0)
	}) {
		t.FailNow()
	}
	if !t.Run("an EKS cluster gone from ListClusters: Application and Secret go after the 3rd listing", func(t *testing.T) {
		n0 := c.fake.SetEKS(nil, eksPayments.Name)
		departs(t, eksPayments.Name, c.fake.EKSListings, n0)
	}) {
		t.FailNow()
	}
	// the clusters that stayed: unchanged, and what stays served
	delete(fleet, aksSandbox.Name)
	delete(fleet, eksPayments.Name)
	if err := errors.Join(checkAll(), c.appsAre(fleet)); err != nil {
		t.Fatalf("at the end: %v\n%s", err, c.logs())
	}
	if bad, tokens := c.fake.BadAuth(); len(bad) > 0 || tokens == 0 {
		t.Errorf("requests without the expected credentials: %v; ARM tokens handed out: %d", bad, tokens)
	}
	t.Logf("cloud lifecycle took %s (EKS listings %d, AKS listings %d)", time.Since(start).Round(100*time.Millisecond), c.fake.EKSListings(), c.fake.AKSListings())
}

const (
	cloudSubA      = "9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41"
	cloudSubB      = "5c7e9a1b-3d2f-4b6a-8e0c-7f1d2a3b4c5e"
	cloudOwnerID   = "e2e-cloud"
	cloudToken     = "e2e-cloud-plugin-token-7b41d09e"
	cloudAppSet    = "cloud-lifecycle"
	cloudLease     = "acd-e2e-cloud"
	cloudConfigMap = "acd-e2e-cloud"
	cloudClientID  = "3f6b2c1d-8e4a-4d7b-9c2e-1a5f6b7c8d9e"
	cloudInterval  = time.Second
)

func withAKSState(c cloudAKSCluster, provisioning, power string) cloudAKSCluster {
	c.Provisioning, c.PowerState = provisioning, power
	return c
}

// cloudEnv is the second deployment: its fakes, directory, port and process.
type cloudEnv struct {
	fake    *fakeCloud
	rancher *rancherEKSFront // the suite's fake Rancher, with hosted EKS clusters
	dir     string
	addr    string
	svc     *proc
}

// startCloud makes the fakes and registers the clean-up that stops the
// deployment and removes everything it and the test created, so that the
// other tests see the environment as TestMain left it.
func startCloud(t *testing.T) *cloudEnv {
	t.Helper()
	dir := filepath.Join(e.dir, "cloud")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fake, err := newFakeCloud(dir)
	if err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	c := &cloudEnv{fake: fake, rancher: newRancherEKSFront(e.rancher), dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	t.Cleanup(func() { c.cleanUp(t) })
	return c
}

func (c *cloudEnv) config() string {
	return fmt.Sprintf(`log: {level: debug, format: json}
server:
  listen: %s
  tokens: [{file: token}]
  shutdownTimeout: 2s
# one cluster listed by EKS and by Rancher: the EKS listing is served
inventory: {interval: %s, timeout: 5s, prefer: cloud}
departure: {afterListings: %d, gracePeriod: %s, maxFraction: 1}
sources:
  - name: aws
    provider: eks
    eks:
      regions: [%s]
      accounts: [{id: "%s", argocdRoleARN: "arn:aws:iam::%s:role/argocd-deployer"}]
      endpoint: %s
      taggingEndpoint: %s
      # describe at every listing: an ACTIVE cluster's change of status
      # shows at once (clusters not ACTIVE are described every listing anyway)
      describeTTL: 100ms
  - name: azure
    provider: aks
    aks:
      clientID: %s
      armEndpoint: %s
      auth: {loginMethod: workloadidentity, clientID: %s}
  # the suite's fake Rancher, its EKS clusters named as the EKS source
  # names them: Rancher's "payments" is eks-payments
  - name: rancher
    provider: rancher
    rancher:
      url: %s
      token: {file: rancher-token}
      requestTimeout: 2s
      namePrefix: eks-
secrets:
  enabled: true
  namespace: %s
  ownerID: %s
  policy: sync
  resync: 2s
  prune: {afterListings: 2, gracePeriod: 3s}
  leaderElection: {leaseName: %s, leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 500ms}
  kubeconfig: %s
applicationSetRefresh: {enabled: true, pluginConfigMap: %s, debounce: 500ms}
`, c.addr, cloudInterval, departureListings, departureGrace,
		cloudAWSRegion, cloudAWSAccount, cloudAWSAccount, c.fake.aws.URL, c.fake.aws.URL,
		cloudClientID, c.fake.arm.URL, cloudClientID, c.rancher.URL(),
		argoNS, cloudOwnerID, cloudLease, e.kubeconfig, cloudConfigMap)
}

// start runs the deployment with static AWS credentials and an App Service
// managed identity in its environment, trusting the ARM fake's certificate.
func (c *cloudEnv) start(t *testing.T) {
	t.Helper()
	empty := filepath.Join(c.dir, "aws-empty")
	files := map[string]string{"token": cloudToken + "\n", "config.yaml": c.config(), "aws-empty": "", "rancher-token": rancherTok + "\n"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(c.dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{
		"KUBECONFIG=" + e.kubeconfig,
		"AWS_ACCESS_KEY_ID=" + cloudAWSKeyID, "AWS_SECRET_ACCESS_KEY=" + cloudAWSSecret, "AWS_SESSION_TOKEN=",
		"AWS_REGION=" + cloudAWSRegion, "AWS_PROFILE=", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + empty, "AWS_SHARED_CREDENTIALS_FILE=" + empty,
		"AWS_ROLE_ARN=", "AWS_WEB_IDENTITY_TOKEN_FILE=", "AWS_CONTAINER_CREDENTIALS_FULL_URI=", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=",
		"SSL_CERT_FILE=" + c.fake.caFile, "SSL_CERT_DIR=" + c.dir,
		"IDENTITY_ENDPOINT=" + c.fake.arm.URL + "/msi/token", "IDENTITY_HEADER=" + cloudMIHeader,
		"AZURE_CLIENT_ID=", "AZURE_TENANT_ID=", "AZURE_CLIENT_SECRET=", "AZURE_FEDERATED_TOKEN_FILE=", "AZURE_AUTHORITY_HOST=",
		"MSI_ENDPOINT=", "IMDS_ENDPOINT=", "IDENTITY_SERVER_THUMBPRINT=",
	}
	p, err := startProc("argocd-cluster-discovery (cloud)", filepath.Join(c.dir, "argocd-cluster-discovery.log"), env,
		e.binary, "serve", "--config", filepath.Join(c.dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c.svc = p
	if err := waitHTTP(p, "http://"+c.addr+"/healthz", 60*time.Second); err != nil {
		t.Fatalf("the cloud deployment did not start: %v\n%s", err, p.tail(40))
	}
}

// apply creates the token Secret, the plugin ConfigMap and the
// ApplicationSet of cloud-lifecycle.yaml.
func (c *cloudEnv) apply(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "manifests", "cloud-lifecycle.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.NewReplacer("${CLOUD_PLUGIN_URL}", "http://"+c.addr, "${CLOUD_TOKEN}", cloudToken).Replace(string(raw))
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvr, ok := gvrByKind[obj.GetKind()]
		if !ok {
			t.Fatalf("kind %s not known to the suite", obj.GetKind())
		}
		if _, err := e.dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// cleanUp stops the deployment, deletes the ApplicationSet, then its
// Applications (no garbage collector runs on envtest), the deployment's
// Secrets, its plugin wiring and its Leases.
func (c *cloudEnv) cleanUp(t *testing.T) {
	ctx := context.Background()
	if c.svc != nil {
		c.svc.stop()
		if c.svc.err != nil {
			t.Errorf("the cloud deployment did not stop cleanly on SIGTERM: %v\n%s", c.svc.err, c.svc.tail(20))
		}
	}
	defer c.fake.Close()
	defer c.rancher.Close()
	var errs []error
	appSets := e.dyn.Resource(gvrApplicationSets).Namespace(argoNS)
	if err := appSets.Delete(ctx, cloudAppSet, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	waitGone := func(what string, get func() error, unblock func()) {
		deadline := time.Now().Add(15 * time.Second)
		for {
			err := get()
			if apierrors.IsNotFound(err) {
				return
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("%s not deleted: %v", what, err))
				return
			}
			if unblock != nil && time.Until(deadline) < 10*time.Second {
				unblock()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitGone("ApplicationSet "+cloudAppSet, func() error {
		_, err := appSets.Get(ctx, cloudAppSet, metav1.GetOptions{})
		return err
	}, func() {
		_, _ = appSets.Patch(ctx, cloudAppSet, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	apps := e.dyn.Resource(gvrApplications).Namespace(argoNS)
	if err := apps.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "e2e.appset=" + cloudAppSet}); err != nil {
		errs = append(errs, err)
	}
	waitGone("the Applications of "+cloudAppSet, func() error {
		l, err := apps.List(ctx, metav1.ListOptions{LabelSelector: "e2e.appset=" + cloudAppSet})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return apierrors.NewNotFound(gvrApplications.GroupResource(), "")
		}
		return fmt.Errorf("%d left", len(l.Items))
	}, func() {
		l, _ := apps.List(ctx, metav1.ListOptions{LabelSelector: "e2e.appset=" + cloudAppSet})
		if l == nil {
			return
		}
		for _, a := range l.Items {
			if len(a.GetFinalizers()) > 0 {
				_, _ = apps.Patch(ctx, a.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			}
		}
	})
	secrets := e.kube.CoreV1().Secrets(argoNS)
	if err := secrets.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: clustersecret.LabelOwner + "=" + cloudOwnerID}); err != nil {
		errs = append(errs, err)
	}
	for _, del := range []error{
		secrets.Delete(ctx, "acd-e2e-cloud-token", metav1.DeleteOptions{}),
		e.kube.CoreV1().ConfigMaps(argoNS).Delete(ctx, cloudConfigMap, metav1.DeleteOptions{}),
		e.kube.CoordinationV1().Leases(argoNS).Delete(ctx, cloudLease, metav1.DeleteOptions{}),
		e.kube.CoordinationV1().Leases(argoNS).Delete(ctx, cloudLease+"-appset-refresh", metav1.DeleteOptions{}),
	} {
		if del != nil && !apierrors.IsNotFound(del) {
			errs = append(errs, del)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Errorf("clean-up: %v", err)
	}
}

// logs is the tail of the deployment's log and of the controller's.
func (c *cloudEnv) logs() string {
	var parts []string
	if c.svc != nil {
		parts = append(parts, c.svc.tail(40))
	}
	if e.controller != nil {
		parts = append(parts, e.controller.tail(15))
	}
	return strings.Join(parts, "\n")
}

func (c *cloudEnv) eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	poll(t, timeout, what, f, c.logs)
}

// secrets returns the deployment's Secrets by the cluster they are for.
func (c *cloudEnv) secrets() (map[string]corev1.Secret, error) {
	l, err := e.kube.CoreV1().Secrets(argoNS).List(context.Background(), metav1.ListOptions{LabelSelector: clustersecret.LabelOwner + "=" + cloudOwnerID})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Secret{}
	for _, s := range l.Items {
		out[s.Annotations[clustersecret.AnnotationCluster]] = s
	}
	return out, nil
}

// secretsAre checks that the deployment has exactly one Secret per cluster
// of servers, with that server, phase ready and the state given.
func (c *cloudEnv) secretsAre(servers, states map[string]string) error {
	secrets, err := c.secrets()
	if err != nil {
		return err
	}
	if !slices.Equal(names(secrets), names(servers)) {
		return fmt.Errorf("Secrets for %v, want %v", names(secrets), names(servers))
	}
	for name, server := range servers {
		s := secrets[name]
		if got := string(s.Data["server"]); got != server {
			return fmt.Errorf("Secret %s: server %q, want %q", s.Name, got, server)
		}
		if p, st := s.Labels[clustersecret.LabelPhase], s.Labels[clustersecret.LabelState]; p != "ready" || st != states[name] {
			return fmt.Errorf("Secret %s: phase %q state %q, want ready %q", s.Name, p, st, states[name])
		}
	}
	return nil
}

// appsAre checks that the ApplicationSet has one Application per cluster of
// servers, cloud-<cluster>, in project default, targeting that server,
// which is its Secret's.
func (c *cloudEnv) appsAre(servers map[string]string) error {
	apps, err := e.apps(cloudAppSet)
	if err != nil {
		return err
	}
	want := map[string]string{}
	for name, server := range servers {
		want["cloud-"+name] = server
	}
	if !slices.Equal(names(apps), names(want)) {
		return fmt.Errorf("Applications %v, want %v", names(apps), names(want))
	}
	secrets, err := c.secrets()
	if err != nil {
		return err
	}
	for name, server := range servers {
		a := apps["cloud-"+name]
		if a.Server != server || a.Project != "default" {
			return fmt.Errorf("Application %s: server %q project %q, want %q default", a.Name, a.Server, a.Project, server)
		}
		if s := string(secrets[name].Data["server"]); s != server {
			return fmt.Errorf("Application %s: its cluster's Secret has server %q", a.Name, s)
		}
	}
	return nil
}

// cloudParam is what the test reads of one parameter set of the answer.
type cloudParam struct {
	Name, Server, Source, Provider, Tenant, Phase, State string
}

// params asks the deployment what Argo CD asks it, by cluster name.
func (c *cloudEnv) params() (map[string]cloudParam, error) {
	body := `{"applicationSetName":"` + cloudAppSet + `","input":{"parameters":{"tenant":"` + cloudTenant + `"}}}`
	var ps []cloudParam
	if err := getParams(c.addr, cloudToken, []byte(body), &ps); err != nil {
		return nil, err
	}
	out := map[string]cloudParam{}
	for _, p := range ps {
		out[p.Name] = p
	}
	return out, nil
}

// shows checks that the cluster is served with phase and state: in the
// plugin answer (with its server) and on its Secret's labels.
func (c *cloudEnv) shows(name, server, phase, state string) error {
	ps, err := c.params()
	if err != nil {
		return err
	}
	if p, ok := ps[name]; !ok || p.Phase != phase || p.State != state || p.Server != server {
		return fmt.Errorf("plugin answer for %s: %+v (listed %v), want phase %q state %q server %s", name, p, ok, phase, state, server)
	}
	secrets, err := c.secrets()
	if err != nil {
		return err
	}
	s := secrets[name]
	if s.Labels[clustersecret.LabelPhase] != phase || s.Labels[clustersecret.LabelState] != state {
		return fmt.Errorf("Secret %s of %s: phase %q state %q, want %q %q", s.Name, name, s.Labels[clustersecret.LabelPhase], s.Labels[clustersecret.LabelState], phase, state)
	}
	return nil
}

// statusDoc reads the deployment's /status.
func (c *cloudEnv) statusDoc() (*statusDoc, error) {
	resp, err := http.Get("http://" + c.addr + "/status")
	if err != nil {
		return nil, err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/status: %s", resp.Status)
	}
	var doc statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode /status: %w", err)
	}
	return &doc, nil
}

// duplicate checks whether /status lists the rancher source's listing of
// name as a duplicate of the aws listing of name, by CloudID (want), and
// that it reports no name conflict on name either way.
func (c *cloudEnv) duplicate(name string, want bool) error {
	doc, err := c.statusDoc()
	if err != nil {
		return err
	}
	for _, k := range doc.Conflicts {
		if k.Name == name {
			return fmt.Errorf("/status reports a name conflict on %s: %+v", name, k)
		}
	}
	found := false
	for _, d := range doc.Duplicates {
		if d.Name == name && d.Source == "rancher" {
			if d.KeptName != name || d.KeptSource != "aws" || d.Reason != "cloudID" {
				return fmt.Errorf("/status duplicate %+v, want kept aws %s by cloudID", d, name)
			}
			found = true
		}
	}
	if found != want {
		return fmt.Errorf("/status duplicates %+v: rancher %s listed %v, want %v", doc.Duplicates, name, found, want)
	}
	return nil
}

// servedFrom checks that the plugin answer serves name once, from source
// at server.
func (c *cloudEnv) servedFrom(name, source, server string) error {
	ps, err := c.params()
	if err != nil {
		return err
	}
	if p, ok := ps[name]; !ok || p.Source != source || p.Server != server {
		return fmt.Errorf("plugin answer for %s: %+v (listed %v), want source %s server %s", name, p, ok, source, server)
	}
	return nil
}

// noSecretOf checks that the deployment has no Secret for a cluster of
// source.
func (c *cloudEnv) noSecretOf(source string) error {
	l, err := e.kube.CoreV1().Secrets(argoNS).List(context.Background(), metav1.ListOptions{LabelSelector: clustersecret.LabelOwner + "=" + cloudOwnerID})
	if err != nil {
		return err
	}
	for _, s := range l.Items {
		if s.Labels[clustersecret.LabelSource] == source {
			return fmt.Errorf("Secret %s for %s of source %s (server %s)", s.Name, s.Annotations[clustersecret.AnnotationCluster], source, s.Data["server"])
		}
	}
	return nil
}

// servedOnce checks that name is served once, from the EKS source at
// server: in the plugin answer and by the only Secret for name, none being
// for a Rancher cluster.
func (c *cloudEnv) servedOnce(name, server string) error {
	if err := errors.Join(c.servedFrom(name, "aws", server), c.noSecretOf("rancher")); err != nil {
		return err
	}
	l, err := e.kube.CoreV1().Secrets(argoNS).List(context.Background(), metav1.ListOptions{LabelSelector: clustersecret.LabelOwner + "=" + cloudOwnerID})
	if err != nil {
		return err
	}
	var of []string
	for _, s := range l.Items {
		if s.Annotations[clustersecret.AnnotationCluster] == name {
			of = append(of, s.Name)
			if s.Labels[clustersecret.LabelSource] != "aws" || string(s.Data["server"]) != server {
				return fmt.Errorf("Secret %s of %s: source %q server %q, want aws %s", s.Name, name, s.Labels[clustersecret.LabelSource], s.Data["server"], server)
			}
		}
	}
	if len(of) != 1 {
		return fmt.Errorf("Secrets for %s: %v, want one", name, of)
	}
	return nil
}

// cloudCounter counts the listings of a source, n0 when a change was made.
type cloudCounter struct {
	name string
	n    func() int
	n0   int
}

// staysWith is stays over the listings of the sources counted: check holds
// throughout (fatal at once), want once each counted three listings since
// the change, until each counted more than listings.
func (c *cloudEnv) staysWith(t *testing.T, counters []cloudCounter, listings int, check, want func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(listings+5) * 3 * cloudInterval)
	wanted := false
	progress := func() (string, bool, bool) {
		var parts []string
		three, done := true, true
		for _, k := range counters {
			d := k.n() - k.n0
			parts = append(parts, fmt.Sprintf("%d %s", d, k.name))
			three = three && d >= 3
			done = done && d > listings
		}
		return strings.Join(parts, " and ") + " listing(s)", three, done
	}
	for {
		at, three, done := progress()
		if err := check(); err != nil {
			t.Fatalf("after %s: %v\n%s", at, err, c.logs())
		}
		if three {
			if err := want(); err != nil {
				t.Fatalf("after %s: %v\n%s", at, err, c.logs())
			}
			wanted = true
		}
		if wanted && done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s by %s, want %d each\n%s", at, deadline.Format(time.TimeOnly), listings+1, c.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cloudSteady is a cluster's Application and Secret as they must stay
// while it has not left.
type cloudSteady struct {
	name   string
	app    app
	secret corev1.Secret
}

func (c *cloudEnv) steadyOf(t *testing.T, name string) *cloudSteady {
	t.Helper()
	apps, err := e.apps(cloudAppSet)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := c.secrets()
	if err != nil {
		t.Fatal(err)
	}
	a, ok := apps["cloud-"+name]
	s, ok2 := secrets[name]
	if !ok || !ok2 {
		t.Fatalf("%s: Application %v, Secret %v", name, ok, ok2)
	}
	return &cloudSteady{name: name, app: a, secret: s}
}

// check returns why the cluster's Application or Secret is not what it
// was: the same objects (UIDs), destination, data, annotations, and labels
// but for the phase and state.
func (st *cloudSteady) check() error {
	apps, err := e.apps(cloudAppSet)
	if err != nil {
		return err
	}
	switch a, ok := apps[st.app.Name]; {
	case !ok:
		return fmt.Errorf("Application %s was deleted", st.app.Name)
	case a != st.app:
		return fmt.Errorf("Application %s changed: %+v, was %+v", st.app.Name, a, st.app)
	}
	s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), st.secret.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("Secret %s of %s: %w", st.secret.Name, st.name, err)
	}
	return sameSecret(s, &st.secret)
}

// stays checks, through listings e0+1 .. e0+listings of EKS and a0+1 ..
// a0+listings of AKS, that check holds throughout (fatal at once), and
// that want holds once two listings of each source completed since the
// change (the Secret's labels follow the inventory asynchronously).
func (c *cloudEnv) stays(t *testing.T, e0, a0, listings int, check, want func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(listings+5) * 3 * cloudInterval)
	wanted := false
	for {
		ne, na := c.fake.EKSListings(), c.fake.AKSListings()
		if err := check(); err != nil {
			t.Fatalf("after %d EKS and %d AKS listing(s): %v\n%s", ne-e0, na-a0, err, c.logs())
		}
		if ne >= e0+3 && na >= a0+3 {
			if err := want(); err != nil {
				t.Fatalf("after %d EKS and %d AKS listing(s): %v\n%s", ne-e0, na-a0, err, c.logs())
			}
			wanted = true
		}
		if wanted && ne > e0+listings && na > a0+listings {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d EKS and %d AKS listings by %s, want %d each\n%s", ne-e0, na-a0, deadline.Format(time.TimeOnly), listings+1, c.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
