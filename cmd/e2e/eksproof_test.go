package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/authn"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestEKSSecretAuthenticates proves that the EKS cluster Secret the
// service writes (awsAuthConfig with clusterName and roleARN, and the CA)
// authenticates through Argo CD's own code and the real argocd-k8s-auth
// against an apiserver that authenticates like EKS: argocd-cluster-check
// runs argocd-k8s-auth aws, which assumes the role at the fake STS with
// the controller's static keys and presigns GetCallerIdentity with the
// issued credentials; the apiserver's token webhook verifies that
// signature, for x-k8s-aws-id = the cluster's name, with the key STS
// issued, and answers with the assumed role's identity.
func TestEKSSecretAuthenticates(t *testing.T) {
	f := e.NewConnectFixture(t)
	sts := NewIssuingSTS(t)
	t.Cleanup(e.CloudAuthn.TrustEKS(sts.CallerIdentity, EKSClusterName))
	bindEKSGroup(t, "e2e-eks:e2e-eks-deployer")
	checkWebhookOnlyAfterOthers(t, f)

	for _, c := range eksCases() {
		t.Run(c.name, func(t *testing.T) { c.run(t, f, sts) })
	}
}

// eksCase is an EKS Secret and what argocd-cluster-check, the webhook and
// STS must make of it.
type eksCase struct {
	name, clusterName, role string
	kind                    string // "": ok
	decision                string // the webhook's, for the token; "": not asked
	timeout                 time.Duration
	output                  string // must show in the tool's output
}

func eksCases() []eksCase {
	return []eksCase{
		{name: "the service's Secret: ok", clusterName: EKSClusterName, role: EKSDeployerRole,
			decision: "authenticated arn:aws:sts::" + EKSAccount + ":assumed-role/e2e-eks-deployer/"},
		{name: "no roleARN: ok as the controller's own identity", clusterName: EKSClusterName,
			decision: "authenticated " + EKSControllerARN},
		{name: "another clusterName: unauthorized", clusterName: "e2e-eks-other", role: EKSDeployerRole, kind: "unauthorized",
			decision: "signature does not match (another x-k8s-aws-id than " + EKSClusterName},
		// argocd-k8s-auth retries AssumeRole every 5 s for a minute, then
		// fails: the Secret fails (other) only after that minute
		{name: "a role STS refuses: other, after argocd-k8s-auth's minute of retries", clusterName: EKSClusterName,
			role: EKSRefusedRole, kind: "other", timeout: 80 * time.Second, output: "AccessDenied"},
		{name: "signed with a key STS did not issue: unauthorized", clusterName: EKSClusterName, role: EKSForgottenRole,
			kind: "unauthorized", decision: "not issued by STS"},
	}
}

func (c eksCase) run(t *testing.T, f ConnectFixture, sts *IssuingSTS) {
	reviewed, called := len(e.CloudAuthn.Seen()), len(sts.Seen())
	timeout := c.timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	r := ArgoCDConnectWith(t, eksSecret(t, f, c.clusterName, c.role), timeout, sts.Env(t)...)
	reviews, calls := e.CloudAuthn.Seen()[reviewed:], sts.Seen()[called:]
	t.Logf("webhook: %q; STS: %q", reviews, calls)
	switch {
	case c.kind == "" && (!r.OK || r.Version != f.Version):
		t.Errorf("got %+v, want ok and version %s", r, f.Version)
	case c.kind != "" && (r.OK || r.Kind != c.kind):
		t.Errorf("got %+v, want not ok, kind %s", r, c.kind)
	}
	if c.decision != "" && !ContainsSubstring(reviews, c.decision) || c.decision == "" && len(reviews) > 0 {
		t.Errorf("the webhook decided %q, want %q", reviews, c.decision)
	}
	// the webhook asked STS, as aws-iam-authenticator does, for every
	// token it did not refuse on its face, at the endpoint the Argo CD
	// version's argocd-k8s-auth presigns for (K8sAuthSTSHost)
	if gci := "GetCallerIdentity at " + K8sAuthSTSHost() + " for " + EKSClusterName; c.decision != "" && !ContainsSubstring(calls, gci) {
		t.Errorf("STS was asked %q, want %q", calls, gci)
	}
	// each AssumeRole signed with the controller's key; none without a
	// role (the webhook's GetCallerIdentity aside)
	assumed := "AssumeRole " + c.role + " by " + EKSControllerARN
	if c.role != "" && (!ContainsSubstring(calls, assumed) || ContainsSubstring(calls, "unverified ")) ||
		c.role == "" && ContainsSubstring(calls, "AssumeRole") {
		t.Errorf("STS was asked %q, want %q", calls, assumed)
	}
	if c.output != "" && !strings.Contains(r.Output, c.output) {
		t.Errorf("the tool's output lacks %q:\n%s", c.output, r.Output)
	}
	for _, secret := range []string{EKSControllerSecret, "e2e-eks-session-"} {
		if strings.Contains(r.Output, secret) {
			t.Errorf("the tool's output holds a credential:\n%s", r.Output)
		}
	}
}

