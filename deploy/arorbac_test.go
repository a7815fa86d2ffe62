package deploy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/agentsecrets"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/tokenbindings"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// aroCase is a release without cluster Secrets (config.secrets.enabled
// false) whose sources are aro ones, one per auth mode given, each listing
// its own subscription, with Argo CD in another namespace: what the
// sources read there is all the Role grants there. It is not in cases,
// whose every test expects cluster Secrets.
func aroCase(name string, auths ...string) chartCase {
	srcs := make([]string, len(auths))
	for i, a := range auths {
		srcs[i] = fmt.Sprintf(`{"name":"aro-%d","provider":"aro","aro":{"subscriptions":["00000000-0000-0000-0000-00000000010%d"],"auth":%q}}`, i, i, a)
	}
	return chartCase{name: name, ns: name + "-discovery", argocdNS: name + "-argocd",
		set: []string{"--set", "config.secrets.enabled=false", "--set-json", "config.sources=[" + strings.Join(srcs, ",") + "]"}}
}

// secretWrites are the verbs that change Secrets, and watch: none is
// needed to read the token bindings or the agents.
var secretWrites = []string{"watch", "create", "update", "patch", "delete", "deletecollection"}

// TestRoleForAROSourcesWithoutSecrets: without cluster Secrets, an aro
// source still reads Argo CD's namespace (the token Secrets bound to its
// clusters, or with auth agent the agents' cluster Secrets): the Role there
// grants exactly that, read only, and nothing when no source needs it.
// With cluster Secrets on, their rule covers these reads and no other rule
// is added (TestRoleIsNamespacedAndMinimal, case aro: Secret verbs exactly
// the reconciler's).
func TestRoleForAROSourcesWithoutSecrets(t *testing.T) {
	refresh := aroCase("aro-agent-refresh", "agent")
	refresh.set = append(refresh.set, "--set", "config.applicationSetRefresh.enabled=true")
	static := chartCase{name: "static-nosecrets", ns: "static-nosecrets-discovery", argocdNS: "static-nosecrets-argocd",
		set: []string{"--set", "config.secrets.enabled=false"}}
	for _, tc := range []struct {
		c    chartCase
		want []string // the Secret verbs granted in Argo CD's namespace, sorted; nil: no Role there at all
	}{
		{aroCase("aro-agent", "agent"), []string{"list"}},       // with data, one LIST
		{aroCase("aro-token", "bearerToken"), []string{"list"}}, // metadata only, one LIST
		{aroCase("aro-both", "bearerToken", "agent"), []string{"list"}},
		{refresh, []string{"list", "watch"}}, // the refresh trigger's list and watch, the agents' list
		{static, nil},
	} {
		t.Run(tc.c.name, func(t *testing.T) {
			c := tc.c
			ms := render(t, c)
			raw, _ := configOf(t, ms, c)
			cfg, err := parseRenderedConfig(t, raw, t.TempDir())
			require.NoError(t, err, "the service accepts the rendered configuration")
			require.False(t, cfg.Secrets.Enabled)
			assert.Equal(t, c.argocdNS, cfg.Secrets.Namespace, "the sources read Argo CD's namespace, where the Role is")

			sa := ms.one(t, "ServiceAccount")
			granted := map[string][]string{} // namespace → Secret verbs
			for _, d := range ms.all("Role") {
				role := into[rbacv1.Role](t, d)
				for _, r := range role.Rules {
					if !slices.Contains(r.APIGroups, "") || !slices.Contains(r.Resources, "secrets") {
						continue
					}
					assert.Equal(t, []string{""}, r.APIGroups)
					assert.Equal(t, []string{"secrets"}, r.Resources)
					assert.Empty(t, r.ResourceNames, "listed by label: no resourceNames")
					granted[role.Namespace] = append(granted[role.Namespace], r.Verbs...)
				}
			}
			if tc.want == nil {
				assert.Empty(t, granted, "no Secret rule without a source that reads Secrets")
				_, ok := ms.find("Role", c.argocdNS, release)
				assert.False(t, ok, "no Role in Argo CD's namespace: nothing to do there")
				return
			}
			require.Len(t, granted, 1, "Secrets in Argo CD's namespace only: %v", granted)
			verbs := slices.Compact(slices.Sorted(slices.Values(granted[c.argocdNS])))
			assert.Equal(t, tc.want, verbs)
			for _, v := range secretWrites {
				if v != "watch" || !slices.Contains(tc.want, "watch") {
					assert.NotContains(t, verbs, v)
				}
			}
			bd, ok := ms.find("RoleBinding", c.argocdNS, release)
			require.True(t, ok, "a RoleBinding in Argo CD's namespace")
			assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.GetName(), Namespace: c.ns}}, into[rbacv1.RoleBinding](t, bd).Subjects)
		})
	}
}

