package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

var (
	applyMu sync.Mutex
	applied = map[string]error{}
	clients struct {
		once   sync.Once
		kube   kubernetes.Interface
		dyn    dynamic.Interface
		mapper *restmapper.DeferredDiscoveryRESTMapper
	}
)

func kube(t *testing.T) kubernetes.Interface {
	t.Helper()
	initClients(t)
	return clients.kube
}

func initClients(t *testing.T) {
	t.Helper()
	clients.once.Do(func() {
		cfg := rest.CopyConfig(restConfig)
		cfg.QPS, cfg.Burst = 200, 400
		clients.kube = kubernetes.NewForConfigOrDie(cfg)
		clients.dyn = dynamic.NewForConfigOrDie(cfg)
		clients.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	})
}

// ensureNamespace creates a namespace where the restricted Pod Security
// profile is enforced and warned about.
func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}}
	_, err := kube(t).CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// warnings collects the API server's warnings (deprecations, Pod Security,
// unknown fields) for one client.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

// applyObjects server-side applies every object with strict field
// validation: an unknown or misspelt field is an error, not dropped.
func applyObjects(t *testing.T, ms manifests) []string {
	t.Helper()
	initClients(t)
	w := &warnings{}
	cfg := rest.CopyConfig(restConfig)
	cfg.WarningHandler = w
	dyn := dynamic.NewForConfigOrDie(cfg)
	force := true
	for _, m := range ms {
		gvk := m.GroupVersionKind()
		mapping, err := clients.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s is served by the API server", gvk)
		_, err = dyn.Resource(mapping.Resource).Namespace(m.GetNamespace()).Patch(context.Background(), m.GetName(),
			types.ApplyPatchType, m.raw, metav1.PatchOptions{FieldManager: "deploy-test", FieldValidation: "Strict", Force: &force})
		require.NoError(t, err, "apply %s %s/%s", gvk.Kind, m.GetNamespace(), m.GetName())
	}
	return w.msgs
}

// ensureApplied renders and applies a case once per run.
func ensureApplied(t *testing.T, c chartCase) manifests {
	t.Helper()
	ms := render(t, c)
	applyMu.Lock()
	defer applyMu.Unlock()
	if err, done := applied[c.name]; done {
		require.NoError(t, err, "applying case %s failed earlier", c.name)
		return ms
	}
	applied[c.name] = errors.New("failed")
	for _, ns := range []string{c.ns, c.argocdNS} {
		ensureNamespace(t, ns)
	}
	warns := applyObjects(t, ms)
	assert.Empty(t, warns, "the API server warned")
	waitAuthorized(t, c, ms)
	applied[c.name] = nil
	return ms
}

func TestManifestsAcceptedByAPIServer(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := ensureApplied(t, c)
			// read back: every object exists where it was rendered
			for _, m := range ms {
				gvk := m.GroupVersionKind()
				mapping, err := clients.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				require.NoError(t, err)
				_, err = clients.dyn.Resource(mapping.Resource).Namespace(m.GetNamespace()).Get(context.Background(), m.GetName(), metav1.GetOptions{})
				assert.NoError(t, err)
			}
			// the pod the Deployment would create is admitted under the enforced restricted profile
			dep := into[appsv1.Deployment](t, ms.one(t, "Deployment"))
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "from-template", Namespace: c.ns, Labels: dep.Spec.Template.Labels},
				Spec: dep.Spec.Template.Spec}
			_, err := kube(t).CoreV1().Pods(c.ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			require.NoError(t, err, "Pod Security admission (restricted) refused the pod template")
		})
	}
}

