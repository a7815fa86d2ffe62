// Tests of the Helm chart in helm/argocd-cluster-discovery and of the example manifests in examples/: helm lint and
// helm template (the helm built into bin/testbin) for the default values and every provider's example values, the
// rendered manifests applied to a real kube-apiserver with strict field validation and the restricted Pod Security
// profile enforced, the Role checked both as written and as the API server authorizes it, and the cluster Secret
// reconciler run under exactly that Role.
//
// One control plane (kube-apiserver + etcd, Argo CD's CRDs and a minimal ServiceMonitor CRD) is shared by the
// package (TestMain). Missing binaries fail the run: run `make testbin`.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

const (
	chartDir = "helm/argocd-cluster-discovery"
	// release is the release name the README uses; its full name, and so the plugin ConfigMap's name, is
	// argocd-cluster-discovery.
	release = "argocd-cluster-discovery"
)

var (
	assets     string // bin/testbin
	helmBin    string
	helmHome   string // HELM_*_HOME and the kubeconfig helm uses
	restConfig *rest.Config
	kubeconfig string
)

// TestMain starts one control plane for the package. Missing binaries are a
// failure, never a skip.
func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	assets = os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets, _ = filepath.Abs(filepath.Join("..", "bin", "testbin"))
	}
	helmBin = filepath.Join(assets, "helm")
	var missing []string
	for _, f := range []string{"kube-apiserver", "etcd", "helm", "argocd-crds/application-crd.yaml",
		"argocd-crds/applicationset-crd.yaml", "argocd-crds/appproject-crd.yaml"} {
		if _, err := os.Stat(filepath.Join(assets, f)); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %s not found in %s: run `make testbin` (builds kube-apiserver, etcd, helm and Argo CD's CRDs offline)\n",
			strings.Join(missing, ", "), assets)
		return 1
	}
	var err error
	helmHome, err = os.MkdirTemp("", "deploy-test-helm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(helmHome)

	env := &envtest.Environment{
		BinaryAssetsDirectory:   assets,
		ControlPlaneStopTimeout: 30 * time.Second,
		CRDDirectoryPaths:       []string{filepath.Join(assets, "argocd-crds"), filepath.Join("testdata", "crds")},
		ErrorIfCRDPathMissing:   true,
	}
	restConfig, err = env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: start kube-apiserver and etcd: %v\n", err)
		return 1
	}
	// stop the control plane on SIGTERM/SIGINT too: an interrupted run must
	// not leave kube-apiserver and etcd behind
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		if _, ok := <-sig; ok {
			_ = env.Stop()
			os.Exit(1)
		}
	}()
	defer func() {
		signal.Stop(sig)
		close(sig)
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
		}
	}()
	user, err := env.AddUser(envtest.User{Name: "helm", Groups: []string{"system:masters"}}, nil)
	if err == nil {
		var kc []byte
		if kc, err = user.KubeConfig(); err == nil {
			kubeconfig = filepath.Join(helmHome, "kubeconfig")
			err = os.WriteFile(kubeconfig, kc, 0o600)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: kubeconfig for helm: %v\n", err)
		return 1
	}
	return m.Run()
}

