package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

const examplesDir = "examples"

func readExample(t *testing.T, name string) manifests {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examplesDir, name))
	require.NoError(t, err)
	return decode(t, string(b))
}

// withNamespace is a copy of d in namespace ns.
func withNamespace(t *testing.T, d doc, ns string) doc {
	t.Helper()
	u := d.DeepCopy()
	u.SetNamespace(ns)
	raw, err := u.MarshalJSON()
	require.NoError(t, err)
	return doc{Unstructured: u, raw: raw}
}

// exampleManifests are every Kubernetes object of examples/ (config.yaml is
// the service's configuration file, not a manifest).
func exampleManifests(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	require.NoError(t, err)
	var all manifests
	for _, f := range files {
		if filepath.Base(f) == "config.yaml" {
			continue
		}
		ms := readExample(t, filepath.Base(f))
		require.NotEmpty(t, ms, f)
		all = append(all, ms...)
	}
	return all
}

func find(t *testing.T, ms manifests, kind, name string) *unstructured.Unstructured {
	t.Helper()
	d, ok := ms.find(kind, "argocd", name)
	require.True(t, ok, "%s argocd/%s in examples/", kind, name)
	return d.Unstructured
}

func str(t *testing.T, u *unstructured.Unstructured, path ...string) string {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	require.NoError(t, err)
	require.True(t, found, "%s: %s", u.GetName(), strings.Join(path, "."))
	s, ok := v.(string)
	require.True(t, ok, "%s: %s is a string", u.GetName(), strings.Join(path, "."))
	return s
}

// TestExamplesAcceptedByArgoCDCRDs applies every example to the real API
// server with Argo CD's CRDs installed, with strict field validation.
func TestExamplesAcceptedByArgoCDCRDs(t *testing.T) {
	ms := exampleManifests(t)
	kinds := map[string]int{}
	for _, m := range ms {
		kinds[m.GetKind()]++
		assert.Equal(t, "argocd", m.GetNamespace(), "%s %s lives in Argo CD's namespace", m.GetKind(), m.GetName())
	}
	assert.Equal(t, map[string]int{"ApplicationSet": 3, "AppProject": 2, "ConfigMap": 1, "Secret": 1}, kinds)
	ensureNamespace(t, "argocd")
	warns := applyObjects(t, ms)
	assert.Empty(t, warns)
}

// TestExamplePluginApplicationSets: the per-tenant and matrix examples call
// the chart's plugin ConfigMap with a tenant filter, with Go templates, and
// choose an applicationsSync policy that is explained.
func TestExamplePluginApplicationSets(t *testing.T) {
	ms := exampleManifests(t)
	// the chart installed as README says (release argocd-cluster-discovery) names its plugin ConfigMap:
	plugin := release
	def := caseNamed(t, "default")
	_, ok := render(t, def).find("ConfigMap", def.argocdNS, plugin)
	require.True(t, ok)

	perTenant := find(t, ms, "ApplicationSet", "acme-guestbook")
	assert.True(t, perTenant.Object["spec"].(map[string]any)["goTemplate"].(bool))
	gens, _, _ := unstructured.NestedSlice(perTenant.Object, "spec", "generators")
	require.Len(t, gens, 1)
	g := &unstructured.Unstructured{Object: gens[0].(map[string]any)}
	assert.Equal(t, plugin, str(t, g, "plugin", "configMapRef", "name"))
	assert.Equal(t, "acme", str(t, g, "plugin", "input", "parameters", "tenant"))
	assert.Equal(t, "create-update", str(t, perTenant, "spec", "syncPolicy", "applicationsSync"))
	assert.Equal(t, "acme", str(t, perTenant, "spec", "template", "spec", "project"))
	assert.Equal(t, "{{ .server }}", str(t, perTenant, "spec", "template", "spec", "destination", "server"))
	b, err := os.ReadFile(filepath.Join(examplesDir, "applicationset-per-tenant.yaml"))
	require.NoError(t, err)
	for _, policy := range []string{"sync", "create-update", "create-only", "create-delete", "--enable-policy-override"} {
		assert.Contains(t, string(b), policy, "the comments explain applicationsSync")
	}

	matrix := find(t, ms, "ApplicationSet", "acme-platform")
	gens, _, _ = unstructured.NestedSlice(matrix.Object, "spec", "generators")
	require.Len(t, gens, 1)
	children, _, _ := unstructured.NestedSlice(gens[0].(map[string]any), "matrix", "generators")
	require.Len(t, children, 2)
	p := &unstructured.Unstructured{Object: children[0].(map[string]any)}
	assert.Equal(t, plugin, str(t, p, "plugin", "configMapRef", "name"))
	assert.Equal(t, "acme", str(t, p, "plugin", "input", "parameters", "tenant"))
	assert.Contains(t, children[1], "list")
}

