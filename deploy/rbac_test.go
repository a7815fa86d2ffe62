package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// reconcilerSecretVerbs are the calls generator/clustersecret makes on
// Secrets (secretsClient, and list and watch for its informer cache):
// nothing more may be granted.
var reconcilerSecretVerbs = []string{"create", "delete", "get", "list", "update", "watch"}

// TestRoleIsNamespacedAndMinimal reads the rendered RBAC objects: a Role
// and its RoleBinding in Argo CD's namespace and, for the ledger, in the
// release namespace (one when they are the same), nothing cluster-wide, no
// wildcard, Secret verbs exactly the reconciler's.
// rbacConfig is what the RBAC tests read of the rendered configuration.
type rbacConfig struct {
	Secrets struct {
		LeaderElection struct {
			LeaseName string `json:"leaseName"`
		} `json:"leaderElection"`
	} `json:"secrets"`
	ApplicationSetRefresh struct {
		Enabled bool `json:"enabled"`
	} `json:"applicationSetRefresh"`
	Ledger struct {
		Namespace string `json:"namespace"`
		ConfigMap string `json:"configMap"`
	} `json:"ledger"`
}

func rbacConfigOf(t *testing.T, ms manifests, c chartCase) rbacConfig {
	t.Helper()
	raw, _ := configOf(t, ms, c)
	var cfg rbacConfig
	require.NoError(t, yaml.Unmarshal([]byte(raw), &cfg))
	return cfg
}

func TestRoleIsNamespacedAndMinimal(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := render(t, c)
			assert.Empty(t, ms.all("ClusterRole"))
			assert.Empty(t, ms.all("ClusterRoleBinding"))
			sa := ms.one(t, "ServiceAccount")
			namespaces := []string{c.argocdNS}
			if c.ns != c.argocdNS {
				namespaces = append(namespaces, c.ns) // the ledger's
			}
			require.Len(t, ms.all("Role"), len(namespaces))
			require.Len(t, ms.all("RoleBinding"), len(namespaces))

			cfg := rbacConfigOf(t, ms, c)
			require.NotEmpty(t, cfg.Secrets.LeaderElection.LeaseName)
			require.Equal(t, c.ns, cfg.Ledger.Namespace)
			require.NotEmpty(t, cfg.Ledger.ConfigMap)

			granted := map[string][]string{} // namespace: group/resource → verbs
			for _, ns := range namespaces {
				rd, ok := ms.find("Role", ns, release)
				require.True(t, ok, "a Role in %s", ns)
				bd, ok := ms.find("RoleBinding", ns, release)
				require.True(t, ok, "a RoleBinding in %s", ns)
				role, rb := into[rbacv1.Role](t, rd), into[rbacv1.RoleBinding](t, bd)
				assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}, rb.RoleRef)
				assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.GetName(), Namespace: c.ns}}, rb.Subjects)
				for _, r := range role.Rules {
					assert.Empty(t, r.NonResourceURLs)
					for _, list := range [][]string{r.Verbs, r.Resources, r.APIGroups, r.ResourceNames} {
						assert.NotContains(t, list, "*", "no wildcard in %+v", r)
					}
					for _, g := range r.APIGroups {
						for _, res := range r.Resources {
							key := ns + ": " + g + "/" + res
							switch {
							case res == "leases" && len(r.ResourceNames) > 0:
								leases := []string{cfg.Secrets.LeaderElection.LeaseName}
								if cfg.ApplicationSetRefresh.Enabled {
									leases = append(leases, cfg.Secrets.LeaderElection.LeaseName+"-appset-refresh")
								}
								assert.Equal(t, leases, r.ResourceNames)
								key += "@named"
							case res == "configmaps" && len(r.ResourceNames) > 0:
								assert.Equal(t, []string{cfg.Ledger.ConfigMap}, r.ResourceNames, "the ledger's ConfigMap only")
								key += "@named"
							default:
								assert.Empty(t, r.ResourceNames, "%+v", r)
							}
							granted[key] = append(granted[key], r.Verbs...)
						}
					}
				}
			}
			for k := range granted {
				sort.Strings(granted[k])
			}
			secretVerbs := reconcilerSecretVerbs // the refresh trigger reads the same cache
			a, l := c.argocdNS+": ", c.ns+": "
			want := map[string][]string{
				a + "/secrets":                                     secretVerbs,
				a + "coordination.k8s.io/leases":                   {"create"},
				a + "coordination.k8s.io/leases@named":             {"get", "update"},
				l + "multicluster.x-k8s.io/clusterprofiles":        ledgerProfileVerbs,
				l + "multicluster.x-k8s.io/clusterprofiles/status": {"patch"},
				l + "/configmaps":                                  {"create"},
				l + "/configmaps@named":                            {"get", "list", "patch", "watch"},
			}
			if cfg.ApplicationSetRefresh.Enabled { // the grant follows the feature
				want[a+"argoproj.io/applicationsets"] = []string{"get", "list", "patch", "watch"}
			}
			assert.Equal(t, want, granted)
		})
	}
}