// helm runs bin/testbin/helm with its own home directories and the test
// control plane as its cluster; it returns stdout and, on failure, an error
// holding stderr.
func helm(args ...string) (string, error) {
	cmd := exec.Command(helmBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + helmHome, "KUBECONFIG=" + kubeconfig,
		"HELM_CACHE_HOME=" + filepath.Join(helmHome, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME=" + filepath.Join(helmHome, "data")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// chartCase is one set of values: the defaults or an example values file,
// installed in its own namespaces so that the cases never collide.
type chartCase struct {
	name     string
	values   string // file in the chart's examples/, "" for the defaults
	ns       string // release namespace
	argocdNS string // Argo CD's namespace
}

var cases = []chartCase{
	{name: "default", ns: "default-argocd", argocdNS: "default-argocd"},
	{name: "static", values: "values-static.yaml", ns: "static-argocd", argocdNS: "static-argocd"},
	{name: "rancher", values: "values-rancher.yaml", ns: "rancher-discovery", argocdNS: "rancher-argocd"},
	{name: "eks", values: "values-eks.yaml", ns: "eks-argocd", argocdNS: "eks-argocd"},
	{name: "aks", values: "values-aks.yaml", ns: "aks-discovery", argocdNS: "aks-argocd"},
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
	var args []string
	if c.values != "" {
		args = append(args, "-f", filepath.Join(chartDir, "examples", c.values))
	}
	if c.argocdNS != c.ns {
		args = append(args, "--set", "argocd.namespace="+c.argocdNS)
	}
	return args
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

func TestEveryExampleValuesFileHasACase(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "examples", "values-*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var tested []string
	for _, c := range cases {
		if c.values != "" {
			tested = append(tested, c.values)
		}
	}
	for _, f := range files {
		assert.Contains(t, tested, filepath.Base(f), "add a case for %s", f)
	}
	for _, p := range []string{"static", "rancher", "eks", "aks"} {
		assert.Contains(t, tested, "values-"+p+".yaml", "an example for every provider")
	}
}

func TestHelmLintStrict(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := helm(append([]string{"lint", "--strict", chartDir, "--namespace", c.ns}, c.valuesArgs()...)...)
			require.NoError(t, err, out)
			assert.Contains(t, out, "1 chart(s) linted, 0 chart(s) failed")
			assert.NotContains(t, out, "[WARNING]")
			assert.NotContains(t, out, "[ERROR]")
		})
	}
}

func TestTemplateRendersEveryObject(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := render(t, c)
			want := map[string]int{"Deployment": 1, "Service": 1, "ServiceAccount": 1, "ConfigMap": 2, "Role": 1,
				"RoleBinding": 1, "PodDisruptionBudget": 1, "Secret": 1}
			if c.ns != c.argocdNS {
				want["Secret"] = 2 // the generated token, for Argo CD and for the pod
			}
			if c.values == "values-static.yaml" {
				want["Secret"]++ // credentials from values
			}
			if c.values == "values-rancher.yaml" || c.values == "values-aks.yaml" {
				want["NetworkPolicy"] = 1
			}
			if c.values == "values-rancher.yaml" || c.values == "values-eks.yaml" {
				want["ServiceMonitor"] = 1
			}
			got := map[string]int{}
			for _, m := range ms {
				got[m.GetKind()]++
			}
			assert.Equal(t, want, got)

			// standard labels on everything
			for _, m := range ms {
				l := m.GetLabels()
				for _, k := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
					"app.kubernetes.io/managed-by", "app.kubernetes.io/component", "app.kubernetes.io/part-of", "helm.sh/chart"} {
					assert.NotEmpty(t, l[k], "%s %s: label %s", m.GetKind(), m.GetName(), k)
				}
				assert.Equal(t, "argocd-cluster-discovery", l["app.kubernetes.io/name"])
				assert.Equal(t, release, l["app.kubernetes.io/instance"])
				assert.Equal(t, "Helm", l["app.kubernetes.io/managed-by"])
			}
		})
	}
}

// TestRenderedConfigIsValid loads the rendered config.yaml with the
// service's own configuration package, and builds the static sources from
// the files of the ConfigMap: what the pod would do at start-up.
func TestRenderedConfigIsValid(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := render(t, c)
			raw, cm := configOf(t, ms, c)
			dir := t.TempDir() // the ConfigMap's mount
			for k, v := range cm.Data {
				require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600))
			}
			cfg, err := config.Parse([]byte(raw), dir)
			if err != nil && c.values == "values-rancher.yaml" &&
				(strings.Contains(err.Error(), `"rancher" is not available`) || strings.Contains(err.Error(), `unknown field "rancher"`)) {
				// the rancher source is not wired into the configuration yet: its section is checked by the
				// schema until then, and by config.Parse as soon as it is
				t.Logf("rancher not available in this build yet: %v", err)
				return
			}
			require.NoError(t, err)

			dep := into[appsv1.Deployment](t, ms.one(t, "Deployment"))
			ctr := dep.Spec.Template.Spec.Containers[0]
			assert.Equal(t, []string{"serve", "--config", "/etc/argocd-cluster-discovery/config.yaml"}, ctr.Args)
			assert.Equal(t, fmt.Sprintf(":%d", port(t, ctr, "http")), cfg.Server.Listen, "server.listen is the http container port")
			if hasPort(ctr, "ops") {
				assert.Equal(t, fmt.Sprintf(":%d", port(t, ctr, "ops")), cfg.Server.OpsListen)
			} else {
				assert.Empty(t, cfg.Server.OpsListen)
			}
			assert.Equal(t, c.argocdNS, cfg.Secrets.Namespace, "the reconciler writes in Argo CD's namespace, where the Role is")
			assert.True(t, cfg.Secrets.Enabled)
			assert.True(t, cfg.Secrets.LeaderElection.Enabled, "2 replicas need leader election")
			assert.Equal(t, int32(2), *dep.Spec.Replicas)

			// the token file is the mounted token Secret
			require.Len(t, cfg.Server.Tokens, 1)
			tokenFile := cfg.Server.Tokens[0].File
			mount := mountOf(t, ctr, "token")
			vol := volumeOf(t, dep, "token")
			require.NotNil(t, vol.Secret)
			require.Len(t, vol.Secret.Items, 1)
			assert.Equal(t, filepath.Join(mount.MountPath, vol.Secret.Items[0].Path), tokenFile)
			_, ok := ms.find("Secret", c.ns, vol.Secret.SecretName)
			assert.True(t, ok, "the token Secret the pod mounts is rendered in the release namespace")

			// static sources start from the mounted files
			for _, s := range cfg.Sources {
				if s.Static != nil {
					_, err := static.New(*s.Static, dir)
					require.NoError(t, err, "static source %s", s.Name)
				}
			}
		})
	}
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

