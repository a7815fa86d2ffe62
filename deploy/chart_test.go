package deploy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/aro"
)

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
	for _, p := range []string{"static", "rancher", "eks", "aks", "aro"} {
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
			want := map[string]int{"Deployment": 1, "Service": 1, "ServiceAccount": 1, "ConfigMap": 3, "Job": 1, "Role": 1,
				"RoleBinding": 1, "PodDisruptionBudget": 1, "Secret": 1, "CustomResourceDefinition": 1}
			if c.ns != c.argocdNS {
				want["Secret"] = 2 // the generated token, for Argo CD and for the pod
				// a Role and RoleBinding in Argo CD's namespace, and in the release namespace for the ledger
				want["Role"], want["RoleBinding"] = 2, 2
			}
			if c.values == "values-static.yaml" {
				want["Secret"]++ // credentials from values
			}
			if c.values == "values-rancher.yaml" || c.values == "values-aks.yaml" || c.values == "values-aro.yaml" {
				want["NetworkPolicy"] = 1
			}
			if c.values == "values-rancher.yaml" || c.values == "values-eks.yaml" {
				want["ServiceMonitor"] = 1
			}
			if c.values == "values-rancher.yaml" {
				want["Job"]++ // the pre-delete hook that revokes the per-cluster tokens
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
			cfg, err := parseRenderedConfig(t, raw, dir)
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
			var ledger struct {
				Ledger map[string]string `json:"ledger"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(raw), &ledger))
			assert.Equal(t, map[string]string{"kind": "kubernetes", "namespace": c.ns, "configMap": release + "-ledger"}, ledger.Ledger,
				"the ledger is kept in the release namespace, where its Role is")
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

			// static sources build from the mounted files (the others read
			// credentials this test does not mount)
			for _, s := range cfg.Sources {
				if s.Provider != sources.ProviderStatic {
					continue
				}
				_, err := s.Section.NewSource(sources.SourceOptions{Name: s.Name})
				require.NoError(t, err, "source %s", s.Name)
			}
		})
	}
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
		{"two replicas writing one ledger without leader election", []string{"--set", "config.secrets.enabled=false", "--set", "config.secrets.leaderElection.enabled=false"}, "ledger.kind kubernetes needs"},
		{"ops port on the http port", []string{"--set", "ports.ops=8080"}, "ports.ops must differ"},
		{"credentials twice", []string{"--set", "credentials.existingSecret=x", "--set", "credentials.stringData.token=y"}, "not both"},
		{"ledger kind", []string{"--set", "ledger.kind=etcd"}, "/ledger/kind"},
		{"ledger is the chart's", []string{"--set", "config.ledger.kind=memory"}, "ledger"},
		{"installCRD", []string{"--set-string", "clusterProfiles.installCRD=yes"}, "/clusterProfiles/installCRD"},
		{"argocd version", []string{"--set", "config.secrets.argocdVersion=latest"}, "/config/secrets/argocdVersion"},
		{"aro auth", []string{"--set-json", `config.sources=[{"name":"aro","provider":"aro","aro":{"auth":"kubeconfig"}}]`}, "/config/sources/0/aro/auth"},
		{"aro agent tag", []string{"--set-json", `config.sources=[{"name":"aro","provider":"aro","aro":{"auth":"agent","agent":{"tag":""}}}]`}, "/config/sources/0/aro/agent/tag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helm(append([]string{"template", release, chartDir, "--namespace", "x", "--set", "argocd.token.generateWithoutLookup=true"}, tc.args...)...)
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
		{"--set", "ledger.kind=memory", "--set", "clusterProfiles.installCRD=false"},
		{"--set", "ledger.kind=memory", "--set", "config.secrets.enabled=false", "--set", "config.secrets.leaderElection.enabled=false"}, // each replica its own
		{"--set", "config.secrets.argocdVersion=3.4.2"},
	} {
		_, err := helm(append([]string{"template", release, chartDir, "--namespace", "x", "--set", "argocd.token.generateWithoutLookup=true"}, args...)...)
		assert.NoError(t, err, "%v", args)
	}
}

// TestTokenWithoutLookup: where helm cannot look up the cluster (helm
// template, Argo CD rendering the chart), a generated token would be a new
// one at every render: rendering fails and names the two ways out, an
// existing Secret or an explicit opt-in.
func TestTokenWithoutLookup(t *testing.T) {
	template := func(args ...string) (manifests, error) {
		out, err := helm(append([]string{"template", release, chartDir, "--namespace", "x"}, args...)...)
		if err != nil {
			return nil, err
		}
		return decode(t, out), nil
	}
	_, err := template()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "argocd.token: helm cannot look up the cluster here")
	assert.Contains(t, err.Error(), "argocd.token.existingSecret")

	ms, err := template("--set", "argocd.token.existingSecret=my-token")
	require.NoError(t, err, "a Secret the user manages needs no lookup")
	_, ok := ms.find("Secret", "x", release+"-token")
	assert.False(t, ok, "no token Secret is rendered with existingSecret")

	first, err := template("--set", "argocd.token.generateWithoutLookup=true")
	require.NoError(t, err)
	second, err := template("--set", "argocd.token.generateWithoutLookup=true")
	require.NoError(t, err)
	a, ok := first.find("Secret", "x", release+"-token")
	require.True(t, ok)
	b, ok := second.find("Secret", "x", release+"-token")
	require.True(t, ok)
	assert.NotEqual(t, into[corev1.Secret](t, a).Data, into[corev1.Secret](t, b).Data, "what the opt-in accepts: a new token per render")
}

// TestAROExamplePushAndAgent: values-aro.yaml shows both ways Argo CD
// reaches ARO clusters, each source on its own subscription: a token
// Secret per cluster (push, the Secrets this service writes) and the Argo
// CD agent (pull: the agents' Secrets, never written). Such a hybrid hub
// needs Argo CD 3.4: the example states the version, so the service checks
// it (and refuses an older one), and its comments walk an operator through
// the agent's binding.
func TestAROExamplePushAndAgent(t *testing.T) {
	c := caseNamed(t, "aro")
	raw, _ := configOf(t, render(t, c), c)
	cfg, err := parseRenderedConfig(t, raw, t.TempDir())
	require.NoError(t, err)
	assert.Empty(t, cfg.Warnings, "the hub's Argo CD version is stated: nothing is left unchecked")
	require.True(t, cfg.Secrets.Enabled)

	byAuth := map[string]*aro.Config{}
	subscriptions := map[string]string{} // lower case → source
	for _, s := range cfg.Sources {
		require.Equal(t, sources.ProviderARO, s.Provider)
		a, ok := s.Section.(*aro.Config)
		require.True(t, ok, "source %s", s.Name)
		require.NotContains(t, byAuth, a.Auth, "one source per auth mode")
		byAuth[a.Auth] = a
		for _, sub := range a.Subscriptions {
			other, dup := subscriptions[strings.ToLower(sub)]
			assert.False(t, dup, "subscription %s is listed by %s and %s: its clusters would be served twice", sub, other, s.Name)
			subscriptions[strings.ToLower(sub)] = s.Name
		}
	}
	push, agent := byAuth[aro.AuthBearerToken], byAuth[aro.AuthAgent]
	require.NotNil(t, push, "a push source (auth bearerToken)")
	require.NotNil(t, agent, "an agent source (auth agent)")
	assert.NotEmpty(t, push.NamePrefix)
	assert.Empty(t, agent.NamePrefix, "an agent cluster is served under its agent's name")
	assert.Equal(t, sources.DefaultAgentTag, agent.Agent.Tag)

	v, err := version.ParseGeneric(cfg.Secrets.ArgoCDVersion)
	require.NoError(t, err, "secrets.argocdVersion is stated")
	assert.True(t, v.AtLeast(version.MustParseGeneric("3.4.0")), "a hub with push and agent clusters needs Argo CD 3.4")
	older, _ := configOf(t, render(t, c, "--set", "config.secrets.argocdVersion=3.3.9"), c)
	_, err = parseRenderedConfig(t, older, t.TempDir())
	require.Error(t, err, "an agent source with Secret sync on an Argo CD before 3.4 is refused")
	assert.Contains(t, err.Error(), "secrets.argocdVersion")

	b, err := os.ReadFile(filepath.Join(chartDir, "examples", c.values))
	require.NoError(t, err)
	for _, s := range []string{
		"argocd-agentctl agent create",  // the agent and its Secret cluster-<agent>
		"0.7.0",                         // the agentctl that adds skip-reconcile
		sources.AnnotationSkipReconcile, // which the service requires
		"kubectl annotate secret " + sources.AgentSecretPrefix,                               // the hub binds the agent ...
		sources.AnnotationTokenBinding + `="$(az aro show -g rg -n name --query id -o tsv)"`, // ... to the cluster's ARM id
		sources.DefaultAgentTag + "=",                                                        // the owner's tag, which only narrows
		"destination.name: '{{.name}}'",                                                      // ApplicationSets target the agent by name
		"Argo CD >= 3.4",                                                                     // a hybrid hub
	} {
		assert.Contains(t, string(b), s, "values-aro.yaml explains the agent mode")
	}
}
