package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
)

// cloudEnv is the second deployment: its fakes, directory, port and process.
type cloudEnv struct {
	fake    *fakeCloud
	front   *clusterFront    // the clusters' API servers
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
	front := newClusterFront(t, "*.gr7."+cloudAWSRegion+".eks.amazonaws.com", "*.hcp.westeurope.azmk8s.io")
	fake, err := newFakeCloud(dir, front.caPEM)
	if err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	c := &cloudEnv{fake: fake, front: front, rancher: newRancherEKSFront(e.rancher), dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", port)}
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
departure: {afterListings: %d, gracePeriod: %s, maxFraction: 1, heldListings: %d}
sources:
  - name: aws
    provider: eks
    eks:
      regions: [%s]
      accounts: [{id: "%s", argocdRoleARN: "%s"}]
      # a cluster's own role, from its argocd-role-arn tag
      rolePattern: ["arn:aws:iam::*:role/argocd-*"]
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
  # the tenant the clusters' tags and Rancher labels claim, admitted from
  # these sources only
  tenants:
    `+cloudTenant+`: {sources: [aws, azure, rancher]}
  resync: 2s
  prune: {afterListings: 2, gracePeriod: 3s}
  leaderElection: {leaseName: %s, leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 500ms}
  kubeconfig: %s
applicationSetRefresh: {enabled: true, pluginConfigMap: %s, debounce: 500ms}
`, c.addr, cloudInterval, departureListings, departureGrace, cloudHeldListings,
		cloudAWSRegion, cloudAWSAccount, cloudAccountRole, c.fake.aws.URL(), c.fake.aws.URL(),
		cloudClientID, c.fake.arm.URL(), cloudClientID, c.rancher.URL(),
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
	c.svc = serve(t, serviceRun{name: "argocd-cluster-discovery-cloud", dir: c.dir, config: filepath.Join(c.dir, "config.yaml"),
		env: c.serviceEnv(empty), healthz: c.addr}, func(p *proc) { c.svc = p })
}

// serviceEnv is what the deployment adds to the suite's environment:
// static AWS keys, an App Service managed identity, the ARM fake's CA;
// empty is an empty file.
func (c *cloudEnv) serviceEnv(empty string) []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + cloudAWSKeyID, "AWS_SECRET_ACCESS_KEY=" + cloudAWSSecret, "AWS_SESSION_TOKEN=",
		"AWS_REGION=" + cloudAWSRegion, "AWS_PROFILE=", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + empty, "AWS_SHARED_CREDENTIALS_FILE=" + empty,
		"AWS_ROLE_ARN=", "AWS_WEB_IDENTITY_TOKEN_FILE=", "AWS_CONTAINER_CREDENTIALS_FULL_URI=", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=",
		"SSL_CERT_FILE=" + c.fake.caFile, "SSL_CERT_DIR=" + c.dir,
		"IDENTITY_ENDPOINT=" + c.fake.arm.URL() + "/msi/token", "IDENTITY_HEADER=" + cloudMIHeader,
		"AZURE_CLIENT_ID=", "AZURE_TENANT_ID=", "AZURE_CLIENT_SECRET=", "AZURE_FEDERATED_TOKEN_FILE=", "AZURE_AUTHORITY_HOST=",
		"MSI_ENDPOINT=", "IMDS_ENDPOINT=", "IDENTITY_SERVER_THUMBPRINT=",
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
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
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
				errs = append(errs, fmt.Errorf("%s not deleted: %w", what, err))
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
