package e2e

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
)

// The ARO part of TestCloudLifecycle: the deployment's aro source lists
// three Azure Red Hat OpenShift clusters from its ARM endpoint. Their API
// servers (https://api.<domain>:6443) are the front, which passes every
// request, its bearer token included, to the suite's kube-apiserver: the
// tokens an operator binds to them are real ServiceAccount tokens of that
// apiserver (TokenRequest), bound to the view ClusterRole.
var (
	// aro-payments-weu: a managed domain (<8 characters>.westeurope.aroapp.io),
	// publicly trusted, so its Secret has no caData
	aroPayments = CloudAROCluster{Sub: aroSubA, RG: "rg-aro-payments", Name: "aro-payments-weu", Provisioning: "Succeeded"}
	// aro-contoso-weu: a custom domain, its CA from customDomainCA
	aroContoso = CloudAROCluster{Sub: aroSubA, RG: "rg-aro-contoso", Name: "aro-contoso-weu", Provisioning: "Succeeded",
		Domain: CloudAROCustomDomain}
	// aro-sandbox-weu: a managed domain in the second subscription, with
	// no token bound at first
	aroSandbox = CloudAROCluster{Sub: aroSubB, RG: "rg-aro-sandbox", Name: "aro-sandbox-weu", Provisioning: "Succeeded"}
)

// the ARO endpoint's two subscriptions
const (
	aroSubA = "2d8f4a6c-9b1e-4c3d-a5f7-8e0b1c2d3e4f"
	aroSubB = "7a3c5e9f-1d2b-4f6a-9c8e-0b4d6f8a2c1e"
)

// aroUnboundCheck is what holds while aroSandbox, listed with no token
// Secret bound, is not ready: check throughout (the other clusters kept,
// and for it no Secret, no Application, nothing in the plugin answer),
// want once listings have seen it (/status lists it unserved, saying
// why).
type aroUnboundCheck struct{ check, want func() error }

// aroUnbound is the check of aroSandbox without a token; checkAll checks
// the other clusters.
func aroUnbound(c *CloudEnv, checkAll func() error) aroUnboundCheck {
	return aroUnboundCheck{
		check: func() error {
			ps, err := c.Params()
			if err != nil {
				return err
			}
			if p, ok := ps[aroSandbox.Name]; ok {
				return fmt.Errorf("%s, with no token, is in the plugin answer: %+v", aroSandbox.Name, p)
			}
			return errors.Join(checkAll(), c.NoSecretOrApp(aroSandbox.Name))
		},
		want: func() error {
			reason, listed, err := c.Unserved("aro", aroSandbox.Name)
			switch {
			case err != nil:
				return err
			case !listed:
				return fmt.Errorf("/status does not list %s, with no token, as unserved", aroSandbox.Name)
			case !strings.Contains(reason, "no token Secret") || !strings.Contains(strings.ToLower(reason), strings.ToLower(aroSandbox.ID())):
				return fmt.Errorf("/status: %s unserved because %q, want no token Secret for %s", aroSandbox.Name, reason, aroSandbox.ID())
			}
			return nil
		},
	}
}

// aroBindsToken binds aroSandbox's token (the annotation with its id in
// lower case: ids are compared case-insensitively): its Secret, with that
// token, and its Application appear, /status no longer lists it unserved,
// and the other clusters are kept (checkAll). It joins fleet and st.
func aroBindsToken(t *testing.T, c *CloudEnv, fleet map[string]string, st map[string]*CloudSteady, checkAll func() error) {
	if !t.Run("the token of the ARO cluster without one bound: its Secret and its Application appear", func(t *testing.T) {
		token := c.BindAROToken(t, aroSandbox, strings.ToLower(aroSandbox.ID()))
		fleet[aroSandbox.Name] = aroSandbox.Server()
		c.Eventually(t, 15*time.Second, "the Secret and the Application of "+aroSandbox.Name+" once its token is bound", func() error {
			return errors.Join(c.Shows(aroSandbox.Name, aroSandbox.Server(), "ready", "Succeeded"), c.AppsAre(fleet), checkAll())
		})
		if reason, listed, err := c.Unserved("aro", aroSandbox.Name); err != nil || listed {
			t.Fatalf("/status still lists %s unserved (%q) or fails: %v", aroSandbox.Name, reason, err)
		}
		secrets, err := c.Secrets()
		if err != nil {
			t.Fatal(err)
		}
		s := secrets[aroSandbox.Name]
		if got := BearerToken(&s); got != token {
			t.Fatalf("Secret %s: bearerToken is not the token bound (%d characters, want %d)", s.Name, len(got), len(token))
		}
		st[aroSandbox.Name] = c.SteadyOf(t, aroSandbox.Name)
	}) {
		t.FailNow()
	}
}