// TestAROSourcesWithoutSecretsAsAuthorized applies the releases of
// TestRoleForAROSourcesWithoutSecrets and asks the API server what their
// ServiceAccount may do with Secrets, then runs the listers the aro source
// uses as that ServiceAccount (impersonated): the Role is enough, and reads
// only.
func TestAROSourcesWithoutSecretsAsAuthorized(t *testing.T) {
	for _, tc := range []struct {
		c     chartCase
		agent bool
	}{
		{aroCase("aro-agent", "agent"), true},
		{aroCase("aro-token", "bearerToken"), false},
	} {
		t.Run(tc.c.name, func(t *testing.T) {
			c := tc.c
			ensureApplied(t, c)
			can := authorizer(t, c)
			assert.True(t, can("list", "", "secrets", c.argocdNS, ""), "list Secrets in Argo CD's namespace")
			assert.False(t, can("get", "", "secrets", c.argocdNS, "cluster-payments"), "no get: one LIST by label is all a listing reads")
			for _, v := range secretWrites {
				assert.False(t, can(v, "", "secrets", c.argocdNS, ""), "%s Secrets in Argo CD's namespace must be denied", v)
				assert.False(t, can(v, "", "secrets", c.argocdNS, "cluster-payments"), "%s an agent's Secret must be denied", v)
			}
			for _, d := range []struct{ verb, ns, name string }{
				{"list", "", ""}, // cluster-wide
				{"list", c.ns, ""},
				{"get", c.ns, "x"},
				{"list", "kube-system", ""},
				{"get", "kube-system", "x"},
			} {
				assert.False(t, can(d.verb, "", "secrets", d.ns, d.name), "%s Secrets in %q must be denied", d.verb, d.ns)
			}
			assert.False(t, can("list", "argoproj.io", "applicationsets", c.argocdNS, ""), "nothing else in Argo CD's namespace")
			assertLedgerAllowed(t, can, c.ns)

			// the listers, as the ServiceAccount, on Secrets an operator and
			// argocd-agentctl would have written
			ctx := context.Background()
			const clusterID = "/subscriptions/00000000-0000-0000-0000-000000000100/resourcegroups/rg/providers/microsoft.redhatopenshift/openshiftclusters/payments"
			agentSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: sources.AgentSecretPrefix + "payments", Namespace: c.argocdNS,
				Labels:      map[string]string{"argocd.argoproj.io/secret-type": "cluster", sources.LabelAgentName: "payments"},
				Annotations: map[string]string{sources.AnnotationSkipReconcile: "true", sources.AnnotationTokenBinding: clusterID}},
				StringData: map[string]string{"name": "payments", "server": "https://principal.example.com:8443?agentName=payments", "config": `{"tlsClientConfig":{}}`}}
			tokenSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "aro-payments-token", Namespace: c.argocdNS,
				Labels:      map[string]string{sources.LabelTokenBinding: string(sources.ProviderARO)},
				Annotations: map[string]string{sources.AnnotationTokenBinding: clusterID}},
				StringData: map[string]string{"token": "not-a-real-token"}}
			for _, s := range []*corev1.Secret{agentSecret, tokenSecret} {
				_, err := kube(t).CoreV1().Secrets(c.argocdNS).Create(ctx, s, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			user, groups := serviceAccount(c)
			asSA := rest.CopyConfig(restConfig)
			asSA.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
			saConfig := func() (*rest.Config, error) { return asSA, nil }
			if tc.agent {
				agents, err := agentsecrets.New(saConfig, c.argocdNS).Agents(ctx)
				require.NoError(t, err, "the agents' Secrets are listed with the chart's Role")
				require.Len(t, agents, 1)
				a := agents[0]
				assert.Equal(t, []string{"payments", agentSecret.Name, "payments", agentSecret.StringData["server"], clusterID},
					[]string{a.Agent, a.Secret, a.Name, a.Server, a.ClusterID})
				assert.True(t, a.SkipReconcile)
			} else {
				bound, err := tokenbindings.New(saConfig, c.argocdNS).Bound(ctx, sources.ProviderARO)
				require.NoError(t, err, "the token bindings are listed with the chart's Role")
				assert.Equal(t, map[string][]string{clusterID: {tokenSecret.Name}}, bound)
				_, err = kubernetes.NewForConfigOrDie(asSA).CoreV1().Secrets(c.argocdNS).Get(ctx, tokenSecret.Name, metav1.GetOptions{})
				require.Error(t, err, "no get: the token itself is not read without cluster Secrets")
			}
			saKube := kubernetes.NewForConfigOrDie(asSA).CoreV1().Secrets(c.argocdNS)
			patched := agentSecret.DeepCopy()
			patched.Annotations[sources.AnnotationTokenBinding] = "/subscriptions/x"
			_, err := saKube.Update(ctx, patched, metav1.UpdateOptions{})
			require.Error(t, err, "the ServiceAccount cannot update an agent's Secret")
			err = saKube.Delete(ctx, agentSecret.Name, metav1.DeleteOptions{})
			require.Error(t, err, "the ServiceAccount cannot delete an agent's Secret")
			_, err = saKube.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cluster-other", Namespace: c.argocdNS}}, metav1.CreateOptions{})
			require.Error(t, err, "the ServiceAccount cannot create a Secret")
		})
	}
}

