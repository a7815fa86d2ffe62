package agentsecrets

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testenv"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

var cfg *rest.Config

func TestMain(m *testing.M) { testenv.Main(m, "../..", &cfg) }

// The credentials in the Secrets' config: never to be seen again.
var credentials = []string{
	"Y2VydC1zZWNyZXQtYWxwaGE=", "a2V5LXNlY3JldC1hbHBoYQ==", "Y2Etc2VjcmV0LWFscGhh",
	"eyJhbGciOiJSUzI1NiJ9.c2VsZi1yZWdpc3RlcmVk.c2lnbmF0dXJl",
}

func admin(t *testing.T) kubernetes.Interface {
	t.Helper()
	kc, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return kc
}

// setup creates namespace ns and the Secrets in it.
func setup(t *testing.T, ns string, secrets ...*corev1.Secret) {
	t.Helper()
	kc, ctx := admin(t), context.Background()
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) { // a namespace is never deleted: envtest runs no namespace controller
		require.NoError(t, err)
	}
	for _, s := range secrets {
		_, err := kc.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { // so that the test can run again (-count) in the package's apiserver
			assert.NoError(t, kc.CoreV1().Secrets(ns).Delete(context.Background(), s.Name, metav1.DeleteOptions{}))
		})
	}
}

// agentctl is the Secret that `argocd-agentctl agent create <agent>` writes.
func agentctl(agent string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "cluster-" + agent,
			Labels:      map[string]string{"argocd.argoproj.io/secret-type": "cluster", sources.LabelAgentName: agent},
			Annotations: map[string]string{sources.AnnotationSkipReconcile: "true", sources.AnnotationAgentManagedBy: sources.AgentManager},
		},
		Data: map[string][]byte{
			"name":   []byte(agent),
			"server": []byte("https://argocd-agent-resource-proxy:9090?agentName=" + agent),
			"config": fmt.Appendf(nil, `{"tlsClientConfig":{"insecure":false,"certData":%q,"keyData":%q,"caData":%q}}`,
				credentials[0], credentials[1], credentials[2]),
		},
	}
}

func with(s *corev1.Secret, edit func(*corev1.Secret)) *corev1.Secret {
	edit(s)
	return s
}

// agents creates ns holding the agents' Secrets that want lists, and
// Secrets that are not agents'.
func agents(t *testing.T, ns string) {
	t.Helper()
	setup(t, ns,
		agentctl("alpha"),
		with(agentctl("beta"), func(s *corev1.Secret) {
			s.Annotations[sources.AnnotationTokenBinding] = " /subscriptions/S/resourceGroups/RG/providers/Microsoft.RedHatOpenShift/openShiftClusters/Beta\n"
		}),
		with(agentctl("gamma"), func(s *corev1.Secret) { // self-registered
			s.Labels[sources.LabelAgentSelfRegistered] = "true"
			s.Data["config"] = fmt.Appendf(nil, `{"bearerToken":%q,"tlsClientConfig":{"insecure":false,"caData":%q}}`, credentials[3], credentials[2])
		}),
		with(agentctl("delta"), func(s *corev1.Secret) {
			delete(s.Annotations, sources.AnnotationSkipReconcile)
			s.Data["server"] = []byte(" https://proxy.example:443/?agentName=delta ") // verbatim
		}),
		with(agentctl("epsilon"), func(s *corev1.Secret) { s.Annotations[sources.AnnotationSkipReconcile] = "yes" }),
		with(agentctl("omega"), func(s *corev1.Secret) { s.Name = "a-hand-written" }), // sorted by agent first
		with(agentctl("alpha"), func(s *corev1.Secret) { s.Name = "alpha-copy" }),
		with(agentctl("plain"), func(s *corev1.Secret) { delete(s.Labels, sources.LabelAgentName) }),
		with(agentctl("notcluster"), func(s *corev1.Secret) { s.Labels["argocd.argoproj.io/secret-type"] = "repository" }),
		with(agentctl("unlabelled"), func(s *corev1.Secret) { delete(s.Labels, "argocd.argoproj.io/secret-type") }),
	)
}

func want(agent, secret, server string, skip bool) sources.AgentSecret {
	return sources.AgentSecret{Agent: agent, Secret: secret, Name: agent, Server: server, SkipReconcile: skip}
}

func proxy(agent string) string { return "https://argocd-agent-resource-proxy:9090?agentName=" + agent }