func withAROState(c CloudAROCluster, provisioning string) CloudAROCluster {
	c.Provisioning = provisioning
	return c
}

// aroConnectCase is an ARO Secret of the deployment, as written or with
// its CA or token changed, run through argocd-cluster-check.
type aroConnectCase struct {
	name, cluster string
	// publicRoot: the front's CA among the system roots (SSL_CERT_FILE),
	// as a real aroapp.io API server's publicly trusted certificate is
	publicRoot bool
	// caData replaces the Secret's tlsClientConfig.caData ("": kept);
	// token its bearerToken ("": kept)
	caData, token string
	kind          string // "": ok
}

// aroConnect proves that the ARO Secrets the deployment wrote connect
// through Argo CD's own code (argocd-cluster-check: SecretToCluster,
// RESTConfig, discovery) at their API servers (the front at
// api.<domain>:6443, reached through a proxy) with the tokens bound to
// them, which the suite's kube-apiserver authenticates itself (the cloud
// token webhook is not asked): the custom-domain cluster with the CA the
// deployment was configured with, the managed-domain cluster, whose
// Secret has no caData, with the front's CA among the system roots
// (SSL_CERT_FILE, read by Go's crypto/x509 on Linux: the publicly trusted
// certificate of a real aroapp.io API server). Without that root, with
// another CA or with another token it fails as Argo CD would. The token
// never shows in the tool's output.
func aroConnect(t *testing.T, c *CloudEnv, tokens map[string]string) {
	proxy := c.AROProxy(t)
	secrets, err := c.Secrets()
	if err != nil {
		t.Fatal(err)
	}
	version, err := e.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	// what was written: the server, the token bound, the CA (none on the
	// managed domain, the configured one on the custom domain)
	clusterCA := base64.StdEncoding.EncodeToString(c.ClusterCAPEM())
	for _, w := range []struct {
		cluster CloudAROCluster
		caData  string
	}{{aroPayments, ""}, {aroContoso, clusterCA}} {
		s, ok := secrets[w.cluster.Name]
		if !ok {
			t.Fatalf("no Secret for %s among %v", w.cluster.Name, Names(secrets))
		}
		if got := string(s.Data["server"]); got != w.cluster.Server() {
			t.Errorf("Secret %s: server %q, want %q", s.Name, got, w.cluster.Server())
		}
		if BearerToken(&s) != tokens[w.cluster.Name] {
			t.Errorf("Secret %s: bearerToken is not the token bound to %s", s.Name, w.cluster.Name)
		}
		if got := secretCAData(t, &s); got != w.caData {
			t.Errorf("Secret %s: caData %.24q…, want %.24q…", s.Name, got, w.caData)
		}
	}
	// two: the apiserver caches the webhook's decision on a token
	otherTokens := []string{"e2e-aro-not-a-token-" + RandomHex(8), "e2e-aro-not-a-token-" + RandomHex(8)}
	for _, cc := range []aroConnectCase{
		{name: "the custom-domain cluster as written: the configured CA, its token", cluster: aroContoso.Name},
		{name: "the managed-domain cluster as written, no caData: the front's CA among the system roots", cluster: aroPayments.Name, publicRoot: true},
		{name: "the managed-domain cluster without that root: x509", cluster: aroPayments.Name, kind: "x509"},
		{name: "the custom-domain cluster with another CA: x509", cluster: aroContoso.Name, caData: OtherCA(t), kind: "x509"},
		{name: "the custom-domain cluster with another CA, the front's among the system roots: x509, caData is all it trusts", cluster: aroContoso.Name,
			caData: OtherCA(t), publicRoot: true, kind: "x509"},
		{name: "the custom-domain cluster with another token: unauthorized", cluster: aroContoso.Name, token: otherTokens[0], kind: "unauthorized"},
		{name: "the managed-domain cluster with another token: unauthorized", cluster: aroPayments.Name, publicRoot: true, token: otherTokens[1], kind: "unauthorized"},
	} {
		t.Run(cc.name, func(t *testing.T) {
			s := secrets[cc.cluster]
			r := cc.run(t, c, &s, proxy)
			switch {
			case cc.kind == "" && (!r.OK || r.Version != version.GitVersion):
				t.Errorf("got %+v, want ok with the apiserver's version %s", r, version.GitVersion)
			case cc.kind != "" && (r.OK || r.Kind != cc.kind):
				t.Errorf("got %+v, want not ok, kind %s", r, cc.kind)
			}
			for _, secret := range slices.Concat(slices.Collect(maps.Values(tokens)), otherTokens, []string{"eyJ"}) {
				if strings.Contains(r.Output, secret) {
					t.Errorf("the tool's output holds a token (%.12s…):\n%s", secret, r.Output)
				}
			}
		})
	}
	if seen := proxy.Seen(); ContainsSubstring(seen, "refused") || len(seen) == 0 {
		t.Errorf("the proxy was asked %q, want CONNECTs to the ARO API servers only", seen)
	}
}

