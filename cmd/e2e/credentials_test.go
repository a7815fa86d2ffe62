package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testca"
)

// withConfig returns a copy of s whose config has key set to value.
func withConfig(t *testing.T, s *corev1.Secret, key string, value any) *corev1.Secret {
	t.Helper()
	return EditConfig(t, s, func(t *testing.T, cfg map[string]any) {
		if key == "caData" {
			MapAt(t, cfg, "tlsClientConfig")["caData"] = value
		} else {
			cfg[key] = value
		}
	})
}

// TestRancherCredentialsConnect: with per-cluster tokens and ace auto,
// every Secret the service writes for Rancher clusters connects through
// Argo CD's own client code: the proxy with a token scoped to the cluster,
// the authorized endpoint with its CA and a scoped token. The negative
// cases fail as Argo CD would. Tokens are minted once per cluster, revoked
// on a confirmed departure, and not duplicated by a restart.
func TestRancherCredentialsConnect(t *testing.T) {
	s := e.NewCredService(t)
	s.Rancher.Set(fakerancher.Cluster{ID: "c-proxy1", Name: "proxied", State: "active"})
	s.Rancher.Set(fakerancher.Cluster{ID: "c-ace1", Name: "direct", State: "active", ACE: true})
	s.Start()
	var secrets map[string]corev1.Secret
	Poll(t, 60*time.Second, "a Secret per cluster", func() (err error) {
		if secrets, err = s.Secrets(); err == nil && len(secrets) != 4 {
			err = fmt.Errorf("%d secrets", len(secrets))
		}
		return err
	}, func() string { return s.Proc.Tail(40) })
	proxied, direct, aro := secrets["c-proxy1"], secrets["c-ace1"], secrets["aro-cluster"]
	aceServer, _, err := s.Rancher.ACE("c-ace1")
	if err != nil {
		t.Fatal(err)
	}
	if string(direct.Data["server"]) != aceServer || !strings.Contains(string(proxied.Data["server"]), "/k8s/clusters/c-proxy1") {
		t.Fatalf("servers: ace %s (want %s), proxy %s", direct.Data["server"], aceServer, proxied.Data["server"])
	}
	if r := ArgoCDConnect(t, &aro); !r.OK {
		t.Errorf("Argo CD cannot connect with the Secret of the ARO-like cluster: %s %s", r.Kind, r.Error)
	}
	sharedSecret := secrets["c-shared1"]
	if r := ArgoCDConnect(t, &sharedSecret); !r.OK || BearerToken(&sharedSecret) != RancherToken {
		t.Errorf("the proxy with the shared listing token: %s %s", r.Kind, r.Error)
	}
	for _, sec := range []corev1.Secret{proxied, direct} {
		if r := ArgoCDConnect(t, &sec); !r.OK {
			t.Errorf("Argo CD cannot connect with the Secret of %s: %s %s", sec.Data["name"], r.Kind, r.Error)
		}
		if tok := BearerToken(&sec); tok == "" || tok == RancherToken {
			t.Errorf("%s: the Secret must carry a token of its own, not the listing token", sec.Data["name"])
		}
	}
	if BearerToken(&proxied) == BearerToken(&direct) {
		t.Error("two clusters share one token")
	}
	if got := s.Rancher.LiveTokensByCluster(); got["c-proxy1"] != 1 || got["c-ace1"] != 1 {
		t.Errorf("live scoped tokens %v: want one per served cluster", got)
	}

	t.Run("negative cases fail as Argo CD would", func(t *testing.T) { checkNegatives(t, &proxied, &direct) })

	t.Run("discover --check", func(t *testing.T) { checkDiscover(t, s) })

	t.Run("a restart neither leaks nor duplicates tokens", func(t *testing.T) { checkRestart(t, s, &proxied, &direct) })

	t.Run("two installations on one Rancher user keep their own tokens", func(t *testing.T) { checkTwoInstallations(t, s) })

	t.Run("a confirmed departure revokes the token", func(t *testing.T) { checkDeparture(t, s) })

	t.Run("a short-lived token is renewed before it expires", func(t *testing.T) { checkRenewal(t, s) })

	t.Run("an endpoint whose agent is disconnected keeps its token", func(t *testing.T) { checkDisconnectedEndpoint(t, s) })

	t.Run("a cluster's owner cannot send its token elsewhere", func(t *testing.T) { checkOwnersCannotRedirect(t, s) })

	t.Run("uninstall revokes what the installation minted", func(t *testing.T) { checkUninstall(t, s) })
}