// eksSecret is the Secret the service writes for an EKS cluster at the
// suite's apiserver.
func eksSecret(t *testing.T, f ConnectFixture, clusterName, role string) *corev1.Secret {
	t.Helper()
	ca, err := sources.ParsePEMCA(e.Rest.CAData)
	if err != nil {
		t.Fatal(err)
	}
	c := &sources.Cluster{Source: "eks", Provider: sources.ProviderEKS, Name: "e2e-eks", Server: f.Server, CA: ca,
		ID: "arn:aws:eks:" + K8sAuthRegion + ":" + EKSAccount + ":cluster/" + clusterName, Region: K8sAuthRegion, Account: EKSAccount,
		Auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: clusterName, RoleARN: role, Region: K8sAuthRegion}}}
	d, err := clustersecret.Build(c, &clustersecret.Options{Namespace: ArgoNS, OwnerID: OwnerID, Prefix: "cluster"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(d.Secret.Data["config"]), `"awsAuthConfig"`) {
		t.Fatalf("config %s has no awsAuthConfig", d.Secret.Data["config"])
	}
	return d.Secret
}

// bindEKSGroup binds the group to the view ClusterRole, as aws-auth's
// mapRoles and an RBAC binding do on EKS.
func bindEKSGroup(t *testing.T, group string) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-eks-view"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}}}
	if _, err := e.Kube.RbacV1().ClusterRoleBindings().Create(context.Background(), crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
}

// checkWebhookOnlyAfterOthers checks that the suite's other credentials
// still work and that the webhook is consulted only when the apiserver's
// own authenticators fail: not for the admin certificate nor a
// ServiceAccount token; for an unknown token, which it leaves
// unauthenticated.
func checkWebhookOnlyAfterOthers(t *testing.T, f ConnectFixture) {
	t.Helper()
	before := len(e.CloudAuthn.Seen())
	if _, err := e.Kube.Discovery().ServerVersion(); err != nil {
		t.Fatalf("admin certificate: %v", err)
	}
	if _, err := clientWithToken(t, f.Token).Discovery().ServerGroups(); err != nil {
		t.Fatalf("ServiceAccount token: %v", err)
	}
	if got := e.CloudAuthn.Seen()[before:]; len(got) > 0 {
		t.Errorf("the webhook was asked for the admin certificate or a ServiceAccount token: %q", got)
	}
	_, err := clientWithToken(t, "e2e-not-eks-"+RandomHex(8)).Discovery().ServerGroups()
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("an unknown token: %v, want unauthorized", err)
	}
	if got := e.CloudAuthn.Seen()[before:]; len(got) != 1 || got[0] != "unauthenticated: "+authn.ErrNotCloudToken.Error() {
		t.Errorf("for an unknown token the webhook decided %q, want one %q", got, authn.ErrNotCloudToken)
	}
}

func clientWithToken(t *testing.T, token string) kubernetes.Interface {
	t.Helper()
	cfg := rest.AnonymousClientConfig(e.Rest)
	cfg.BearerToken = token
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
