package e2e

import (
	"bytes"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/authn"
)

// cloudConnectCase is a Secret of the cloud deployment, as written or
// with one credential input changed, and what Argo CD's code, the
// apiserver's webhook and the clouds' token services make of it.
type cloudConnectCase struct {
	name, cluster string
	// exec: the Secret `discover --secrets` renders with EKS auth mode
	// exec, not the deployment's
	exec bool
	// edit changes the Secret's config; nil: the Secret as written
	edit func(t *testing.T, config map[string]any)
	kind string // "": ok
	// decision is in the webhook's one decision on the token, which for
	// an ok case names the Secret's cluster; "": the webhook is not asked
	decision string
	// cloudCall is in what STS or Entra ID was asked or answered
	cloudCall string
}

// secretsConnect proves that every EKS and AKS Secret the deployment
// wrote authenticates through Argo CD's own code (argocd-cluster-check:
// SecretToCluster, RESTConfig, which runs the real argocd-k8s-auth), at
// the server and with the CA the Secret names (the ClusterFront, reached
// through the proxy), with credentials from the fake STS (IRSA, then
// AssumeRole into the account's role or the cluster's own from its tag)
// and the fake Entra ID (workload identity: the federated token exchanged
// for a token of the cluster's tenant and server application). The
// apiserver plays the four clusters: its webhook judges a token as the
// cluster at whose address it was presented would, and only as that one.
// A wrong input fails as the cloud would make it fail.
func secretsConnect(t *testing.T, c *CloudEnv) {
	pod := NewPodIdentity(t, EKSOIDCIssuer) // the controller runs on EKS
	sts := NewIssuingSTS(t)
	sts.Allow(true, CloudAccountRole, cloudPlatformRole) // and remembers the keys it issues for them
	entra := NewFakeEntra(t, pod)
	stsAddr := sts.Server.Listener.Addr().String()
	proxy := NewConnectProxy(t,
		ProxyRoute{Pattern: "sts.amazonaws.com", Addr: stsAddr},
		ProxyRoute{Pattern: "sts.*.amazonaws.com", Addr: stsAddr},
		ProxyRoute{Pattern: EntraHost, Addr: entra.Addr()},
		ProxyRoute{Pattern: "*.gr7." + CloudAWSRegion + ".eks.amazonaws.com", Addr: c.Front.Addr()},
		ProxyRoute{Pattern: "*.hcp.westeurope.azmk8s.io", Addr: c.Front.Addr()})
	secrets, err := c.Secrets()
	if err != nil {
		t.Fatal(err)
	}
	hostCluster := map[string]string{} // API server host → cluster
	for name, s := range secrets {
		if u, err := url.Parse(string(s.Data["server"])); err == nil {
			hostCluster[strings.ToLower(u.Hostname())] = name
		}
	}
	t.Cleanup(e.CloudAuthn.TrustEKS(sts.CallerIdentity, eksPayments.Name, eksPlatform.Name))
	t.Cleanup(e.CloudAuthn.TrustEntra(entra.PublicKey(), map[authn.AKSIdentity]string{
		{Tenant: EntraHomeTenant, ServerApp: AKSManagedServerApp}:      aksPayments.Name,
		{Tenant: EntraLighthouseTenant, ServerApp: AKSLegacyServerApp}: aksSandbox.Name,
	}))
	t.Cleanup(e.CloudAuthn.RouteBy(func(token string) (string, bool) {
		host, ok := c.Front.HostOf(token)
		cluster, known := hostCluster[host]
		return cluster, ok && known
	}))
	// what Argo CD's controller pod has: what EKS's pod identity webhook
	// injects for IRSA and what Azure's workload identity webhook injects;
	// the proxy last, for both
	env := append(sts.IRSAEnv(t, pod), entra.Env(t, proxy)...)
	version, err := e.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}

	execSecrets := execSecrets(t, c)
	for _, cc := range cloudConnectCases(OtherCA(t)) {
		t.Run(cc.name, func(t *testing.T) {
			s, ok := secrets[cc.cluster]
			if cc.exec {
				s, ok = execSecrets[cc.cluster]
			}
			if !ok {
				t.Fatalf("no Secret for %s among %v", cc.cluster, Names(secrets))
			}
			r := cc.run(t, c.Front, EditConfig(t, &s, cc.edit), sts, entra, env)
			if cc.kind == "" && r.Version != version.GitVersion {
				t.Errorf("version %q, want the apiserver's %s", r.Version, version.GitVersion)
			}
		})
	}
	if refused := ContainsSubstring(proxy.Seen(), "refused"); refused {
		t.Errorf("the proxy was asked for other hosts: %q", proxy.Seen())
	}
}

