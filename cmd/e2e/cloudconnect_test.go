package e2e

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

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
// the server and with the CA the Secret names (the clusterFront, reached
// through the proxy), with credentials from the fake STS (IRSA, then
// AssumeRole into the account's role or the cluster's own from its tag)
// and the fake Entra ID (workload identity: the federated token exchanged
// for a token of the cluster's tenant and server application). The
// apiserver plays the four clusters: its webhook judges a token as the
// cluster at whose address it was presented would, and only as that one.
// A wrong input fails as the cloud would make it fail.
func (c *cloudEnv) secretsConnect(t *testing.T) {
	pod := newPodIdentity(t, eksOIDCIssuer) // the controller runs on EKS
	sts := newIssuingSTS(t)
	sts.allow(cloudAccountRole, cloudPlatformRole)
	entra := newFakeEntra(t, pod)
	stsAddr := sts.sts.Listener.Addr().String()
	proxy := newConnectProxy(t,
		proxyRoute{Pattern: "sts.amazonaws.com", Addr: stsAddr},
		proxyRoute{Pattern: "sts.*.amazonaws.com", Addr: stsAddr},
		proxyRoute{Pattern: entraHost, Addr: entra.addr()},
		proxyRoute{Pattern: "*.gr7." + cloudAWSRegion + ".eks.amazonaws.com", Addr: c.front.addr()},
		proxyRoute{Pattern: "*.hcp.westeurope.azmk8s.io", Addr: c.front.addr()})
	secrets, err := c.secrets()
	if err != nil {
		t.Fatal(err)
	}
	hostCluster := map[string]string{} // API server host → cluster
	for name, s := range secrets {
		if u, err := url.Parse(string(s.Data["server"])); err == nil {
			hostCluster[strings.ToLower(u.Hostname())] = name
		}
	}
	t.Cleanup(e.cloudAuthn.TrustEKS(sts.callerIdentity, eksPayments.Name, eksPlatform.Name))
	t.Cleanup(e.cloudAuthn.TrustEntra(entra.PublicKey(), map[authn.AKSIdentity]string{
		{Tenant: entraHomeTenant, ServerApp: aksManagedServerApp}:      aksPayments.Name,
		{Tenant: entraLighthouseTenant, ServerApp: aksLegacyServerApp}: aksSandbox.Name,
	}))
	t.Cleanup(e.cloudAuthn.RouteBy(func(token string) (string, bool) {
		host, ok := c.front.hostOf(token)
		cluster, known := hostCluster[host]
		return cluster, ok && known
	}))
	// what Argo CD's controller pod has: what EKS's pod identity webhook
	// injects for IRSA and what Azure's workload identity webhook injects;
	// the proxy last, for both
	env := append(sts.irsaEnv(t, pod), entra.env(t, proxy)...)
	version, err := e.kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}

	execSecrets := c.execSecrets(t)
	for _, cc := range cloudConnectCases(otherCA(t)) {
		t.Run(cc.name, func(t *testing.T) {
			s, ok := secrets[cc.cluster]
			if cc.exec {
				s, ok = execSecrets[cc.cluster]
			}
			if !ok {
				t.Fatalf("no Secret for %s among %v", cc.cluster, names(secrets))
			}
			r := cc.run(t, c.front, editConfig(t, &s, cc.edit), sts, entra, env)
			if cc.kind == "" && r.Version != version.GitVersion {
				t.Errorf("version %q, want the apiserver's %s", r.Version, version.GitVersion)
			}
		})
	}
	if refused := containsSubstring(proxy.seen(), "refused"); refused {
		t.Errorf("the proxy was asked for other hosts: %q", proxy.seen())
	}
}

