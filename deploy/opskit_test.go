package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/opskit"
)

// The operations kit: the ServiceMonitor, the PrometheusRule of
// files/alerts.yaml and the Grafana dashboard ConfigMap of
// files/dashboard.json. Alert unit tests: alerttests_test.go; the names
// the kit uses against the binary's /metrics: opskitscrape_test.go.

var (
	alertsFile    = filepath.Join(chartDir, opskit.AlertsFile)
	dashboardFile = filepath.Join(chartDir, opskit.DashboardFile)
	kitFlags      = []string{"--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true",
		"--set", "grafanaDashboard.enabled=true"}
)

// promtool runs bin/testbin/promtool (.ci/promtool builds it; TestMain
// fails the run without it) and returns its combined output.
func promtool(args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(assets, "promtool"), args...).CombinedOutput()
	return string(out), err
}

func readRules(t *testing.T) *opskit.RuleFile {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	require.NoError(t, err)
	f, err := opskit.ParseRules(b)
	require.NoError(t, err)
	return f
}

// ruleSpec reads the groups of a rendered PrometheusRule as a rule file.
func ruleSpec(t *testing.T, d doc) *opskit.RuleFile {
	t.Helper()
	spec, ok := d.Object["spec"]
	require.True(t, ok)
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	f, err := opskit.ParseRules(b)
	require.NoError(t, err)
	return f
}

func TestOpsKitOffByDefault(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := render(t, c)
			assert.Empty(t, ms.all("PrometheusRule"))
			_, ok := ms.find("ConfigMap", c.ns, release+"-dashboard")
			assert.False(t, ok, "no dashboard ConfigMap")
			if c.values != "values-rancher.yaml" && c.values != "values-eks.yaml" { // those two examples turn it on
				assert.Empty(t, ms.all("ServiceMonitor"))
			}
			pod := ms.one(t, "Deployment").Object["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
			assert.NotContains(t, pod["annotations"], "prometheus.io/scrape")
		})
	}
}

func TestOpsKitRendersTheThreeObjects(t *testing.T) {
	c := caseNamed(t, "default")
	ms := render(t, c, kitFlags...)
	var kit manifests
	for _, k := range []struct{ kind, name string }{{"ServiceMonitor", release}, {"PrometheusRule", release},
		{"ConfigMap", release + "-dashboard"}} {
		d, ok := ms.find(k.kind, c.ns, k.name)
		require.True(t, ok, "%s %s/%s", k.kind, c.ns, k.name)
		for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
			"app.kubernetes.io/managed-by", "app.kubernetes.io/component", "app.kubernetes.io/part-of", "helm.sh/chart"} {
			assert.NotEmpty(t, d.GetLabels()[l], "%s: label %s", k.kind, l)
		}
		kit = append(kit, d)
	}

	// the ServiceMonitor scrapes /metrics on the http port, or on ops when it is set
	ep := func(ms manifests) map[string]any {
		d, _ := ms.find("ServiceMonitor", c.ns, release)
		eps, _, _ := unstructured.NestedSlice(d.Object, "spec", "endpoints")
		require.Len(t, eps, 1)
		return eps[0].(map[string]any)
	}
	assert.Equal(t, "http", ep(ms)["port"])
	assert.Equal(t, "/metrics", ep(ms)["path"])
	assert.Equal(t, "ops", ep(render(t, c, append([]string{"--set", "ports.ops=9090"}, kitFlags...)...))["port"])

	// the PrometheusRule holds the rule file as it is
	assert.Equal(t, readRules(t), ruleSpec(t, kit[1]))

	// the ConfigMap holds the dashboard as it is, with the sidecar's label
	cm := into[corev1.ConfigMap](t, kit[2])
	assert.Equal(t, "1", cm.Labels["grafana_dashboard"])
	want, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), cm.Data["argocd-cluster-discovery.json"])

	// the API server accepts them (strict field validation; testdata/crds has the operator's two CRDs)
	ensureNamespace(t, c.ns)
	assert.Empty(t, applyObjects(t, kit), "the API server warned")
}

