package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// cloudConnectCase is a Secret of the cloud deployment, as written or
// with one credential input changed, and what Argo CD's code, the
// apiserver's webhook and the clouds' token services make of it.
type cloudConnectCase struct {
	name, cluster string
	edit          func(config map[string]any) // nil: the Secret as written
	kind          string                      // "": ok
	decision      string                      // the webhook's, for the token; "": not asked
	issuer        string                      // what STS or Entra was asked or answered
}

// secretsConnect proves that every EKS and AKS Secret the deployment
// wrote authenticates through Argo CD's own code (argocd-cluster-check:
// SecretToCluster, RESTConfig, which runs the real argocd-k8s-auth), at
// the server and with the CA the Secret names (the clusterFront, reached
// through the proxy), with credentials from the fake STS (AssumeRole into
// the account's role, or the cluster's own from its tag) and the fake
// Entra ID (workload identity: the federated token exchanged for a token
// of the cluster's tenant and server application). The apiserver plays
// the four clusters: its webhook accepts a token only for one of their
// identities, and each case checks it was the Secret's cluster. A wrong
// input fails as the cloud would make it fail.
func (c *cloudEnv) secretsConnect(t *testing.T) {
	sts := newIssuingSTS(t)
	sts.allow(cloudAccountRole, cloudPlatformRole)
	entra := newFakeEntra(t)
	proxy := newConnectProxy(t,
		proxyRoute{"sts.amazonaws.com", sts.sts.Listener.Addr().String()},
		proxyRoute{"sts.*.amazonaws.com", sts.sts.Listener.Addr().String()},
		proxyRoute{entraHost, entra.addr()},
		proxyRoute{"*.gr7." + cloudAWSRegion + ".eks.amazonaws.com", c.front.addr()},
		proxyRoute{"*.hcp.westeurope.azmk8s.io", c.front.addr()})
	t.Cleanup(e.cloudAuthn.trustEKS(sts.callerIdentity, eksPayments.Name, eksPlatform.Name))
	t.Cleanup(e.cloudAuthn.trustEntra(&entra.key.PublicKey, map[aksIdentity]string{
		{tenant: entraHomeTenant, serverApp: aksManagedServerApp}:      aksPayments.Name,
		{tenant: entraLighthouseTenant, serverApp: aksLegacyServerApp}: aksSandbox.Name,
	}))
	// what Argo CD's controller pod has: what EKS's pod identity webhook
	// injects for IRSA and what Azure's workload identity webhook injects;
	// the proxy last, for both
	env := append(sts.irsaEnv(t), entra.env(t, proxy)...)

	secrets, err := c.secrets()
	if err != nil {
		t.Fatal(err)
	}
	for _, cc := range cloudConnectCases(otherCA(t)) {
		t.Run(cc.name, func(t *testing.T) {
			s, ok := secrets[cc.cluster]
			if !ok {
				t.Fatalf("no Secret for %s among %v", cc.cluster, names(secrets))
			}
			cc.run(t, c.front, editConfig(&s, cc.edit), sts, entra, env)
		})
	}
	if refused := containsSubstring(proxy.seen(), "refused"); refused {
		t.Errorf("the proxy was asked for other hosts: %q", proxy.seen())
	}
}