// assertLedgerAllowed checks what the ledger needs in the release
// namespace ns.
func assertLedgerAllowed(t *testing.T, can func(verb, group, resource, ns, name string) bool, ns string) {
	t.Helper()
	for _, v := range ledgerProfileVerbs {
		assert.True(t, can(v, "multicluster.x-k8s.io", "clusterprofiles", ns, ""), "clusterprofiles %s", v)
	}
	assert.True(t, can("patch", "multicluster.x-k8s.io", "clusterprofiles/status", ns, "x"))
	assert.True(t, can("create", "", "configmaps", ns, ""), "configmaps create")
	for _, v := range []string{"get", "list", "watch", "patch"} {
		assert.True(t, can(v, "", "configmaps", ns, release+"-ledger"), "%s the ledger's ConfigMap", v)
	}
}

// ledgerProfileVerbs are the calls the kubernetes ledger makes on
// ClusterProfiles: list and watch (every replica's cache), get, create,
// patch and delete (the leader).
var ledgerProfileVerbs = []string{"create", "delete", "get", "list", "patch", "watch"}

var applicationSetGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applicationsets"}

// serviceAccount is the chart's ServiceAccount as the API server sees it.
func serviceAccount(c chartCase) (string, []string) {
	return fmt.Sprintf("system:serviceaccount:%s:%s", c.ns, release),
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + c.ns, "system:authenticated"}
}

// authorizer asks the API server (SubjectAccessReview) whether the chart's
// ServiceAccount of case c may make a call.
func authorizer(t *testing.T, c chartCase) func(verb, group, resource, ns, name string) bool {
	t.Helper()
	user, groups := serviceAccount(c)
	return func(verb, group, resource, ns, name string) bool {
		t.Helper()
		ok, err := allowed(kube(t), user, groups, &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource, Name: name})
		require.NoError(t, err)
		return ok
	}
}

// allowed asks the API server (SubjectAccessReview) whether user, in
// groups, may make the call attrs describes.
func allowed(client kubernetes.Interface, user string, groups []string, attrs *authorizationv1.ResourceAttributes) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: attrs}}
	res, err := client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return res.Status.Allowed, nil
}