// checkOwnersCannotRedirect: a cluster's owner enables its authorized
// cluster endpoint in Rancher with a host of their choosing, and sets the
// ace label. On the ace auto source (which allows only the fake's loopback
// endpoints) that cluster is not ready: no Secret, and no token minted for
// it. On the proxy source the label ace=true is ignored: the Secret points
// at Rancher's proxy with the listing token.
func checkOwnersCannotRedirect(t *testing.T, s *CredService) {
	t.Helper()
	const attacker = "attacker.example.net"
	label := map[string]string{"argocd-cluster-discovery.io/ace": "true"}
	s.Rancher.Set(fakerancher.Cluster{ID: "c-evil1", Name: "evil", State: "active", ACEFQDN: attacker, Labels: label})
	s.Shared.Set(fakerancher.Cluster{ID: "c-evil2", Name: "evil2", State: "active", ACEFQDN: attacker, Labels: label})
	var evil2 corev1.Secret
	Poll(t, 30*time.Second, "the proxy source's Secret for the labelled cluster", func() error {
		secrets, err := s.Secrets()
		if err != nil {
			return err
		}
		var ok bool
		if evil2, ok = secrets["c-evil2"]; !ok {
			return errors.New("no Secret for c-evil2 yet")
		}
		return nil
	}, func() string { return s.Proc.Tail(40) })
	if srv := string(evil2.Data["server"]); srv != s.Shared.Server("c-evil2") || BearerToken(&evil2) != RancherToken {
		t.Errorf("the proxy source's Secret: server %s (want %s), the listing token: %v", srv, s.Shared.Server("c-evil2"), BearerToken(&evil2) == RancherToken)
	}
	time.Sleep(3 * time.Second) // three listings of the ace source
	secrets, err := s.Secrets()
	if err != nil {
		t.Fatal(err)
	}
	if sec, ok := secrets["c-evil1"]; ok {
		t.Errorf("a Secret for the cluster whose endpoint is at %s: server %s", attacker, sec.Data["server"])
	}
	if n := s.Rancher.LiveTokensByCluster()["c-evil1"]; n != 0 || s.Rancher.TokensCreatedFor("c-evil1") != 0 {
		t.Errorf("tokens minted for the cluster whose endpoint is at %s: %d live", attacker, n)
	}
	doc, err := StatusDocAt(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	why := ""
	for _, u := range doc.Unserved {
		if u.ID == "c-evil1" {
			why = u.Reason
		}
	}
	if !strings.Contains(why, attacker+" is not in aceAllowedHosts") {
		t.Errorf("/status unserved c-evil1: %q, want the reason", why)
	}
}

// checkNegatives is a step of TestRancherCredentialsConnect.
func checkNegatives(t *testing.T, proxied, direct *corev1.Secret) {
	t.Helper()
	if r := ArgoCDConnect(t, withConfig(t, direct, "bearerToken", RancherToken)); r.Kind != "unauthorized" {
		t.Errorf("the listing token at an authorized endpoint: %s, want unauthorized", r.Kind)
	}
	signer, err := testca.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	der, err := signer.DER(7)
	if err != nil {
		t.Fatal(err)
	}
	other := testca.CAData(der)
	if r := ArgoCDConnect(t, withConfig(t, direct, "caData", other)); r.OK || r.Kind == "unauthorized" {
		t.Errorf("a wrong CA: %s, want a TLS failure", r.Kind)
	}
	if r := ArgoCDConnect(t, withConfig(t, proxied, "bearerToken", BearerToken(direct))); r.Kind != "unauthorized" {
		t.Errorf("another cluster's token at the proxy: %s, want unauthorized", r.Kind)
	}
}

// checkDiscover is a step of TestRancherCredentialsConnect.
func checkDiscover(t *testing.T, s *CredService) {
	t.Helper()
	out, err := exec.Command(e.Binary, "discover", "--config", s.Config, "--check", "-o", "json").Output()
	if err != nil {
		t.Fatalf("discover --check: %v\n%s", err, out)
	}
	var results []struct{ Name, Result, Detail string }
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("discover --check -o json: %v\n%s", err, out)
	}
	count := map[string]int{}
	names := map[string]bool{}
	for _, r := range results {
		count[r.Result+" "+r.Detail]++
		names[r.Name] = true
	}
	if count["ok v1.32.2"] != 3 || count["not-checked a token in a Kubernetes Secret"] != 1 || !names["proxied"] || !names["direct"] {
		t.Errorf("discover --check printed:\n%s", out)
	}
	if strings.Contains(string(out), RancherToken) {
		t.Error("a credential in the output")
	}
}