// cloudConnectCases are the Secrets as written, then one per credential
// input with a wrong value; otherCA is a CA (base64 PEM) no cluster uses.
func cloudConnectCases(otherCA string) []cloudConnectCase {
	home, lighthouse := "tenant "+EntraHomeTenant, "tenant "+EntraLighthouseTenant
	// the controller, under IRSA; its GetCallerIdentity goes to the
	// regional STS (AWS_STS_REGIONAL_ENDPOINTS=regional)
	irsaCaller := "arn:aws:sts::" + EKSAccount + ":assumed-role/argocd-controller/"
	gci := "GetCallerIdentity at " + authn.STSHost(CloudAWSRegion) + " for "
	setEnv := func(k, v string) func(*testing.T, map[string]any) {
		return func(t *testing.T, config map[string]any) {
			env := MapAt(t, config, "execProviderConfig", "env")
			if v == "" {
				delete(env, k)
			} else {
				env[k] = v
			}
		}
	}
	setArg := func(flag, value string) func(*testing.T, map[string]any) {
		return func(t *testing.T, config map[string]any) {
			args, _ := MapAt(t, config, "execProviderConfig")["args"].([]any)
			for i := range args {
				if args[i] == flag && i+1 < len(args) {
					args[i+1] = value
					return
				}
			}
			t.Fatalf("execProviderConfig has no %s: %v", flag, args)
		}
	}
	set := func(value any, path ...string) func(*testing.T, map[string]any) {
		return func(t *testing.T, config map[string]any) {
			MapAt(t, config, path[:len(path)-1]...)[path[len(path)-1]] = value
		}
	}
	return []cloudConnectCase{
		{name: "eks-payments as written: the account's role", cluster: eksPayments.Name,
			decision: ":assumed-role/argocd-deployer/", cloudCall: "AssumeRole " + CloudAccountRole + " by " + irsaCaller},
		{name: "eks-platform as written: its own role, from its tag", cluster: eksPlatform.Name,
			decision: ":assumed-role/argocd-platform/", cloudCall: gci + eksPlatform.Name + ": arn:aws:sts::" + CloudAWSAccount + ":assumed-role/argocd-platform/"},
		{name: "aks-payments as written: AKS-managed Entra ID, its tenant", cluster: aksPayments.Name,
			decision:  "(" + home + ", server application " + AKSManagedServerApp + ")",
			cloudCall: "token for " + AKSManagedServerApp + " in " + EntraHomeTenant},
		{name: "aks-sandbox as written: legacy Entra ID, its server application, its Lighthouse tenant", cluster: aksSandbox.Name,
			decision:  "(" + lighthouse + ", server application " + AKSLegacyServerApp + ")",
			cloudCall: "token for " + AKSLegacyServerApp + " in " + EntraLighthouseTenant},
		{name: "eks-payments with eks-platform's clusterName: unauthorized", cluster: eksPayments.Name, kind: "unauthorized",
			edit:     set(eksPlatform.Name, "awsAuthConfig", "clusterName"),
			decision: "signature does not match", cloudCall: gci + eksPayments.Name + " refused: SignatureDoesNotMatch"},
		{name: "aks-payments with another tenant: unauthorized", cluster: aksPayments.Name, kind: "unauthorized",
			edit:      setEnv("AZURE_TENANT_ID", EntraLighthouseTenant),
			decision:  "no cluster of " + lighthouse + " accepts audience [" + AKSManagedServerApp + "]",
			cloudCall: "token for " + AKSManagedServerApp + " in " + EntraLighthouseTenant},
		{name: "aks-payments with aks-sandbox's tenant and server application: unauthorized", cluster: aksPayments.Name, kind: "unauthorized",
			edit: func(t *testing.T, config map[string]any) {
				setEnv("AZURE_TENANT_ID", EntraLighthouseTenant)(t, config)
				setEnv("AAD_SERVER_APPLICATION_ID", AKSLegacyServerApp)(t, config)
			},
			decision:  "presented at " + aksPayments.Name,
			cloudCall: "token for " + AKSLegacyServerApp + " in " + EntraLighthouseTenant},
		{name: "aks-sandbox with the AKS server application (the default): unauthorized", cluster: aksSandbox.Name, kind: "unauthorized",
			edit:      setEnv("AAD_SERVER_APPLICATION_ID", ""),
			decision:  "no cluster of " + lighthouse + " accepts audience [" + AKSManagedServerApp + "]",
			cloudCall: "token for " + AKSManagedServerApp + " in " + EntraLighthouseTenant},
		{name: "aks-sandbox without its tenant (the pod's): Entra refuses the token", cluster: aksSandbox.Name, kind: "other",
			edit:      setEnv("AZURE_TENANT_ID", ""),
			cloudCall: "refused " + AKSLegacyServerApp + " in " + EntraHomeTenant + ": AADSTS500011"},
		{name: "aks-payments with another client id: Entra refuses the token", cluster: aksPayments.Name, kind: "other",
			edit:      setEnv("AZURE_CLIENT_ID", "00000000-0000-4000-8000-000000000001"),
			cloudCall: "refused " + AKSManagedServerApp + " in " + EntraHomeTenant + ": AADSTS700016"},
		{name: "eks-payments, auth mode exec: argocd-k8s-auth aws in an execProviderConfig, with AWS_REGION", cluster: eksPayments.Name, exec: true,
			decision: ":assumed-role/argocd-deployer/", cloudCall: gci + eksPayments.Name + ": arn:aws:sts::" + CloudAWSAccount + ":assumed-role/argocd-deployer/"},
		{name: "eks-platform, auth mode exec: its own role", cluster: eksPlatform.Name, exec: true,
			decision: ":assumed-role/argocd-platform/", cloudCall: gci + eksPlatform.Name + ": arn:aws:sts::" + CloudAWSAccount + ":assumed-role/argocd-platform/"},
		{name: "eks-payments, auth mode exec, with eks-platform's --cluster-name: unauthorized", cluster: eksPayments.Name, exec: true,
			kind: "unauthorized", edit: setArg("--cluster-name", eksPlatform.Name),
			decision: "signature does not match", cloudCall: gci + eksPayments.Name + " refused: SignatureDoesNotMatch"},
		{name: "eks-platform with another CA: x509, no request sent", cluster: eksPlatform.Name, kind: "x509",
			edit:      set(otherCA, "tlsClientConfig", "caData"),
			cloudCall: "AssumeRole " + cloudPlatformRole},
	}
}

