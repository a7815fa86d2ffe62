package deploy_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
)

// previousChart is the commit of the last chart without the ledger
// (version 0.1.0): the chart users upgrade from.
const previousChart = "3418abe"

// chartAt extracts the chart as it was at commit into a temporary folder
// and returns its path. It needs the repository's history (a clone
// without --depth).
func chartAt(t *testing.T, commit string) string {
	t.Helper()
	dir := t.TempDir()
	archive := exec.Command("git", "archive", commit, "--", chartDir)
	archive.Dir = "."
	var out, stderr bytes.Buffer
	archive.Stdout, archive.Stderr = &out, &stderr
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v: %s (this test needs the repository's history: clone without --depth)", commit, err, stderr.String())
	}
	untar := exec.Command("tar", "-x", "-C", dir)
	untar.Stdin = &out
	if b, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, b)
	}
	// run in deploy/, git archive names the files relative to it
	path := filepath.Join(dir, chartDir)
	_, err := os.Stat(filepath.Join(path, "Chart.yaml"))
	require.NoError(t, err)
	return path
}

// TestHelmUpgradeFromPreviousChart installs the chart users run today
// (0.1.0, without the ledger), lets it own cluster Secrets as the service
// writes them, and upgrades to this chart with the same values: the
// upgrade succeeds, adds the ClusterProfile CRD and the ledger's RBAC,
// keeps the Deployment, the generated token and every cluster Secret (same
// UID, same data).
func TestHelmUpgradeFromPreviousChart(t *testing.T) {
	const ns, argocdNS = "upgrade-discovery", "upgrade-argocd"
	ensureNamespace(t, ns)
	ensureNamespace(t, argocdNS)
	ctx := context.Background()
	old := chartAt(t, previousChart)
	_, err := helm("install", release, old, "--namespace", ns, "--set", "argocd.namespace="+argocdNS, "--set", "validation.enabled=false")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = helm("uninstall", release, "--namespace", ns) })

	owner := ns + "." + release // the chart's default ownerID
	var secrets []*corev1.Secret
	for _, name := range []string{"prod-eu", "prod-us"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cluster-" + name, Namespace: argocdNS,
			Labels: map[string]string{clustersecret.LabelSecretType: "cluster", clustersecret.LabelManagedBy: clustersecret.ManagedByValue,
				clustersecret.LabelOwner: owner, clustersecret.LabelSource: "rancher"},
			Annotations: map[string]string{clustersecret.AnnotationCluster: name, clustersecret.AnnotationClusterID: "c-" + name}},
			StringData: map[string]string{"name": name, "server": "https://" + name + ".example.com", "config": `{"bearerToken":"t"}`}}
		s, err := kube(t).CoreV1().Secrets(argocdNS).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
		secrets = append(secrets, s)
	}
	token := func() string {
		s, err := kube(t).CoreV1().Secrets(argocdNS).Get(ctx, release+"-token", metav1.GetOptions{})
		require.NoError(t, err)
		return string(s.Data["token"])
	}
	deployment := func() string {
		d, err := kube(t).AppsV1().Deployments(ns).Get(ctx, release, metav1.GetOptions{})
		require.NoError(t, err)
		return string(d.UID)
	}
	tokenBefore, deploymentBefore := token(), deployment()

	_, err = helm("upgrade", release, chartDir, "--namespace", ns, "--reuse-values")
	require.NoError(t, err, "upgrade from the previous chart with its values")

	assert.Equal(t, tokenBefore, token(), "the generated token survives")
	assert.Equal(t, deploymentBefore, deployment(), "the Deployment is updated in place, not replaced")
	for _, was := range secrets {
		s, err := kube(t).CoreV1().Secrets(argocdNS).Get(ctx, was.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, was.UID, s.UID, "Secret %s", was.Name)
		assert.Equal(t, was.ResourceVersion, s.ResourceVersion, "Secret %s untouched", was.Name)
	}
	_, err = clients.dyn.Resource(clusterProfileGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "ClusterProfiles are served after the upgrade")
	role, err := kube(t).RbacV1().Roles(ns).Get(ctx, release, metav1.GetOptions{})
	require.NoError(t, err, "the Role of the release's namespace, for the ledger")
	found := false
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			found = found || res == "clusterprofiles"
		}
	}
	assert.True(t, found, "the upgraded release may write ClusterProfiles: %+v", role.Rules)
}