func TestOpsKitValues(t *testing.T) {
	c := caseNamed(t, "default")
	ms := render(t, c, append([]string{
		"--set", "serviceMonitor.namespace=monitoring", "--set", "serviceMonitor.labels.release=kps",
		"--set", "prometheusRule.namespace=monitoring", "--set", "prometheusRule.labels.release=kps",
		"--set", "prometheusRule.additionalRuleLabels.team=platform",
		"--set", "prometheusRule.additionalRuleLabels.severity=ignored",
		"--set", "prometheusRule.alerts.ArgocdClusterDiscoverySourceStale.for=1h",
		"--set", "prometheusRule.alerts.ArgocdClusterDiscoveryDepartureHeld.severity=critical",
		"--set", "prometheusRule.alerts.ArgocdClusterDiscoveryNoLeader.disabled=true",
		"--set", "grafanaDashboard.namespace=grafana", "--set", "grafanaDashboard.label=my_dashboards",
		"--set", "grafanaDashboard.labelValue=yes", "--set", "grafanaDashboard.labels.team=platform",
		"--set", "grafanaDashboard.annotations.grafana_folder=Argo CD",
		"--set", "scrapeAnnotations.enabled=true", "--set", "ports.ops=9090",
	}, kitFlags...)...)

	sm, ok := ms.find("ServiceMonitor", "monitoring", release)
	require.True(t, ok)
	assert.Equal(t, "kps", sm.GetLabels()["release"])
	ns, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	assert.Equal(t, []string{c.ns}, ns, "it selects the release's Service")

	pr, ok := ms.find("PrometheusRule", "monitoring", release)
	require.True(t, ok)
	assert.Equal(t, "kps", pr.GetLabels()["release"])
	rendered := map[string]opskit.Rule{}
	for _, g := range ruleSpec(t, pr).Groups {
		for _, r := range g.Rules {
			rendered[r.Alert] = r
		}
	}
	file := readRules(t)
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			got, ok := rendered[r.Alert]
			if r.Alert == "ArgocdClusterDiscoveryNoLeader" {
				assert.False(t, ok, "disabled")
				continue
			}
			require.True(t, ok, r.Alert)
			assert.Equal(t, "platform", got.Labels["team"], r.Alert)
			assert.Equal(t, r.Expr, got.Expr, r.Alert)
			assert.Equal(t, r.Annotations, got.Annotations, r.Alert)
			switch r.Alert {
			case "ArgocdClusterDiscoverySourceStale":
				assert.Equal(t, "1h", got.For)
				assert.Equal(t, r.Labels["severity"], got.Labels["severity"])
			case "ArgocdClusterDiscoveryDepartureHeld":
				assert.Equal(t, r.For, got.For)
				assert.Equal(t, "critical", got.Labels["severity"])
			default:
				assert.Equal(t, r.For, got.For, r.Alert)
				assert.Equal(t, r.Labels["severity"], got.Labels["severity"], "%s: an additional label does not replace the alert's", r.Alert)
			}
		}
	}

	dd, ok := ms.find("ConfigMap", "grafana", release+"-dashboard")
	require.True(t, ok)
	assert.Equal(t, "yes", dd.GetLabels()["my_dashboards"])
	assert.Equal(t, "platform", dd.GetLabels()["team"])
	assert.NotContains(t, dd.GetLabels(), "grafana_dashboard")
	assert.Equal(t, "Argo CD", dd.GetAnnotations()["grafana_folder"])

	pod := ms.one(t, "Deployment").Object["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
	assert.Equal(t, map[string]any{"prometheus.io/scrape": "true", "prometheus.io/port": "9090", "prometheus.io/path": "/metrics"},
		subset(pod["annotations"].(map[string]any), "prometheus.io/scrape", "prometheus.io/port", "prometheus.io/path"))

	for _, n := range []string{"monitoring", "grafana"} {
		ensureNamespace(t, n)
	}
	assert.Empty(t, applyObjects(t, manifests{sm, pr, dd}), "the API server warned")
}