func (cc cloudConnectCase) run(t *testing.T, front *ClusterFront, s *corev1.Secret, sts *IssuingSTS, entra *FakeEntra, env []string) ConnectResult {
	reviewed, assumed, issued := len(e.CloudAuthn.Seen()), len(sts.Seen()), len(entra.Seen())
	u, err := url.Parse(string(s.Data["server"]))
	if err != nil {
		t.Fatal(err)
	}
	served := front.Served(u.Hostname())
	r := ArgoCDConnectWith(t, s, 0, env...)
	reviews := e.CloudAuthn.Seen()[reviewed:]
	calls := slices.Concat(sts.Seen()[assumed:], entra.Seen()[issued:])
	t.Logf("webhook: %q; STS and Entra: %q", reviews, calls)
	switch {
	case cc.kind == "" && !r.OK:
		t.Errorf("got %+v, want ok", r)
	case cc.kind != "" && (r.OK || r.Kind != cc.kind):
		t.Errorf("got %+v, want not ok, kind %s", r, cc.kind)
	}
	// one decision line says it all: ok for the Secret's cluster, or why not
	decided := func(line string) bool {
		if cc.kind == "" {
			return strings.HasPrefix(line, "authenticated ") && strings.Contains(line, cc.decision) && strings.Contains(line, " at "+cc.cluster)
		}
		return strings.HasPrefix(line, "unauthenticated: ") && strings.Contains(line, cc.decision)
	}
	if cc.decision != "" && !AnyOf(reviews, decided) || cc.decision == "" && len(reviews) > 0 {
		t.Errorf("the webhook decided %q, want %q (at %s)", reviews, cc.decision, cc.cluster)
	}
	if !ContainsSubstring(calls, cc.cloudCall) {
		t.Errorf("STS and Entra were asked %q, want %q", calls, cc.cloudCall)
	}
	if cc.decision != "" && front.Served(u.Hostname()) == served {
		t.Errorf("no request reached %s", u.Hostname())
	}
	checkNoCredential(t, r.Output, sts)
	return r
}

