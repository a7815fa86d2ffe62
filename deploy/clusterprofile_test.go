package deploy_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
)

const clusterProfileCRD = "clusterprofiles.multicluster.x-k8s.io"

var (
	clusterProfileGVR = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Resource: "clusterprofiles"}
	crdGVR            = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// parseRenderedConfig is config.Parse for the chart's config.yaml.
func parseRenderedConfig(t *testing.T, raw, dir string) (*config.Config, error) {
	t.Helper()
	return config.Parse([]byte(raw), dir)
}

// TestLedgerValues: ledger.kind and clusterProfiles.installCRD as rendered.
func TestLedgerValues(t *testing.T) {
	c := caseNamed(t, "aks") // Argo CD in another namespace
	for _, tc := range []struct {
		name       string
		args       []string
		wantLedger map[string]string
		wantRoles  int
		wantCRD    bool
	}{
		{"defaults", nil, map[string]string{"kind": "kubernetes", "namespace": c.ns, "configMap": release + "-ledger"}, 2, true},
		{"memory", []string{"--set", "ledger.kind=memory"}, map[string]string{"kind": "memory"}, 1, true},
		{"no CRD", []string{"--set", "clusterProfiles.installCRD=false"}, map[string]string{"kind": "kubernetes", "namespace": c.ns, "configMap": release + "-ledger"}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := render(t, c, tc.args...)
			raw, _ := configOf(t, ms, c)
			var cfg struct {
				Ledger map[string]string `json:"ledger"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(raw), &cfg))
			assert.Equal(t, tc.wantLedger, cfg.Ledger)
			assert.Len(t, ms.all("Role"), tc.wantRoles)
			_, ledgerRole := ms.find("Role", c.ns, release)
			assert.Equal(t, tc.wantRoles == 2, ledgerRole, "a Role in the release namespace for the kubernetes ledger only")
			crds := ms.all("CustomResourceDefinition")
			if !tc.wantCRD {
				assert.Empty(t, crds)
				return
			}
			require.Len(t, crds, 1)
			assert.Equal(t, clusterProfileCRD, crds[0].GetName())
			assert.Equal(t, "keep", crds[0].GetAnnotations()["helm.sh/resource-policy"], "uninstalling must not delete every ClusterProfile")
			assert.Equal(t, "Prune=false,Delete=false", crds[0].GetAnnotations()["argocd.argoproj.io/sync-options"],
				"nor deleting or pruning the release's Argo CD Application")
		})
	}
}

// ensureClusterProfileCRD applies the chart's CRD and waits until
// ClusterProfiles are served.
func ensureClusterProfileCRD(t *testing.T) {
	t.Helper()
	crd, ok := render(t, caseNamed(t, "default")).find("CustomResourceDefinition", "", clusterProfileCRD)
	require.True(t, ok)
	assert.Empty(t, applyObjects(t, manifests{crd}), "the API server warned")
	require.Eventually(t, func() bool {
		_, err := clients.dyn.Resource(clusterProfileGVR).Namespace("default").List(context.Background(), metav1.ListOptions{})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "ClusterProfiles are served")
}

// TestClusterProfileCRD creates ClusterProfiles, then writes their status,
// with strict field validation: what the ledger writes is kept whole, what
// the upstream CRD refuses is refused.
// with returns a copy of m with key set to v (nil: removed).
func with(m map[string]any, key string, v any) map[string]any {
	out := maps.Clone(m)
	out[key] = v
	if v == nil {
		delete(out, key)
	}
	return out
}

func TestClusterProfileCRD(t *testing.T) {
	ensureClusterProfileCRD(t)
	const ns = "clusterprofiles"
	ensureNamespace(t, ns)
	ctx := context.Background()
	res := clients.dyn.Resource(clusterProfileGVR).Namespace(ns)
	strict := "Strict"
	spec := map[string]any{"displayName": "one", "clusterManager": map[string]any{"name": "argocd-cluster-discovery"}}
	now := time.Now().UTC().Format(time.RFC3339)
	status := map[string]any{
		"version":    map[string]any{"kubernetes": "1.31.2"},
		"conditions": []any{map[string]any{"type": "Served", "status": "True", "reason": "Listed", "message": "", "lastTransitionTime": now}},
		"properties": []any{map[string]any{"name": "argocd-cluster-discovery.io/source", "value": "fleet", "lastObservedTime": now}},
		"accessProviders": []any{map[string]any{"name": "argocd-cluster-discovery", "cluster": map[string]any{
			"server": "https://one.example.com", "certificate-authority-data": "Y2E=", "tls-server-name": "one",
			"extensions": []any{map[string]any{"name": "x", "extension": map[string]any{"any": "thing"}}}}}},
		"credentialProviders": []any{map[string]any{"name": "deprecated", "cluster": map[string]any{"server": "https://one.example.com"}}},
	}
	for _, tc := range []struct {
		name    string
		spec    map[string]any // nil: no spec
		status  map[string]any // nil: no status update
		wantErr string
	}{
		{name: "what the ledger writes", spec: spec, status: status},
		{name: "spec only", spec: map[string]any{"clusterManager": map[string]any{"name": "m"}}},
		{name: "no spec", wantErr: "spec: Required value"},
		{name: "no clusterManager", spec: with(spec, "clusterManager", nil), wantErr: "spec.clusterManager: Required value"},
		{name: "unknown spec field", spec: with(spec, "server", "https://x"), wantErr: `unknown field "spec.server"`},
		{name: "provider without server", spec: spec, wantErr: "status.accessProviders[0].cluster.server: Required value",
			status: with(status, "accessProviders", []any{map[string]any{"name": "p", "cluster": map[string]any{"proxy-url": "http://p"}}})},
		{name: "two providers named alike", spec: spec, wantErr: "Duplicate value",
			status: with(status, "accessProviders", []any{map[string]any{"name": "p"}, map[string]any{"name": "p"}})},
		{name: "empty property value", spec: spec, wantErr: "status.properties[0].value",
			status: with(status, "properties", []any{map[string]any{"name": "p", "value": ""}})},
		{name: "condition status", spec: spec, wantErr: "status.conditions[0].status",
			status: with(status, "conditions", []any{map[string]any{"type": "Served", "status": "Yes", "reason": "R", "message": "", "lastTransitionTime": now}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(strings.ToLower(tc.name), " ", "-")
			obj := map[string]any{"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
				"metadata": map[string]any{"name": name, "labels": map[string]any{"x-k8s.io/cluster-manager": "argocd-cluster-discovery"}}}
			if tc.spec != nil {
				obj["spec"] = tc.spec
			}
			u, err := res.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldValidation: strict})
			if err == nil && tc.status != nil {
				u.Object["status"] = tc.status
				u, err = res.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldValidation: strict})
			}
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.True(t, apierrors.IsInvalid(err) || apierrors.IsBadRequest(err), "%v", err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			t.Cleanup(func() { _ = res.Delete(ctx, name, metav1.DeleteOptions{}) })
			assert.Equal(t, tc.spec, u.Object["spec"], "the spec is kept whole")
			if tc.status != nil {
				got, err := res.Get(ctx, name, metav1.GetOptions{})
				require.NoError(t, err)
				assert.Equal(t, tc.status, got.Object["status"], "the status is kept whole")
			}

			// the cluster manager is immutable
			u.Object["spec"].(map[string]any)["clusterManager"] = map[string]any{"name": "another"}
			_, err = res.Update(ctx, u, metav1.UpdateOptions{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "ClusterManager is immutable")
		})
	}
}

// TestHelmInstallClusterProfileCRD installs the chart with the CRD absent,
// then present from another release: the first install creates and owns it
// and leaves it behind when uninstalled, the second leaves it alone.
func TestHelmInstallClusterProfileCRD(t *testing.T) {
	ctx := context.Background()
	initClients(t)
	crds := clients.dyn.Resource(crdGVR)
	owner := func() (string, bool) {
		crd, err := crds.Get(ctx, clusterProfileCRD, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", false
		}
		require.NoError(t, err)
		return crd.GetAnnotations()["meta.helm.sh/release-namespace"], true
	}
	for _, tc := range []struct {
		name      string
		ns        string
		absent    bool   // delete the CRD first
		wantOwner string // the release namespace the CRD belongs to after the install
	}{
		{name: "absent", ns: "crd-first", absent: true, wantOwner: "crd-first"},
		{name: "present from another release", ns: "crd-second", wantOwner: "crd-first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.absent {
				err := crds.Delete(ctx, clusterProfileCRD, metav1.DeleteOptions{})
				if !apierrors.IsNotFound(err) {
					require.NoError(t, err)
				}
				require.Eventually(t, func() bool { _, ok := owner(); return !ok }, 30*time.Second, 100*time.Millisecond)
			}
			ensureNamespace(t, tc.ns)
			_, err := helm("install", release, chartDir, "--namespace", tc.ns, "--set", "validation.enabled=false")
			require.NoError(t, err)
			got, ok := owner()
			require.True(t, ok)
			assert.Equal(t, tc.wantOwner, got)
			_, err = helm("uninstall", release, "--namespace", tc.ns)
			require.NoError(t, err)
			_, ok = owner()
			assert.True(t, ok, "the CRD outlives the release")
		})
	}
}