func subset(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// TestOpsKitSchema: the schema knows the alerts by name, so a misspelt
// override fails the install rather than being ignored.
func TestOpsKitSchema(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	require.NoError(t, err)
	var schema struct {
		Properties struct {
			PrometheusRule struct {
				Properties struct {
					Alerts struct {
						PropertyNames struct {
							Enum []string `json:"enum"`
						} `json:"propertyNames"`
					} `json:"alerts"`
				} `json:"properties"`
			} `json:"prometheusRule"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(b, &schema))
	var names []string
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	assert.Equal(t, names, schema.Properties.PrometheusRule.Properties.Alerts.PropertyNames.Enum,
		"values.schema.json: prometheusRule.alerts names the alerts of files/alerts.yaml")

	c := caseNamed(t, "default")
	for _, bad := range [][]string{
		{"--set", "prometheusRule.alerts.ArgocdClusterDiscoverySourceStal.for=1h"},
		{"--set", "prometheusRule.alerts.ArgocdClusterDiscoverySourceStale.for=soon"},
		{"--set", "prometheusRule.alerts.ArgocdClusterDiscoverySourceStale.silence=true"},
		{"--set", "prometheusRule.enable=true"},
		{"--set", "grafanaDashboard.label="},
		{"--set", "scrapeAnnotations.enabled=yes"},
	} {
		args := append([]string{"template", release, chartDir, "--namespace", c.ns}, c.valuesArgs()...)
		_, err := helm(append(args, bad...)...)
		if assert.Error(t, err, "%v", bad) {
			assert.Contains(t, err.Error(), "values don't meet the specifications of the schema", "%v", bad)
		}
	}
}

func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	require.NoError(t, opskit.ValidateDashboard(b))

	qs, err := opskit.DashboardQueries(b)
	require.NoError(t, err)
	var exprs []string
	for _, q := range qs {
		exprs = append(exprs, q.Expr)
	}
	all := strings.Join(exprs, "\n")
	// what the dashboard is for (issue: the fleet by phase and source, listing durations and errors, Secret writes,
	// held departures, answer latency and sizes, 4xx/5xx, the leader)
	for _, m := range []string{"argocd_cluster_discovery_source_served_clusters", "argocd_cluster_discovery_source_listing_duration_seconds_bucket",
		"argocd_cluster_discovery_source_listing_errors_total", "argocd_cluster_discovery_secrets_writes_total",
		"argocd_cluster_discovery_source_departures_held", "argocd_cluster_discovery_secrets_pending_deletions",
		"argocd_cluster_discovery_secrets_blocked_deletions", "argocd_cluster_discovery_http_request_duration_seconds_bucket",
		`code=~"5.."`, `code=~"4.."`, "argocd_cluster_discovery_secrets_leader"} {
		assert.Contains(t, all, m)
	}

	// every panel's query is PromQL that Prometheus accepts: promtool checks them as recording rules, Grafana's
	// interval variables replaced by a duration
	var rules []opskit.Rule
	for i, q := range qs {
		if q.Expr == "" {
			continue
		}
		expr := q.Expr
		for _, v := range []string{"$__rate_interval", "${__rate_interval}", "$__interval", "$__range"} {
			expr = strings.ReplaceAll(expr, v, "5m")
		}
		rules = append(rules, opskit.Rule{Record: "dashboard:query_" + string(rune('a'+i/26)) + string(rune('a'+i%26)), Expr: expr})
	}
	out, err := yaml.Marshal(opskit.RuleFile{Groups: []opskit.RuleGroup{{Name: "dashboard", Rules: rules}}})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	res, err := promtool("check", "rules", path)
	require.NoError(t, err, res)
}