// execSecrets are the Secrets `discover --secrets` renders for the EKS
// clusters with auth mode exec, by cluster: the deployment's
// configuration and fakes, an execProviderConfig instead of awsAuthConfig.
func execSecrets(t *testing.T, c *CloudEnv) map[string]corev1.Secret {
	t.Helper()
	// the deployment's configuration, its EKS source in auth mode exec
	const ttl = "      describeTTL: 100ms\n"
	config := strings.Replace(c.Config(), ttl, ttl+"      auth: {mode: exec}\n", 1)
	if !strings.Contains(config, "auth: {mode: exec}") {
		t.Fatal("the cloud configuration has no EKS describeTTL line to add the auth mode after")
	}
	file, empty := filepath.Join(c.Dir, "config-exec.yaml"), filepath.Join(c.Dir, "aws-empty")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.Binary, "discover", "--config", file, "--secrets")
	cmd.Env = append(append(ToolEnviron(), "KUBECONFIG="+e.Kubeconfig), c.ServiceEnv(empty)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("discover --secrets: %v\n%s", err, &stderr)
	}
	secrets := map[string]corev1.Secret{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var s corev1.Secret
		if strings.TrimSpace(doc) == "" {
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
			t.Fatalf("discover --secrets printed %v:\n%s", err, doc)
		}
		s.Data = map[string][]byte{}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
		secrets[s.Annotations[clustersecret.AnnotationCluster]] = s
	}
	for _, name := range []string{eksPayments.Name, eksPlatform.Name} {
		if cfg := string(secrets[name].Data["config"]); !strings.Contains(cfg, `"execProviderConfig"`) || !strings.Contains(cfg, `"AWS_REGION":"`+CloudAWSRegion+`"`) {
			t.Fatalf("discover --secrets: %s's config %s, want an execProviderConfig with AWS_REGION %s", name, cfg, CloudAWSRegion)
		}
	}
	return secrets
}

// checkNoCredential fails when output holds a token a cluster accepts or
// a secret STS issued.
func checkNoCredential(t *testing.T, output string, sts *IssuingSTS) {
	t.Helper()
	for _, secret := range append([]string{"k8s-aws-v1.", "eyJ", EKSIssuedSessionPrefix, EKSControllerSecret}, sts.Secrets()...) {
		if strings.Contains(output, secret) {
			t.Errorf("the tool's output holds a credential (%.12s…):\n%s", secret, output)
		}
	}
}