// TestStrictValidationIsOn guards the test above: a misspelt field is
// refused, so acceptance means something.
func TestStrictValidationIsOn(t *testing.T) {
	ensureNamespace(t, "strict")
	ms := decode(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: typo, namespace: strict}
dataa: {a: b}
`)
	initClients(t)
	mapping, err := clients.mapper.RESTMapping(ms[0].GroupVersionKind().GroupKind(), "v1")
	require.NoError(t, err)
	_, err = clients.dyn.Resource(mapping.Resource).Namespace("strict").Patch(context.Background(), "typo", types.ApplyPatchType, ms[0].raw,
		metav1.PatchOptions{FieldManager: "deploy-test", FieldValidation: "Strict"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dataa")

	// and the restricted profile refuses a root pod
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: "strict"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	_, err = kube(t).CoreV1().Pods("strict").Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "restricted")
}

// TestHelmInstallUpgradeKeepsToken installs the chart with helm into the
// control plane (Argo CD in another namespace), checks NOTES and the two
// token copies, and upgrades: the generated token must not change.
func TestHelmInstallUpgradeKeepsToken(t *testing.T) {
	const ns, argocdNS = "install-discovery", "install-argocd"
	ensureNamespace(t, ns)
	ensureNamespace(t, argocdNS)
	ctx := context.Background()
	// no kubelet runs the validate hook's Job here (helm would wait for it):
	// TestValidateHook runs its command on its rendered configuration instead
	out, err := helm("install", release, chartDir, "--namespace", ns, "--set", "argocd.namespace="+argocdNS, "--set", "validation.enabled=false")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = helm("uninstall", release, "--namespace", ns) })

	// NOTES: how to reference the plugin, and how to check it
	_, notes, _ := strings.Cut(out, "NOTES:")
	t.Logf("NOTES:%s", notes)
	for _, s := range []string{"configMapRef:", "name: " + release, "tenant: acme", "plugin ConfigMap  " + release,
		"namespace: " + argocdNS, "'{{ .server }}'", "kubectl -n " + ns + " rollout status deployment/" + release,
		"get secret " + release + "-token", "/api/v1/getparams.execute", "argocd-cluster-discovery.io/owner=" + ns + "." + release} {
		assert.Contains(t, out, s)
	}

	token := func() (string, string) {
		a, err := kube(t).CoreV1().Secrets(argocdNS).Get(ctx, release+"-token", metav1.GetOptions{})
		require.NoError(t, err)
		b, err := kube(t).CoreV1().Secrets(ns).Get(ctx, release+"-token", metav1.GetOptions{})
		require.NoError(t, err)
		return string(a.Data["token"]), string(b.Data["token"])
	}
	first, copy1 := token()
	assert.Len(t, first, 48)
	assert.Equal(t, first, copy1)

	checksum := func() string {
		d, err := kube(t).AppsV1().Deployments(ns).Get(ctx, release, metav1.GetOptions{})
		require.NoError(t, err)
		return d.Spec.Template.Annotations["checksum/config"]
	}
	before := checksum()
	_, err = helm("upgrade", release, chartDir, "--namespace", ns, "--reuse-values", "--set", "config.log.level=debug")
	require.NoError(t, err)
	second, copy2 := token()
	assert.Equal(t, first, second, "the generated token survives an upgrade (lookup)")
	assert.Equal(t, first, copy2)
	assert.NotEqual(t, before, checksum(), "the configuration change rolls the pods")
}

// waitAuthorized waits until the API server's RBAC authorizer, which reads
// Roles and bindings from its own informers, has the RBAC of ms just
// applied: until the chart's ServiceAccount may make the first call of
// each Role a RoleBinding of ms grants it.
func waitAuthorized(t *testing.T, c chartCase, ms manifests) {
	t.Helper()
	client := kube(t)
	user, groups := serviceAccount(c)
	roles := map[string]*rbacv1.Role{}
	for _, m := range ms.all("Role") {
		var r rbacv1.Role
		require.NoError(t, json.Unmarshal(m.raw, &r))
		roles[r.Namespace+"/"+r.Name] = &r
	}
	for _, m := range ms.all("RoleBinding") {
		var b rbacv1.RoleBinding
		require.NoError(t, json.Unmarshal(m.raw, &b))
		r := roles[b.Namespace+"/"+b.RoleRef.Name]
		if b.RoleRef.Kind != "Role" || r == nil || len(r.Rules) == 0 || !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && "system:serviceaccount:"+s.Namespace+":"+s.Name == user
		}) {
			continue
		}
		rule := r.Rules[0]
		if len(rule.Verbs) == 0 || len(rule.APIGroups) == 0 || len(rule.Resources) == 0 {
			continue
		}
		attrs := &authorizationv1.ResourceAttributes{Namespace: b.Namespace, Verb: rule.Verbs[0], Group: rule.APIGroups[0], Resource: rule.Resources[0]}
		if len(rule.ResourceNames) > 0 {
			attrs.Name = rule.ResourceNames[0]
		}
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			ok, err := allowed(client, user, groups, attrs)
			if assert.NoError(ct, err) {
				assert.True(ct, ok, "%s %s in %s", attrs.Verb, attrs.Resource, attrs.Namespace)
			}
		}, 10*time.Second, 50*time.Millisecond, "the API server's authorizer has RoleBinding %s/%s", b.Namespace, b.Name)
	}
}