// run runs argocd-cluster-check on s with the case's CA and token, through
// proxy, and checks what reached the front and the webhook: a request
// with the token used at the cluster's host and port when TLS succeeded,
// none when it failed; the webhook asked only for a token the apiserver
// does not know.
func (cc aroConnectCase) run(t *testing.T, c *CloudEnv, s *corev1.Secret, proxy *ConnectProxy) ConnectResult {
	t.Helper()
	token := BearerToken(s)
	s = EditConfig(t, s, func(t *testing.T, config map[string]any) {
		if cc.caData != "" {
			tls, _ := config["tlsClientConfig"].(map[string]any)
			if tls == nil {
				tls = map[string]any{}
				config["tlsClientConfig"] = tls
			}
			tls["caData"] = cc.caData
		}
		if cc.token != "" {
			config["bearerToken"] = cc.token
			token = cc.token
		}
	})
	u, err := url.Parse(string(s.Data["server"]))
	if err != nil {
		t.Fatal(err)
	}
	// the front sees the Host header: host:6443
	hostPort := strings.ToLower(u.Host)
	served, reviewed := c.Front.Served(hostPort), len(e.CloudAuthn.Seen())
	env := []string{"HTTPS_PROXY=" + proxy.URL()}
	if cc.publicRoot {
		env = append(env, "SSL_CERT_FILE="+c.ClusterCAFile())
	}
	r := ArgoCDConnectWith(t, s, 0, env...)
	reviews := e.CloudAuthn.Seen()[reviewed:]
	t.Logf("front: %d request(s) at %s; webhook: %q", c.Front.Served(hostPort)-served, hostPort, reviews)
	switch cc.kind {
	case "x509":
		if n := c.Front.Served(hostPort) - served; n > 0 {
			t.Errorf("%d request(s) reached %s past a TLS failure", n, hostPort)
		}
	default:
		if c.Front.Served(hostPort) == served {
			t.Errorf("no request reached %s", hostPort)
		}
		if h, ok := c.Front.HostOf(token); !ok || h != hostPort {
			t.Errorf("the token was sent to %q (%v), want %s", h, ok, hostPort)
		}
	}
	// a ServiceAccount token is the apiserver's own: the webhook is asked
	// only for a token it does not know, and leaves it unauthenticated
	switch {
	case cc.kind == "unauthorized" && !AnyOf(reviews, func(l string) bool { return strings.HasPrefix(l, "unauthenticated: ") }):
		t.Errorf("the webhook decided %q for an unknown token, want unauthenticated", reviews)
	case cc.kind != "unauthorized" && len(reviews) > 0:
		t.Errorf("the webhook was asked for a ServiceAccount token: %q", reviews)
	}
	return r
}

// secretCAData is the caData of a cluster Secret's config ("": none).
func secretCAData(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	var cfg struct {
		TLS struct {
			CAData string `json:"caData"`
		} `json:"tlsClientConfig"`
	}
	if err := json.Unmarshal(s.Data["config"], &cfg); err != nil {
		t.Fatalf("Secret %s: config: %v", s.Name, err)
	}
	return cfg.TLS.CAData
}