// TestArgoCDWiring: the plugin ConfigMap in Argo CD's namespace points at the
// Service and at a token Secret Argo CD may read, holding the value the pod
// accepts.
func TestArgoCDWiring(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := render(t, c)
			plugin, ok := ms.find("ConfigMap", c.argocdNS, release)
			require.True(t, ok, "plugin ConfigMap %s in Argo CD's namespace %s", release, c.argocdNS)
			data := into[corev1.ConfigMap](t, plugin).Data
			assert.Len(t, data, 3)
			assert.Equal(t, "30", data["requestTimeout"])

			svc := into[corev1.Service](t, ms.one(t, "Service"))
			require.Equal(t, "http", svc.Spec.Ports[0].Name)
			assert.Equal(t, fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", svc.Name, c.ns, svc.Spec.Ports[0].Port), data["baseUrl"])
			dep := into[appsv1.Deployment](t, ms.one(t, "Deployment"))
			assert.Equal(t, "http", svc.Spec.Ports[0].TargetPort.StrVal)
			for k, v := range svc.Spec.Selector {
				assert.Equal(t, v, dep.Spec.Template.Labels[k], "the Service selects the pods")
			}
			assert.Equal(t, dep.Spec.Selector.MatchLabels, svc.Spec.Selector)

			m := regexp.MustCompile(`^\$([a-z0-9.-]+):([-._a-zA-Z0-9]+)$`).FindStringSubmatch(data["token"])
			require.NotNil(t, m, "token is $<secret>:<key>, got %q", data["token"])
			forArgo, ok := ms.find("Secret", c.argocdNS, m[1])
			require.True(t, ok, "token Secret %s in %s", m[1], c.argocdNS)
			assert.Equal(t, "argocd", forArgo.GetLabels()["app.kubernetes.io/part-of"], "Argo CD reads $<secret>:<key> only from Secrets part-of argocd")
			forPod, ok := ms.find("Secret", c.ns, volumeOf(t, dep, "token").Secret.SecretName)
			require.True(t, ok)
			a, b := into[corev1.Secret](t, forArgo), into[corev1.Secret](t, forPod)
			require.NotEmpty(t, a.Data[m[2]])
			assert.GreaterOrEqual(t, len(a.Data[m[2]]), 32)
			assert.Equal(t, a.Data[m[2]], b.Data[m[2]], "Argo CD sends the token the pod accepts")
		})
	}
}

func TestSecurityContextRestricted(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dep := into[appsv1.Deployment](t, render(t, c).one(t, "Deployment"))
			pod := dep.Spec.Template.Spec
			require.NotNil(t, pod.SecurityContext)
			assert.True(t, *pod.SecurityContext.RunAsNonRoot)
			require.NotNil(t, pod.SecurityContext.SeccompProfile)
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
			assert.False(t, pod.HostNetwork || pod.HostPID || pod.HostIPC)
			for _, v := range pod.Volumes {
				assert.Nil(t, v.HostPath, "volume %s", v.Name)
			}
			require.Len(t, pod.Containers, 1)
			sc := pod.Containers[0].SecurityContext
			require.NotNil(t, sc)
			assert.True(t, *sc.RunAsNonRoot)
			assert.True(t, *sc.ReadOnlyRootFilesystem)
			assert.False(t, *sc.AllowPrivilegeEscalation)
			assert.False(t, sc.Privileged != nil && *sc.Privileged)
			require.NotNil(t, sc.Capabilities)
			assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
			assert.Empty(t, sc.Capabilities.Add)
			require.NotNil(t, sc.SeccompProfile)
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)
			res := pod.Containers[0].Resources
			assert.False(t, res.Requests.Cpu().IsZero())
			assert.False(t, res.Limits.Memory().IsZero())

			probes := pod.Containers[0]
			require.NotNil(t, probes.LivenessProbe)
			require.NotNil(t, probes.ReadinessProbe)
			assert.Equal(t, "/healthz", probes.LivenessProbe.HTTPGet.Path)
			assert.Equal(t, "/readyz", probes.ReadinessProbe.HTTPGet.Path)
			want := "http"
			if hasPort(probes, "ops") {
				want = "ops"
			}
			assert.Equal(t, want, probes.LivenessProbe.HTTPGet.Port.StrVal)
			assert.Equal(t, want, probes.ReadinessProbe.HTTPGet.Port.StrVal)
		})
	}
}

