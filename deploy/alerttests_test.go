package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/opskit"
)

// alertTests are the promtool unit tests of files/alerts.yaml.
var alertTests = filepath.Join("testdata", "alerts_test.yaml")

// runbooks is where each alert's runbook_url points: a section of deploy/README.md named after the alert.
const runbooks = "https://github.com/argocd-cluster-discovery/argocd-cluster-discovery/blob/main/deploy/README.md#"

type unitTests struct {
	Tests []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			Alertname string           `json:"alertname"`
			ExpAlerts []map[string]any `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func TestAlertRulesCheck(t *testing.T) {
	out, err := promtool("check", "rules", alertsFile)
	require.NoError(t, err, out)
	assert.Contains(t, out, "SUCCESS")

	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	anchors := parseMarkdown(string(readme)).anchors
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "files/alerts.yaml holds alerts only")
			assert.True(t, strings.HasPrefix(r.Alert, "ArgocdClusterDiscovery"), r.Alert)
			assert.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], r.Alert)
			assert.NotEmpty(t, r.For, "%s: a for, so that one bad scrape pages no one", r.Alert)
			assert.NotEmpty(t, r.Annotations["summary"], r.Alert)
			assert.NotEmpty(t, r.Annotations["description"], r.Alert)
			anchor := strings.ToLower(r.Alert)
			assert.Equal(t, runbooks+anchor, r.Annotations["runbook_url"], r.Alert)
			assert.True(t, anchors[anchor], "%s: deploy/README.md has no section %q (its runbook)", r.Alert, r.Alert)
		}
	}
}

// TestAlertUnitTests runs the unit tests on the rule file, and on the
// rules the chart renders into its PrometheusRule.
func TestAlertUnitTests(t *testing.T) {
	out, err := promtool("test", "rules", alertTests)
	require.NoError(t, err, out)
	assert.Contains(t, out, "SUCCESS")

	ms := render(t, caseNamed(t, "default"), kitFlags...)
	pr, ok := ms.find("PrometheusRule", caseNamed(t, "default").ns, release)
	require.True(t, ok)
	b, err := yaml.Marshal(ruleSpec(t, pr))
	require.NoError(t, err)
	out, err = promtool("test", "rules", unitTestsOn(t, b))
	require.NoError(t, err, "the rendered PrometheusRule: %s", out)
}

// unitTestsOn writes the rule file rules and a copy of the unit tests that
// read it, and returns the tests' path.
func unitTestsOn(t *testing.T, rules []byte) string {
	t.Helper()
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "alerts.yaml")
	require.NoError(t, os.WriteFile(rulesPath, rules, 0o600))
	b, err := os.ReadFile(alertTests)
	require.NoError(t, err)
	var tests map[string]any
	require.NoError(t, yaml.Unmarshal(b, &tests))
	tests["rule_files"] = []string{rulesPath}
	b, err = yaml.Marshal(tests)
	require.NoError(t, err)
	path := filepath.Join(dir, "alerts_test.yaml")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// TestEveryAlertUnitTested: every alert has a test where it fires and one
// where it does not, in test groups named after it (the alert without
// its ArgocdClusterDiscovery prefix, then a space), and each of them can
// fail: with the alert's expression replaced by one that never fires, and
// by one that always fires, its test groups fail on that alert.
func TestEveryAlertUnitTested(t *testing.T) {
	b, err := os.ReadFile(alertTests)
	require.NoError(t, err)
	var tests unitTests
	require.NoError(t, yaml.Unmarshal(b, &tests))
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tg := range tests.Tests {
		for _, at := range tg.AlertRuleTest {
			assert.True(t, strings.HasPrefix(tg.Name, shortName(at.Alertname)+" "),
				"test group %q tests %s: name it after the alert", tg.Name, at.Alertname)
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				silent[at.Alertname] = true
			}
		}
	}
	rules := readRules(t)
	var names []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			assert.True(t, fires[r.Alert], "%s: no unit test where it fires (%s)", r.Alert, alertTests)
			assert.True(t, silent[r.Alert], "%s: no unit test where it does not fire (%s)", r.Alert, alertTests)
		}
	}
	for n := range fires {
		assert.Contains(t, names, n, "%s tests an alert that does not exist", alertTests)
	}

	for _, name := range names {
		for _, m := range []struct{ what, expr string }{{"never fires", "vector(1) == 2"}, {"always fires", "vector(1)"}} {
			t.Run(fmt.Sprintf("%s %s", name, m.what), func(t *testing.T) {
				mutated := mutate(t, rules, name, m.expr)
				b, err := yaml.Marshal(mutated)
				require.NoError(t, err)
				out, err := promtool("test", "rules", "--run", "^"+shortName(name)+" ", unitTestsOn(t, b))
				require.Error(t, err, "the unit tests pass with %s's expression replaced by %q", name, m.expr)
				assert.Contains(t, out, "alertname: "+name)
			})
		}
	}
}

// shortName is an alert's name without the prefix every alert has.
func shortName(alert string) string { return strings.TrimPrefix(alert, "ArgocdClusterDiscovery") }

// mutate returns a copy of rules with the expression of alert replaced.
func mutate(t *testing.T, rules *opskit.RuleFile, alert, expr string) *opskit.RuleFile {
	t.Helper()
	out := &opskit.RuleFile{}
	found := false
	for _, g := range rules.Groups {
		g.Rules = slices.Clone(g.Rules)
		for i := range g.Rules {
			if g.Rules[i].Alert == alert {
				g.Rules[i].Expr, found = expr, true
			}
		}
		out.Groups = append(out.Groups, g)
	}
	require.True(t, found, alert)
	return out
}