// cloudConnectCases are the Secrets as written, then one per credential
// input with a wrong value; otherCA is a CA (base64 PEM) no cluster uses.
func cloudConnectCases(otherCA string) []cloudConnectCase {
	home, lighthouse := "tenant "+entraHomeTenant, "tenant "+entraLighthouseTenant
	// the controller, under IRSA; its GetCallerIdentity goes to the
	// regional STS (AWS_STS_REGIONAL_ENDPOINTS=regional)
	irsaCaller := "arn:aws:sts::" + eksAccount + ":assumed-role/argocd-controller/"
	gci := "GetCallerIdentity at " + authn.STSHost(cloudAWSRegion) + " for "
	setEnv := func(k, v string) func(*testing.T, map[string]any) {
		return func(t *testing.T, config map[string]any) {
			env := mapAt(t, config, "execProviderConfig", "env")
			if v == "" {
				delete(env, k)
			} else {
				env[k] = v
			}
		}
	}
	setArg := func(flag, value string) func(*testing.T, map[string]any) {
		return func(t *testing.T, config map[string]any) {
			args, _ := mapAt(t, config, "execProviderConfig")["args"].([]any)
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
			mapAt(t, config, path[:len(path)-1]...)[path[len(path)-1]] = value
		}
	}
	return []cloudConnectCase{
		{name: "eks-payments as written: the account's role", cluster: eksPayments.Name,
			decision: ":assumed-role/argocd-deployer/", cloudCall: "AssumeRole " + cloudAccountRole + " by " + irsaCaller},
		{name: "eks-platform as written: its own role, from its tag", cluster: eksPlatform.Name,
			decision: ":assumed-role/argocd-platform/", cloudCall: gci + eksPlatform.Name + ": arn:aws:sts::" + cloudAWSAccount + ":assumed-role/argocd-platform/"},
		{name: "aks-payments as written: AKS-managed Entra ID, its tenant", cluster: aksPayments.Name,
			decision:  "(" + home + ", server application " + aksManagedServerApp + ")",
			cloudCall: "token for " + aksManagedServerApp + " in " + entraHomeTenant},
		{name: "aks-sandbox as written: legacy Entra ID, its server application, its Lighthouse tenant", cluster: aksSandbox.Name,
			decision:  "(" + lighthouse + ", server application " + aksLegacyServerApp + ")",
			cloudCall: "token for " + aksLegacyServerApp + " in " + entraLighthouseTenant},
		{name: "eks-payments with eks-platform's clusterName: unauthorized", cluster: eksPayments.Name, kind: "unauthorized",
			edit:     set(eksPlatform.Name, "awsAuthConfig", "clusterName"),
			decision: "signature does not match", cloudCall: gci + eksPayments.Name + " refused: SignatureDoesNotMatch"},
		{name: "aks-payments with another tenant: unauthorized", cluster: aksPayments.Name, kind: "unauthorized",
			edit:      setEnv("AZURE_TENANT_ID", entraLighthouseTenant),
			decision:  "no cluster of " + lighthouse + " accepts audience [" + aksManagedServerApp + "]",
			cloudCall: "token for " + aksManagedServerApp + " in " + entraLighthouseTenant},
		{name: "aks-payments with aks-sandbox's tenant and server application: unauthorized", cluster: aksPayments.Name, kind: "unauthorized",
			edit: func(t *testing.T, config map[string]any) {
				setEnv("AZURE_TENANT_ID", entraLighthouseTenant)(t, config)
				setEnv("AAD_SERVER_APPLICATION_ID", aksLegacyServerApp)(t, config)
			},
			decision:  "presented at " + aksPayments.Name,
			cloudCall: "token for " + aksLegacyServerApp + " in " + entraLighthouseTenant},
		{name: "aks-sandbox with the AKS server application (the default): unauthorized", cluster: aksSandbox.Name, kind: "unauthorized",
			edit:      setEnv("AAD_SERVER_APPLICATION_ID", ""),
			decision:  "no cluster of " + lighthouse + " accepts audience [" + aksManagedServerApp + "]",
			cloudCall: "token for " + aksManagedServerApp + " in " + entraLighthouseTenant},
		{name: "aks-sandbox without its tenant (the pod's): Entra refuses the token", cluster: aksSandbox.Name, kind: "other",
			edit:      setEnv("AZURE_TENANT_ID", ""),
			cloudCall: "refused " + aksLegacyServerApp + " in " + entraHomeTenant + ": AADSTS500011"},
		{name: "aks-payments with another client id: Entra refuses the token", cluster: aksPayments.Name, kind: "other",
			edit:      setEnv("AZURE_CLIENT_ID", "00000000-0000-4000-8000-000000000001"),
			cloudCall: "refused " + aksManagedServerApp + " in " + entraHomeTenant + ": AADSTS700016"},
		{name: "eks-payments, auth mode exec: argocd-k8s-auth aws in an execProviderConfig, with AWS_REGION", cluster: eksPayments.Name, exec: true,
			decision: ":assumed-role/argocd-deployer/", cloudCall: gci + eksPayments.Name + ": arn:aws:sts::" + cloudAWSAccount + ":assumed-role/argocd-deployer/"},
		{name: "eks-platform, auth mode exec: its own role", cluster: eksPlatform.Name, exec: true,
			decision: ":assumed-role/argocd-platform/", cloudCall: gci + eksPlatform.Name + ": arn:aws:sts::" + cloudAWSAccount + ":assumed-role/argocd-platform/"},
		{name: "eks-payments, auth mode exec, with eks-platform's --cluster-name: unauthorized", cluster: eksPayments.Name, exec: true,
			kind: "unauthorized", edit: setArg("--cluster-name", eksPlatform.Name),
			decision: "signature does not match", cloudCall: gci + eksPayments.Name + " refused: SignatureDoesNotMatch"},
		{name: "eks-platform with another CA: x509, no request sent", cluster: eksPlatform.Name, kind: "x509",
			edit:      set(otherCA, "tlsClientConfig", "caData"),
			cloudCall: "AssumeRole " + cloudPlatformRole},
	}
}