// TestConfigChecksum: pods restart when config.yaml changes, and only then
// (static cluster files are re-read in place).
func TestConfigChecksum(t *testing.T) {
	c := caseNamed(t, "default")
	checksum := func(ms manifests) (string, string) {
		raw, _ := configOf(t, ms, c)
		dep := into[appsv1.Deployment](t, ms.one(t, "Deployment"))
		sum := sha256.Sum256([]byte(raw))
		return dep.Spec.Template.Annotations["checksum/config"], hex.EncodeToString(sum[:])
	}
	base, sum := checksum(render(t, c))
	assert.Equal(t, sum, base, "the annotation is the sha256 of config.yaml")

	changed, sum2 := checksum(render(t, c, "--set", "config.log.level=debug"))
	assert.Equal(t, sum2, changed)
	assert.NotEqual(t, base, changed, "a configuration change rolls the pods")

	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte("files:\n  clusters.yaml: |\n    clusters: [{name: a, server: 'https://a.example.com'}]\n"), 0o600))
	ms := render(t, c, "-f", values)
	same, _ := checksum(ms)
	assert.Equal(t, base, same, "a static clusters file is re-read in place: no restart")
	_, cm := configOf(t, ms, c)
	assert.Contains(t, cm.Data["clusters.yaml"], "https://a.example.com")
}

// dockerfile reads what the chart must agree with from the Dockerfile's
// final stage.
type dockerfile struct {
	user, expose, configPath, source, cmd string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	require.NoError(t, err)
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	stages := regexp.MustCompile(`(?m)^FROM `).Split(text, -1)
	final := stages[len(stages)-1]
	var d dockerfile
	for _, line := range strings.Split(final, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "USER":
			d.user = f[1]
		case "EXPOSE":
			d.expose = f[1]
		case "CMD":
			d.cmd = strings.Join(f[1:], " ")
			var args []string
			require.NoError(t, json.Unmarshal([]byte(d.cmd), &args))
			for i, a := range args {
				if a == "--config" && i+1 < len(args) {
					d.configPath = args[i+1]
				}
			}
		case "LABEL":
			if m := regexp.MustCompile(`org\.opencontainers\.image\.source="([^"]+)"`).FindStringSubmatch(line); m != nil {
				d.source = m[1]
			}
		}
	}
	return d
}

// TestImageMatchesDockerfile: the chart's default image is the one the
// Dockerfile builds (ghcr.io/<owner>/<repo> of its source label, tag the
// chart's appVersion), run as its user, on its port, with the configuration
// where its CMD reads it.
func TestImageMatchesDockerfile(t *testing.T) {
	d := readDockerfile(t)
	require.NotEmpty(t, d.source, "LABEL org.opencontainers.image.source in the final stage")
	repo := "ghcr.io/" + strings.ToLower(strings.TrimPrefix(d.source, "https://github.com/"))

	var values struct {
		Image struct{ Repository, Tag string }
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &values))
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	b, err = os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &chart))
	assert.Equal(t, repo, values.Image.Repository, "image.repository is the Dockerfile's image")
	assert.Empty(t, values.Image.Tag, "image.tag defaults to appVersion")
	require.Regexp(t, `^[0-9]+\.[0-9]+\.[0-9]+`, chart.AppVersion)

	dep := into[appsv1.Deployment](t, render(t, caseNamed(t, "default")).one(t, "Deployment"))
	ctr := dep.Spec.Template.Spec.Containers[0]
	assert.Equal(t, repo+":"+chart.AppVersion, ctr.Image)

	uid, gid, _ := strings.Cut(d.user, ":")
	sc := dep.Spec.Template.Spec.SecurityContext
	assert.Equal(t, uid, fmt.Sprint(*sc.RunAsUser), "runAsUser is the Dockerfile's USER")
	assert.Equal(t, gid, fmt.Sprint(*sc.RunAsGroup))
	assert.Equal(t, d.expose, fmt.Sprint(port(t, ctr, "http")), "the http port is the Dockerfile's EXPOSE")
	require.NotEmpty(t, d.configPath)
	assert.Equal(t, filepath.Dir(d.configPath), mountOf(t, ctr, "config").MountPath, "config.yaml is mounted where CMD reads it")
	assert.Contains(t, ctr.Args, d.configPath)
}