// TestRoleAsAuthorized asks the API server (SubjectAccessReview, RBAC) what
// the chart's ServiceAccount may do once the manifests are applied.
func TestRoleAsAuthorized(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := ensureApplied(t, c)
			refresh := rbacConfigOf(t, ms, c).ApplicationSetRefresh.Enabled
			can := authorizer(t, c)
			for _, v := range reconcilerSecretVerbs {
				assert.True(t, can(v, "", "secrets", c.argocdNS, ""), "secrets %s in Argo CD's namespace", v)
			}
			assert.True(t, can("create", "coordination.k8s.io", "leases", c.argocdNS, ""))
			assert.True(t, can("update", "coordination.k8s.io", "leases", c.argocdNS, "argocd-cluster-discovery"))
			for _, v := range []string{"get", "list", "watch", "patch"} {
				assert.Equal(t, refresh, can(v, "argoproj.io", "applicationsets", c.argocdNS, ""), "applicationsets %s only with the refresh trigger", v)
			}
			assertLedgerAllowed(t, can, c.ns)

			denied := []struct{ verb, group, resource, ns, name string }{
				{"list", "", "secrets", "", ""}, // cluster-wide
				{"get", "", "secrets", "kube-system", "x"},
				{"list", "", "secrets", "default", ""},
				{"patch", "", "secrets", c.argocdNS, "x"},
				{"deletecollection", "", "secrets", c.argocdNS, ""},
				{"get", "", "configmaps", c.argocdNS, "argocd-cm"},
				{"update", "coordination.k8s.io", "leases", c.argocdNS, "58ac56fa.applicationsets.argoproj.io"}, // Argo CD's own lease
				{"delete", "coordination.k8s.io", "leases", c.argocdNS, "argocd-cluster-discovery"},
				{"delete", "argoproj.io", "applicationsets", c.argocdNS, "x"},
				{"create", "argoproj.io", "applications", c.argocdNS, ""},
				{"patch", "argoproj.io", "applicationsets", "other", "x"},
				{"list", "", "pods", c.ns, ""},
				{"update", "multicluster.x-k8s.io", "clusterprofiles", c.ns, "x"},
				{"deletecollection", "multicluster.x-k8s.io", "clusterprofiles", c.ns, ""},
				{"update", "multicluster.x-k8s.io", "clusterprofiles/status", c.ns, "x"},
				{"list", "multicluster.x-k8s.io", "clusterprofiles", "", ""}, // cluster-wide
				{"list", "multicluster.x-k8s.io", "clusterprofiles", "other", ""},
				{"get", "", "configmaps", c.ns, release + "-config"},
				{"patch", "", "configmaps", c.ns, release},
				{"delete", "", "configmaps", c.ns, release + "-ledger"},
				{"update", "", "configmaps", c.ns, release + "-ledger"},
				{"list", "", "configmaps", "other", ""},
				{"list", "", "configmaps", c.ns, ""}, // every ConfigMap of the namespace
				{"watch", "", "configmaps", c.ns, ""},
			}
			if c.ns != c.argocdNS {
				denied = append(denied, []struct{ verb, group, resource, ns, name string }{
					{"get", "", "secrets", c.ns, "x"},
					{"list", "multicluster.x-k8s.io", "clusterprofiles", c.argocdNS, ""},
					{"list", "", "configmaps", c.argocdNS, ""},
				}...)
			}
			// the informer cache watches our cluster Secrets, and the refresh
			// trigger's the ApplicationSets, in Argo CD's namespace only
			assert.True(t, can("watch", "", "secrets", c.argocdNS, ""), "watch secrets: the reconciler's informer cache")
			if refresh {
				assert.True(t, can("update", "coordination.k8s.io", "leases", c.argocdNS, "argocd-cluster-discovery-appset-refresh"))
			}
			for _, d := range denied {
				assert.False(t, can(d.verb, d.group, d.resource, d.ns, d.name), "%s %s/%s in %q must be denied", d.verb, d.group, d.resource, d.ns)
			}
		})
	}
}