// cloudConnectCases are the Secrets as written, then one per credential
// input with a wrong value; otherCA is a CA (base64 PEM) no cluster uses.
func cloudConnectCases(otherCA string) []cloudConnectCase {
	// the controller, under IRSA
	irsaCaller := "arn:aws:sts::" + eksAccount + ":assumed-role/argocd-controller/argocd-controller"
	home, lighthouse := "tenant "+entraHomeTenant, "tenant "+entraLighthouseTenant
	setEnv := func(k, v string) func(map[string]any) {
		return func(config map[string]any) {
			env := config["execProviderConfig"].(map[string]any)["env"].(map[string]any)
			if v == "" {
				delete(env, k)
			} else {
				env[k] = v
			}
		}
	}
	return []cloudConnectCase{
		{name: "eks-payments as written: the account's role", cluster: eksPayments.Name,
			decision: ":assumed-role/argocd-deployer/", issuer: "AssumeRole " + cloudAccountRole + " by " + irsaCaller},
		{name: "eks-platform as written: its own role, from its tag", cluster: eksPlatform.Name,
			decision: ":assumed-role/argocd-platform/", issuer: "AssumeRole " + cloudPlatformRole + " by " + irsaCaller},
		{name: "aks-payments as written: AKS-managed Entra ID, its tenant", cluster: aksPayments.Name,
			decision: "(" + home + ", server application " + aksManagedServerApp + ")",
			issuer:   "token for " + aksManagedServerApp + " in " + entraHomeTenant},
		{name: "aks-sandbox as written: legacy Entra ID, its server application, its Lighthouse tenant", cluster: aksSandbox.Name,
			decision: "(" + lighthouse + ", server application " + aksLegacyServerApp + ")",
			issuer:   "token for " + aksLegacyServerApp + " in " + entraLighthouseTenant},
		{name: "eks-payments with another clusterName: unauthorized", cluster: eksPayments.Name, kind: "unauthorized",
			edit: func(config map[string]any) {
				config["awsAuthConfig"].(map[string]any)["clusterName"] = "eks-payments-old"
			},
			decision: "signature does not match", issuer: "AssumeRole " + cloudAccountRole},
		{name: "aks-payments with another tenant: unauthorized", cluster: aksPayments.Name, kind: "unauthorized",
			edit:     setEnv("AZURE_TENANT_ID", entraLighthouseTenant),
			decision: "no cluster of " + lighthouse + " accepts audience [" + aksManagedServerApp + "]",
			issuer:   "token for " + aksManagedServerApp + " in " + entraLighthouseTenant},
		{name: "aks-sandbox with the AKS server application (the default): unauthorized", cluster: aksSandbox.Name, kind: "unauthorized",
			edit:     setEnv("AAD_SERVER_APPLICATION_ID", ""),
			decision: "no cluster of " + lighthouse + " accepts audience [" + aksManagedServerApp + "]",
			issuer:   "token for " + aksManagedServerApp + " in " + entraLighthouseTenant},
		{name: "aks-sandbox without its tenant (the pod's): Entra refuses the token", cluster: aksSandbox.Name, kind: "other",
			edit:   setEnv("AZURE_TENANT_ID", ""),
			issuer: "refused " + aksLegacyServerApp + " in " + entraHomeTenant + ": AADSTS500011"},
		{name: "aks-payments with another client id: Entra refuses the token", cluster: aksPayments.Name, kind: "other",
			edit:   setEnv("AZURE_CLIENT_ID", "00000000-0000-4000-8000-000000000001"),
			issuer: "refused " + aksManagedServerApp + " in " + entraHomeTenant + ": AADSTS700016"},
		{name: "eks-platform with another CA: x509, no request sent", cluster: eksPlatform.Name, kind: "x509",
			edit: func(config map[string]any) {
				config["tlsClientConfig"].(map[string]any)["caData"] = otherCA
			},
			issuer: "AssumeRole " + cloudPlatformRole},
	}
}

func (cc cloudConnectCase) run(t *testing.T, front *clusterFront, s *corev1.Secret, sts *issuingSTS, entra *fakeEntra, env []string) {
	reviewed, assumed, issued := len(e.cloudAuthn.seen()), len(sts.seen()), len(entra.seen())
	u, err := url.Parse(string(s.Data["server"]))
	if err != nil {
		t.Fatal(err)
	}
	served := front.served(u.Hostname())
	r := argocdConnectWith(t, s, 0, env...)
	reviews := e.cloudAuthn.seen()[reviewed:]
	calls := append(sts.seen()[assumed:], entra.seen()[issued:]...)
	t.Logf("webhook: %q; STS and Entra: %q", reviews, calls)
	switch {
	case cc.kind == "" && !r.OK:
		t.Errorf("got %+v, want ok", r)
	case cc.kind != "" && (r.OK || r.Kind != cc.kind):
		t.Errorf("got %+v, want not ok, kind %s", r, cc.kind)
	}
	want := cc.decision
	if cc.kind == "" {
		want = "authenticated "
	}
	if cc.decision != "" && !(containsSubstring(reviews, want) && containsSubstring(reviews, cc.decision)) ||
		cc.decision == "" && len(reviews) > 0 {
		t.Errorf("the webhook decided %q, want %q", reviews, cc.decision)
	}
	if cc.kind == "" && !containsSubstring(reviews, " at "+cc.cluster) {
		t.Errorf("the webhook accepted the token as another cluster's: %q, want %s", reviews, cc.cluster)
	}
	if !containsSubstring(calls, cc.issuer) {
		t.Errorf("STS and Entra were asked %q, want %q", calls, cc.issuer)
	}
	if cc.decision != "" && front.served(u.Hostname()) == served {
		t.Errorf("no request reached %s", u.Hostname())
	}
	for _, secret := range []string{eksControllerSecret, "e2e-eks-session-", "eyJ"} {
		if strings.Contains(r.Output, secret) {
			t.Errorf("the tool's output holds a credential:\n%s", r.Output)
		}
	}
}

// editConfig returns a copy of s with its config edited (nil: s).
func editConfig(s *corev1.Secret, edit func(config map[string]any)) *corev1.Secret {
	if edit == nil {
		return s
	}
	var config map[string]any
	if err := json.Unmarshal(s.Data["config"], &config); err != nil {
		panic(fmt.Sprintf("Secret %s: config: %v", s.Name, err))
	}
	edit(config)
	raw, err := json.Marshal(config)
	if err != nil {
		panic(err)
	}
	out := s.DeepCopy()
	out.Data["config"] = raw
	return out
}