// TestExampleClusterGeneratorSelectsOurSecrets builds the Secrets the
// reconciler writes and checks that the cluster generator's selector picks
// globex's production clusters and nothing else.
func TestExampleClusterGeneratorSelectsOurSecrets(t *testing.T) {
	as := find(t, exampleManifests(t), "ApplicationSet", "globex-monitoring")
	gens, _, _ := unstructured.NestedSlice(as.Object, "spec", "generators")
	require.Len(t, gens, 1)
	raw, found, err := unstructured.NestedMap(gens[0].(map[string]any), "clusters", "selector")
	require.NoError(t, err)
	require.True(t, found)
	var ls metav1.LabelSelector
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls))
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	require.NoError(t, err)

	secret := func(tenant, env string) *corev1.Secret {
		c := &sources.Cluster{Source: "fleet", Provider: sources.ProviderStatic, Name: tenant + "-" + env,
			Server: "https://" + tenant + "-" + env + ".example.com", Tenant: tenant, Labels: map[string]string{"env": env},
			Auth: sources.Auth{AWS: &sources.AWSAuth{ClusterName: tenant + "-" + env}}}
		d, err := clustersecret.Build(c, &clustersecret.Options{Namespace: "argocd", OwnerID: "prod-fleet", Prefix: "cluster"}, nil)
		require.NoError(t, err)
		return d.Secret
	}
	assert.True(t, sel.Matches(labels.Set(secret("globex", "prod").Labels)))
	assert.True(t, sel.Matches(labels.Set(secret("globex", "staging").Labels)))
	assert.False(t, sel.Matches(labels.Set(secret("globex", "dev").Labels)))
	assert.False(t, sel.Matches(labels.Set(secret("acme", "prod").Labels)), "another tenant's cluster")
	foreign := secret("globex", "prod").DeepCopy()
	delete(foreign.Labels, clustersecret.LabelManagedBy)
	assert.False(t, sel.Matches(labels.Set(foreign.Labels)), "a cluster Secret we did not write")
}

// TestExampleProjects: every project an example ApplicationSet deploys into
// exists, scoped to its own clusters.
func TestExampleProjects(t *testing.T) {
	ms := exampleManifests(t)
	projects := map[string]*unstructured.Unstructured{}
	for _, p := range ms.all("AppProject") {
		projects[p.GetName()] = p.Unstructured
	}
	for _, as := range ms.all("ApplicationSet") {
		name := str(t, as.Unstructured, "spec", "template", "spec", "project")
		p, ok := projects[name]
		require.True(t, ok, "ApplicationSet %s deploys into AppProject %s, which examples/ must define", as.GetName(), name)
		scoped, _, _ := unstructured.NestedBool(p.Object, "spec", "permitOnlyProjectScopedClusters")
		assert.True(t, scoped, "AppProject %s admits only clusters whose Secret names it", name)
		dests, _, _ := unstructured.NestedSlice(p.Object, "spec", "destinations")
		ns := str(t, as.Unstructured, "spec", "template", "spec", "destination", "namespace")
		ns = regexp.MustCompile(`\{\{[^}]*\}\}`).ReplaceAllString(ns, "x")
		var allowed bool
		for _, d := range dests {
			pattern := d.(map[string]any)["namespace"].(string)
			m, _ := filepath.Match(pattern, ns)
			allowed = allowed || m
		}
		assert.True(t, allowed, "AppProject %s allows namespace %s of ApplicationSet %s", name, ns, as.GetName())
	}
	// the static example's tenant rules name these projects
	b, err := os.ReadFile(filepath.Join(chartDir, "examples", "values-static.yaml"))
	require.NoError(t, err)
	for name := range projects {
		assert.Contains(t, string(b), "project: "+name)
	}
}

// TestExamplePlainWiring: the plain-manifest wiring (without Helm) is
// consistent, and the example configuration file loads.
func TestExamplePlainWiring(t *testing.T) {
	ms := exampleManifests(t)
	cm := into[corev1.ConfigMap](t, ms.one(t, "ConfigMap"))
	assert.Equal(t, "argocd-cluster-discovery", cm.Name)
	secret := ms.one(t, "Secret")
	assert.Equal(t, "argocd", secret.GetLabels()["app.kubernetes.io/part-of"])
	assert.Equal(t, "$"+secret.GetName()+":token", cm.Data["token"])
	assert.Equal(t, "http://argocd-cluster-discovery.argocd.svc.cluster.local:8080", cm.Data["baseUrl"])

	b, err := os.ReadFile(filepath.Join(examplesDir, "config.yaml"))
	require.NoError(t, err)
	cfg, err := config.Parse(b, examplesDir)
	require.NoError(t, err)
	assert.Equal(t, "/var/run/secrets/argocd-cluster-discovery/token/token", cfg.Server.Tokens[0].File, "the chart's token path")
}

// TestQuickstartMatchesExampleApplicationSet: the README's first install
// (values-quickstart.yaml, then the per-tenant example) generates an
// Application: the quickstart cluster passes the example's filter and is
// scoped to the project the example deploys into.
func TestQuickstartMatchesExampleApplicationSet(t *testing.T) {
	_, cm := configOf(t, render(t, caseNamed(t, "quickstart")), caseNamed(t, "quickstart"))
	var file struct{ Clusters []static.Cluster }
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data["clusters.yaml"]), &file))
	require.Len(t, file.Clusters, 1)
	cl := file.Clusters[0]
	assert.Equal(t, "https://kubernetes.default.svc", cl.Server, "the cluster Argo CD runs in")

	as := find(t, exampleManifests(t), "ApplicationSet", "acme-guestbook")
	gens, _, _ := unstructured.NestedSlice(as.Object, "spec", "generators")
	g := &unstructured.Unstructured{Object: gens[0].(map[string]any)}
	assert.Equal(t, str(t, g, "plugin", "input", "parameters", "tenant"), cl.Tenant)
	sel, err := labels.Parse(str(t, g, "plugin", "input", "parameters", "labelSelector"))
	require.NoError(t, err)
	assert.True(t, sel.Matches(labels.Set(cl.Labels)))
	assert.Equal(t, str(t, as, "spec", "template", "spec", "project"), cl.Project)
}