// TestReconcilerRunsUnderChartRBAC runs the real cluster Secret reconciler,
// leader election and an ApplicationSet refresh patch as the chart's
// ServiceAccount (impersonated): the Role is enough, not only not too much.
func TestReconcilerRunsUnderChartRBAC(t *testing.T) {
	c := caseNamed(t, "rancher") // the release and Argo CD in different namespaces, the refresh trigger on
	require.NotEqual(t, c.ns, c.argocdNS)
	ms := ensureApplied(t, c)
	raw, _ := configOf(t, ms, c)
	cfg, err := parseRenderedConfig(t, raw, "/")
	require.NoError(t, err)

	user, groups := serviceAccount(c)
	asSA := rest.CopyConfig(restConfig)
	asSA.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	saKube := kubernetes.NewForConfigOrDie(asSA)
	ctx := context.Background()

	// a static source behind a real inventory
	inv, write := staticInventory(t)

	rc := cfg.Secrets.Reconciler()
	rc.Policy = clustersecret.PolicySync
	rc.Prune = clustersecret.PruneOptions{AfterListings: 1, MaxDeletions: 5, MaxDeletionsPercent: 100}
	// as the service runs it: from the shared informer cache, which needs
	// list and watch with the chart's Role
	secretsInformer := clustersecret.NewInformer(saKube, c.argocdNS)
	informerCtx, stopInformer := context.WithCancel(ctx)
	defer stopInformer()
	secretsInformer.Start(informerCtx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), secretsInformer.HasSynced), "the cache of cluster Secrets synced with the chart's Role")
	rec, err := clustersecret.New(rc, saKube, inv, nil, nil, clustersecret.WithInformer(secretsInformer))
	require.NoError(t, err)
	owned := func() []string { return ownedSecrets(t, c.argocdNS, cfg.Secrets.OwnerID) }

	_, err = rec.Pass(ctx) // create, from the (empty) cache
	require.NoError(t, err)
	one, two := clustersecret.SecretName("cluster", "fleet", "one", "one"), clustersecret.SecretName("cluster", "fleet", "two", "two")
	assert.Equal(t, []string{one, two}, owned())

	write("one-moved") // cluster one moves to a new server (update), two leaves (delete) ...
	require.NoError(t, inv.RefreshAll(ctx))
	deadline := time.Now().Add(10 * time.Second)
	for { // ... and delete (policy sync, departure confirmed after one complete listing without it here)
		_, err = rec.Pass(ctx)
		require.NoError(t, err)
		if len(owned()) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, inv.RefreshAll(ctx))
	}
	assert.Equal(t, []string{one}, owned())
	s, err := kube(t).CoreV1().Secrets(c.argocdNS).Get(ctx, one, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "https://one-moved.example.com", string(s.Data["server"]))

	// leader election on the chart's Lease
	leaseHeldAs(t, rec, saKube, c.argocdNS, cfg.Secrets.LeaderElection.LeaseName)

	// the refresh trigger's calls on an ApplicationSet of Argo CD's namespace
	refreshPatchedAs(t, asSA, c.argocdNS)
}

// staticInventory is a static source (clusters.yaml in a temporary
// directory, listing clusters one and two) behind a real inventory,
// refreshed once, and the function that rewrites its file: a cluster per
// server, named after the first label of the server's host.
func staticInventory(t *testing.T) (*inventory.Inventory, func(servers ...string)) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	write := func(servers ...string) { // cluster name = first label of the server's host
		s := "clusters:\n"
		for _, srv := range servers {
			n := strings.SplitN(srv, "-", 2)[0]
			s += fmt.Sprintf("  - {name: %s, server: 'https://%s.example.com', tenant: acme, auth: {aws: {clusterName: %s}}}\n", n, srv, n)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "clusters.yaml"), []byte(s), 0o600))
	}
	write("one", "two")
	src, err := static.New(static.Config{File: "clusters.yaml"}, dir)
	require.NoError(t, err)
	inv, err := inventory.New([]inventory.SourceSpec{{Name: "fleet", Provider: sources.ProviderStatic, Source: src,
		Interval: time.Hour, Timeout: 5 * time.Second}}, inventory.Options{Departure: inventory.Departure{AfterListings: 1, GracePeriod: -1, MaxFraction: 1}})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(ctx))
	return inv, write
}