func TestAgents(t *testing.T) {
	agents(t, "argocd")
	setup(t, "elsewhere", agentctl("zeta"))
	beta := want("beta", "cluster-beta", proxy("beta"), true)
	beta.ClusterID = "/subscriptions/s/resourcegroups/rg/providers/microsoft.redhatopenshift/openshiftclusters/beta"
	expected := []sources.AgentSecret{
		want("alpha", "alpha-copy", proxy("alpha"), true),
		want("alpha", "cluster-alpha", proxy("alpha"), true),
		beta,
		want("delta", "cluster-delta", " https://proxy.example:443/?agentName=delta ", false),
		want("epsilon", "cluster-epsilon", proxy("epsilon"), false),
		want("gamma", "cluster-gamma", proxy("gamma"), true),
		want("omega", "a-hand-written", proxy("omega"), true),
	}

	for _, page := range []int64{500, 2, 1} {
		t.Run(fmt.Sprintf("page size %d", page), func(t *testing.T) {
			var lists atomic.Int32
			c := rest.CopyConfig(cfg)
			c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				return roundTripper(func(r *http.Request) (*http.Response, error) {
					lists.Add(1)
					return rt.RoundTrip(r)
				})
			})
			l := New(func() (*rest.Config, error) { return c, nil }, "argocd")
			l.pageSize = page
			got, err := l.Agents(context.Background())
			require.NoError(t, err)
			assert.Equal(t, expected, got)
			assert.GreaterOrEqual(t, int(lists.Load()), (len(expected)+int(page)-1)/int(page), "one LIST per page")

			dump := fmt.Sprintf("%+v %#v", got, got)
			for _, secret := range append(credentials, "tlsClientConfig", "bearerToken") {
				assert.NotContains(t, dump, secret)
			}
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestAgentsNone(t *testing.T) {
	setup(t, "empty", with(agentctl("plain"), func(s *corev1.Secret) { delete(s.Labels, sources.LabelAgentName) }))
	got, err := New(func() (*rest.Config, error) { return cfg, nil }, "empty").Agents(context.Background())
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestAgentsErrors(t *testing.T) {
	t.Run("no Kubernetes API", func(t *testing.T) {
		calls := 0
		l := New(func() (*rest.Config, error) {
			calls++
			return nil, errors.New("in-cluster kubernetes config: not in a cluster")
		}, "argocd")
		for range 2 {
			got, err := l.Agents(context.Background())
			require.EqualError(t, err, "agent secrets: in-cluster kubernetes config: not in a cluster")
			assert.Nil(t, got)
		}
		assert.Equal(t, 1, calls, "the client is made once")
	})

	t.Run("forbidden", func(t *testing.T) {
		// reader may list the Secrets of "readable" only.
		agents(t, "forbidden")
		setup(t, "readable", agentctl("alpha"))
		ctx := context.Background()
		_, err := admin(t).RbacV1().Roles("readable").Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "list-secrets"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			assert.NoError(t, admin(t).RbacV1().Roles("readable").Delete(context.Background(), "list-secrets", metav1.DeleteOptions{}))
		})
		_, err = admin(t).RbacV1().RoleBindings("readable").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "list-secrets"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "list-secrets"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "reader"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			assert.NoError(t, admin(t).RbacV1().RoleBindings("readable").Delete(context.Background(), "list-secrets", metav1.DeleteOptions{}))
		})
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: "reader"}
		config := func() (*rest.Config, error) { return c, nil }

		// the API server's RBAC authorizer reads Roles and RoleBindings
		// from its own informers: the new binding holds once they have it
		var got []sources.AgentSecret
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got, err = New(config, "readable").Agents(ctx)
			assert.NoError(c, err)
		}, 10*time.Second, 50*time.Millisecond, "reader may list the Secrets of readable")
		assert.Equal(t, []sources.AgentSecret{want("alpha", "cluster-alpha", proxy("alpha"), true)}, got)

		got, err = New(config, "forbidden").Agents(ctx)
		require.Error(t, err)
		assert.Nil(t, got)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Contains(t, err.Error(), "agent secrets: list secrets in forbidden: ")
		for _, secret := range credentials {
			assert.NotContains(t, err.Error(), secret)
		}
	})

	t.Run("unauthenticated", func(t *testing.T) {
		c := rest.CopyConfig(cfg)
		c.BearerToken, c.CertData, c.KeyData, c.CertFile, c.KeyFile = "not-a-valid-token", nil, nil, "", ""
		got, err := New(func() (*rest.Config, error) { return c, nil }, "argocd").Agents(context.Background())
		require.Error(t, err)
		assert.Nil(t, got)
		assert.True(t, apierrors.IsUnauthorized(err), "%v", err)
		assert.Contains(t, err.Error(), "agent secrets: list secrets in argocd: ")
		assert.NotContains(t, err.Error(), "not-a-valid-token")
	})
}