func (cc cloudConnectCase) run(t *testing.T, front *clusterFront, s *corev1.Secret, sts *issuingSTS, entra *fakeEntra, env []string) connectResult {
	reviewed, assumed, issued := len(e.cloudAuthn.Seen()), len(sts.seen()), len(entra.seen())
	u, err := url.Parse(string(s.Data["server"]))
	if err != nil {
		t.Fatal(err)
	}
	served := front.served(u.Hostname())
	r := argocdConnectWith(t, s, 0, env...)
	reviews := e.cloudAuthn.Seen()[reviewed:]
	calls := slices.Concat(sts.seen()[assumed:], entra.seen()[issued:])
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
	if cc.decision != "" && !anyOf(reviews, decided) || cc.decision == "" && len(reviews) > 0 {
		t.Errorf("the webhook decided %q, want %q (at %s)", reviews, cc.decision, cc.cluster)
	}
	if !containsSubstring(calls, cc.cloudCall) {
		t.Errorf("STS and Entra were asked %q, want %q", calls, cc.cloudCall)
	}
	if cc.decision != "" && front.served(u.Hostname()) == served {
		t.Errorf("no request reached %s", u.Hostname())
	}
	checkNoCredential(t, r.Output, sts)
	return r
}

// execSecrets are the Secrets `discover --secrets` renders for the EKS
// clusters with auth mode exec, by cluster: the deployment's
// configuration and fakes, an execProviderConfig instead of awsAuthConfig.
func (c *cloudEnv) execSecrets(t *testing.T) map[string]corev1.Secret {
	t.Helper()
	// the deployment's configuration, its EKS source in auth mode exec
	const ttl = "      describeTTL: 100ms\n"
	config := strings.Replace(c.config(), ttl, ttl+"      auth: {mode: exec}\n", 1)
	if !strings.Contains(config, "auth: {mode: exec}") {
		t.Fatal("the cloud configuration has no EKS describeTTL line to add the auth mode after")
	}
	file, empty := filepath.Join(c.dir, "config-exec.yaml"), filepath.Join(c.dir, "aws-empty")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.binary, "discover", "--config", file, "--secrets")
	cmd.Env = append(append(toolEnviron(), "KUBECONFIG="+e.kubeconfig), c.serviceEnv(empty)...)
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
		if cfg := string(secrets[name].Data["config"]); !strings.Contains(cfg, `"execProviderConfig"`) || !strings.Contains(cfg, `"AWS_REGION":"`+cloudAWSRegion+`"`) {
			t.Fatalf("discover --secrets: %s's config %s, want an execProviderConfig with AWS_REGION %s", name, cfg, cloudAWSRegion)
		}
	}
	return secrets
}

// checkNoCredential fails when output holds a token a cluster accepts or
// a secret STS issued.
func checkNoCredential(t *testing.T, output string, sts *issuingSTS) {
	t.Helper()
	for _, secret := range append([]string{"k8s-aws-v1.", "eyJ", eksIssuedSessionPrefix, eksControllerSecret}, sts.secrets()...) {
		if strings.Contains(output, secret) {
			t.Errorf("the tool's output holds a credential (%.12s…):\n%s", secret, output)
		}
	}
}

// anyOf says whether f holds for an element of list.
func anyOf(list []string, f func(string) bool) bool {
	for _, x := range list {
		if f(x) {
			return true
		}
	}
	return false
}

// mapAt is the object at path in config; the test fails when there is
// none.
func mapAt(t *testing.T, config map[string]any, path ...string) map[string]any {
	t.Helper()
	m := config
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			t.Fatalf("config has no object at %s: %v", strings.Join(path, "."), config)
		}
		m = next
	}
	return m
}

// editConfig returns a copy of s with its config edited (nil: s).
func editConfig(t *testing.T, s *corev1.Secret, edit func(t *testing.T, config map[string]any)) *corev1.Secret {
	t.Helper()
	if edit == nil {
		return s
	}
	var config map[string]any
	if err := json.Unmarshal(s.Data["config"], &config); err != nil {
		t.Fatalf("Secret %s: config: %v", s.Name, err)
	}
	edit(t, config)
	raw, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	out := s.DeepCopy()
	out.Data["config"] = raw
	return out
}