// TestInventoryLeaseWithoutSecrets: without cluster Secrets, under leader
// election (the default) only the leader lists the sources and writes the
// ledger, and it takes its Lease in the ledger's namespace. The chart's
// Role there lets the ServiceAccount take and renew it (impersonated, with
// the Lease the service would use); before, no replica could lead and every
// answer stayed a 503.
func TestInventoryLeaseWithoutSecrets(t *testing.T) {
	c := chartCase{name: "static-nosecrets", ns: "static-nosecrets-discovery", argocdNS: "static-nosecrets-argocd",
		set: []string{"--set", "config.secrets.enabled=false"}}
	ms := ensureApplied(t, c)
	raw, _ := configOf(t, ms, c)
	cfg, err := parseRenderedConfig(t, raw, t.TempDir())
	require.NoError(t, err)
	require.True(t, cfg.Secrets.LeaderElection.Enabled, "leader election is the chart's default")
	require.Equal(t, c.ns, cfg.EffectiveLedgerNamespace(), "the ledger lives in the release's namespace")

	user, groups := serviceAccount(c)
	asSA := rest.CopyConfig(restConfig)
	asSA.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	led, once := make(chan struct{}), sync.Once{}
	done := make(chan error, 1)
	go func() {
		done <- lease.RunLeading(ctx, kubernetes.NewForConfigOrDie(asSA).CoordinationV1(), lease.Config{
			Namespace: cfg.EffectiveLedgerNamespace(), Name: cfg.Secrets.LeaderElection.LeaseName, Identity: "chart-test",
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
		}, func(bool) {}, func(context.Context) { once.Do(func() { close(led) }) })
	}()
	select {
	case <-led:
	case err := <-done:
		require.Failf(t, "the Lease was not taken as the ServiceAccount", "%v", err)
	case <-time.After(15 * time.Second):
		require.Fail(t, "the Lease was not taken as the ServiceAccount within 15 s")
	}
	cancel()
	require.NoError(t, <-done)
	can := authorizer(t, c)
	assert.False(t, can("update", "coordination.k8s.io", "leases", c.ns, "other"), "only the service's Lease")
	assert.False(t, can("create", "coordination.k8s.io", "leases", c.argocdNS, ""), "nothing in Argo CD's namespace")
}