// TestSchemaRejectsBadValues: values.schema.json and the template checks
// make helm template fail, naming the value.
func TestSchemaRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"typo at the top", []string{"--set", "replicaCounts=3"}, "replicaCounts"},
		{"replicas", []string{"--set", "replicaCount=0"}, "/replicaCount"},
		{"log level", []string{"--set", "config.log.level=verbose"}, "/config/log/level"},
		{"duration", []string{"--set", "config.inventory.interval=5 minutes"}, "/config/inventory/interval"},
		{"jitter", []string{"--set", "config.inventory.jitter=1"}, "/config/inventory/jitter"},
		{"listen is the chart's", []string{"--set", "config.server.listen=:9999"}, "listen"},
		{"secrets namespace is the chart's", []string{"--set", "config.secrets.namespace=kube-system"}, "namespace"},
		{"policy", []string{"--set", "config.secrets.policy=delete-everything"}, "/config/secrets/policy"},
		{"owner id", []string{"--set", "config.secrets.ownerID=not a label"}, "/config/secrets/ownerID"},
		{"no source", []string{"--set-json", "config.sources=[]"}, "/config/sources"},
		{"source name", []string{"--set-json", `config.sources=[{"name":"Fleet_1","provider":"static","static":{"file":"c.yaml"}}]`}, "/config/sources/0/name"},
		{"provider", []string{"--set-json", `config.sources=[{"name":"gcp","provider":"gke"}]`}, "/config/sources/0/provider"},
		{"section missing", []string{"--set-json", `config.sources=[{"name":"aws","provider":"eks"}]`}, "eks"},
		{"wrong section", []string{"--set-json", `config.sources=[{"name":"aws","provider":"static","static":{"file":"c"},"eks":{"regions":["eu-west-1"],"accounts":[{"id":"111111111111"}]}}]`}, "/config/sources/0"},
		{"eks account id", []string{"--set-json", `config.sources=[{"name":"aws","provider":"eks","eks":{"regions":["eu-west-1"],"accounts":[{"id":"1111"}]}}]`}, "/config/sources/0/eks/accounts/0/id"},
		{"rancher token inline", []string{"--set-json", `config.sources=[{"name":"r","provider":"rancher","rancher":{"url":"https://r.example.com","token":"token-abc:secret"}}]`}, "/config/sources/0/rancher/token"},
		{"token by Secret", []string{"--set-json", `extraTokens=[{"secret":{"name":"a","key":"b"}}]`}, "/extraTokens/0"},
		{"irsa", []string{"--set", "serviceAccount.awsRoleArn=my-role"}, "/serviceAccount/awsRoleArn"},
		{"azure client id", []string{"--set", "serviceAccount.azureClientId=abc"}, "/serviceAccount/azureClientId"},
		{"digest", []string{"--set", "image.digest=latest"}, "/image/digest"},
		{"files key", []string{"--set-string", `files.config\.yaml=x`}, "config.yaml"},
		{"two replicas without leader election", []string{"--set", "config.secrets.leaderElection.enabled=false"}, "leaderElection.enabled"},
		{"ops port on the http port", []string{"--set", "ports.ops=8080"}, "ports.ops must differ"},
		{"credentials twice", []string{"--set", "credentials.existingSecret=x", "--set", "credentials.stringData.token=y"}, "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helm(append([]string{"template", release, chartDir, "--namespace", "x"}, tc.args...)...)
			require.Error(t, err, "helm template accepted %v:\n%s", tc.args, out)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// and what is valid renders
	for _, args := range [][]string{
		{"--set", "config.secrets.leaderElection.enabled=false", "--set", "replicaCount=1"},
		{"--set", "config.secrets.enabled=false"},
		{"--set", "ports.ops=9090", "--set", "networkPolicy.enabled=true", "--set", "serviceMonitor.enabled=true"},
		{"--set", "argocd.token.existingSecret=my-token", "--set", "argocd.plugin.name=fleet"},
	} {
		_, err := helm(append([]string{"template", release, chartDir, "--namespace", "x"}, args...)...)
		assert.NoError(t, err, "%v", args)
	}
}

// --- the real API server ---

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
	out, err := helm("install", release, chartDir, "--namespace", ns, "--set", "argocd.namespace="+argocdNS)
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