// checkDeparture is a step of TestRancherCredentialsConnect.
func checkDeparture(t *testing.T, s *CredService) {
	t.Helper()
	s.Rancher.Remove("c-proxy1")
	Poll(t, 60*time.Second, "the departed cluster's token revoked", func() error {
		if n := s.Rancher.LiveTokensByCluster()["c-proxy1"]; n != 0 {
			return fmt.Errorf("%d live tokens for c-proxy1", n)
		}
		return nil
	}, func() string { return s.Proc.Tail(40) })
	if n := s.Rancher.LiveTokensByCluster()["c-ace1"]; n != 1 {
		t.Errorf("the cluster that stays has %d live tokens, want 1", n)
	}
	Poll(t, 30*time.Second, "the departed cluster's Secret pruned (policy sync)", func() error {
		secrets, err := s.Secrets()
		if _, still := secrets["c-proxy1"]; err == nil && still {
			err = fmt.Errorf("the Secret of c-proxy1 is still there")
		}
		return err
	}, func() string { return s.Proc.Tail(40) })
}

// checkRenewal: Rancher cuts token lifetimes to its maximum (here 8 s): the
// service renews at two thirds of the lifetime Rancher granted, so the
// Secret carries a fresh token before the old one expires (by Rancher's
// clock, from the old token's creation: the 8 s leave a third of the
// lifetime for one listing interval of 1 s, the pass that writes the Secret
// and this test's polling on two loaded cores), and the old one is refused
// once it has expired or been revoked.
func checkRenewal(t *testing.T, s *CredService) {
	t.Helper()
	const ttl = 8 * time.Second
	s.Rancher.SetMaxTTL(ttl)
	defer s.Rancher.SetMaxTTL(0)
	current := func() (corev1.Secret, error) { return s.SecretOf("c-ace1") }
	first := s.RestartWithFreshToken(t, "c-ace1")
	expires, ok := s.Rancher.Expires(BearerToken(&first))
	if !ok {
		t.Fatal("Rancher does not know the fresh token's lifetime")
	}
	var renewed corev1.Secret
	Poll(t, ttl+5*time.Second, "the token renewed within a listing of two thirds of its lifetime", func() (err error) {
		if renewed, err = current(); err == nil && BearerToken(&renewed) == BearerToken(&first) {
			err = fmt.Errorf("not renewed yet")
		}
		return err
	}, func() string { return s.Proc.Tail(40) })
	if late := time.Since(expires); late >= 0 {
		t.Errorf("renewed %s after the old token had expired", late)
	}
	if r := ArgoCDConnect(t, &renewed); !r.OK {
		t.Errorf("the renewed Secret: %s %s", r.Kind, r.Error)
	}
	time.Sleep(time.Until(expires))
	if r := ArgoCDConnect(t, &first); r.Kind != "unauthorized" {
		t.Errorf("the expired token: %s, want unauthorized", r.Kind)
	}
}
