package deploy_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// chartCase is one set of values: the defaults or an example values file,
// installed in its own namespaces so that the cases never collide.
type chartCase struct {
	name     string
	values   string   // file in the chart's examples/, "" for the defaults
	ns       string   // release namespace
	argocdNS string   // Argo CD's namespace
	set      []string // further helm arguments (--set, --set-json), after the values file
}

var cases = []chartCase{
	{name: "default", ns: "default-argocd", argocdNS: "default-argocd"},
	{name: "static", values: "values-static.yaml", ns: "static-argocd", argocdNS: "static-argocd"},
	{name: "rancher", values: "values-rancher.yaml", ns: "rancher-discovery", argocdNS: "rancher-argocd"},
	{name: "eks", values: "values-eks.yaml", ns: "eks-argocd", argocdNS: "eks-argocd"},
	{name: "aks", values: "values-aks.yaml", ns: "aks-discovery", argocdNS: "aks-argocd"},
	{name: "aro", values: "values-aro.yaml", ns: "aro-argocd", argocdNS: "aro-argocd"},
	{name: "quickstart", values: "values-quickstart.yaml", ns: "quickstart-argocd", argocdNS: "quickstart-argocd"},
}

func caseNamed(t *testing.T, name string) chartCase {
	t.Helper()
	for _, c := range cases {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no case %s", name)
	return chartCase{}
}

func (c chartCase) valuesArgs() []string {
	// helm template cannot look up the cluster: a generated token is then
	// asked for explicitly (TestTokenWithoutLookup)
	args := []string{"--set", "argocd.token.generateWithoutLookup=true"}
	if c.values != "" {
		args = append(args, "-f", filepath.Join(chartDir, "examples", c.values))
	}
	if c.argocdNS != c.ns {
		args = append(args, "--set", "argocd.namespace="+c.argocdNS)
	}
	return append(args, c.set...)
}

// doc is one rendered object: unstructured, and its JSON for typed decoding.
type doc struct {
	*unstructured.Unstructured
	raw []byte
}

type manifests []doc

func (ms manifests) all(kind string) []doc {
	var out []doc
	for _, m := range ms {
		if m.GetKind() == kind {
			out = append(out, m)
		}
	}
	return out
}

// one returns the only object of kind, failing otherwise.
func (ms manifests) one(t *testing.T, kind string) doc {
	t.Helper()
	all := ms.all(kind)
	require.Len(t, all, 1, "exactly one %s", kind)
	return all[0]
}

func (ms manifests) find(kind, ns, name string) (doc, bool) {
	for _, m := range ms {
		if m.GetKind() == kind && m.GetNamespace() == ns && m.GetName() == name {
			return m, true
		}
	}
	return doc{}, false
}

func into[T any](t *testing.T, d doc) *T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(d.raw, &v))
	return &v
}

// decode splits a multi-document YAML stream into objects.
func decode(t *testing.T, stream string) manifests {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	var out manifests
	for {
		b, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		j, err := yaml.YAMLToJSON(b)
		require.NoError(t, err)
		if s := strings.TrimSpace(string(j)); s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(j), string(b))
		out = append(out, doc{Unstructured: u, raw: j})
	}
}

var (
	renderMu    sync.Mutex
	renderCache = map[string]manifests{}
)

// render runs helm template for the case, plus extra arguments.
func render(t *testing.T, c chartCase, extra ...string) manifests {
	t.Helper()
	key := c.name + "\x00" + strings.Join(extra, "\x00")
	renderMu.Lock()
	defer renderMu.Unlock()
	if ms, ok := renderCache[key]; ok {
		return ms
	}
	args := append([]string{"template", release, chartDir, "--namespace", c.ns}, c.valuesArgs()...)
	out, err := helm(append(args, extra...)...)
	require.NoError(t, err)
	ms := decode(t, out)
	require.NotEmpty(t, ms)
	renderCache[key] = ms
	return ms
}

func configOf(t *testing.T, ms manifests, c chartCase) (string, *corev1.ConfigMap) {
	t.Helper()
	d, ok := ms.find("ConfigMap", c.ns, release+"-config")
	require.True(t, ok, "the configuration ConfigMap %s/%s-config", c.ns, release)
	cm := into[corev1.ConfigMap](t, d)
	require.Contains(t, cm.Data, "config.yaml")
	return cm.Data["config.yaml"], cm
}

func port(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("no container port %s", name)
	return 0
}

func hasPort(c corev1.Container, name string) bool {
	return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
}

func mountOf(t *testing.T, c corev1.Container, name string) corev1.VolumeMount {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no volume mount %s", name)
	return corev1.VolumeMount{}
}

func volumeOf(t *testing.T, d *appsv1.Deployment, name string) corev1.Volume {
	t.Helper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %s", name)
	return corev1.Volume{}
}