// ownedSecrets are the names of the Secrets of namespace ns that owner
// owns, sorted.
func ownedSecrets(t *testing.T, ns, owner string) []string {
	t.Helper()
	ctx := context.Background()
	l, err := kube(t).CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: clustersecret.LabelOwner + "=" + owner})
	require.NoError(t, err)
	var out []string
	for _, s := range l.Items {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

// leaseHeldAs runs the reconciler's leader election as the ServiceAccount
// (saKube) on the Lease leaseName of namespace ns: the Lease must be
// created, acquired and renewed.
func leaseHeldAs(t *testing.T, rec *clustersecret.Reconciler, saKube kubernetes.Interface, ns, leaseName string) {
	t.Helper()
	ctx := context.Background()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rec.RunLeading(runCtx, saKube, lease.Config{Name: leaseName, Identity: "chart-test",
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond})
	}()
	var renewed bool
	var first *metav1.MicroTime
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end) && !renewed; time.Sleep(100 * time.Millisecond) {
		l, err := kube(t).CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "chart-test" || l.Spec.RenewTime == nil {
			continue
		}
		if first == nil {
			first = l.Spec.RenewTime // created and acquired
		} else if !l.Spec.RenewTime.Equal(first) {
			renewed = true // renewed: get + update
		}
	}
	cancel()
	<-done
	assert.NotNil(t, first, "the Lease was created and acquired as the ServiceAccount")
	assert.True(t, renewed, "the Lease was renewed as the ServiceAccount")
}

// refreshPatchedAs makes the refresh trigger's calls on an example
// ApplicationSet applied in namespace ns as the ServiceAccount (asSA): list,
// get and the refresh patch succeed, a delete is refused.
func refreshPatchedAs(t *testing.T, asSA *rest.Config, ns string) {
	t.Helper()
	ctx := context.Background()
	as := withNamespace(t, readExample(t, "applicationset-per-tenant.yaml").one(t, "ApplicationSet"), ns)
	applyObjects(t, manifests{as})
	saDyn := dynamic.NewForConfigOrDie(asSA)
	res := saDyn.Resource(applicationSetGVR).Namespace(ns)
	l, err := res.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.True(t, slices.ContainsFunc(l.Items, func(i unstructured.Unstructured) bool { return i.GetName() == as.GetName() }))
	_, err = res.Get(ctx, as.GetName(), metav1.GetOptions{})
	require.NoError(t, err)
	patched, err := res.Patch(ctx, as.GetName(), types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"argocd.argoproj.io/application-set-refresh":"true"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", patched.GetAnnotations()["argocd.argoproj.io/application-set-refresh"])
	err = res.Delete(ctx, as.GetName(), metav1.DeleteOptions{})
	require.Error(t, err, "the ServiceAccount cannot delete ApplicationSets")
}

// TestRefreshRBACAheadOfTheTrigger: rbac.applicationSetRefresh grants with
// the refresh trigger off what the trigger needs once turned on through
// the configuration alone: the same Role in Argo CD's namespace as with it
// on (its Lease and, without cluster Secrets, the watch on them included).
func TestRefreshRBACAheadOfTheTrigger(t *testing.T) {
	for _, secrets := range []string{"true", "false"} {
		t.Run("secrets "+secrets, func(t *testing.T) {
			c := chartCase{name: "refresh-ahead-secrets-" + secrets, ns: "refresh-ahead-discovery", argocdNS: "refresh-ahead-argocd",
				set: []string{"--set", "config.secrets.enabled=" + secrets}}
			rulesWith := func(extra ...string) []rbacv1.PolicyRule {
				d, ok := render(t, c, extra...).find("Role", c.argocdNS, release)
				require.True(t, ok, "a Role in Argo CD's namespace")
				return into[rbacv1.Role](t, d).Rules
			}
			on := rulesWith("--set", "config.applicationSetRefresh.enabled=true")
			ahead := rulesWith("--set", "rbac.applicationSetRefresh=true")
			assert.Equal(t, on, ahead)
		})
	}
}
