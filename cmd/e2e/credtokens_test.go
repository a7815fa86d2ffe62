package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// checkRestart is a step of TestRancherCredentialsConnect: a restart
// takes the tokens the Secrets hold (the only place their values live)
// instead of revoking and minting them again, even while Rancher refuses
// every new token: each Secret keeps its working token.
func checkRestart(t *testing.T, s *credService, proxied, direct *corev1.Secret) {
	t.Helper()
	if got := s.rancher.LiveTokensByCluster(); got["c-proxy1"] != 1 || got["c-ace1"] != 1 {
		t.Fatalf("after discover --check, live tokens %v: the check releases what it minted", got)
	}
	before := map[string]string{"c-proxy1": bearerToken(proxied), "c-ace1": bearerToken(direct)}
	created, deleted := s.rancher.TokensCreated(), s.rancher.TokensDeleted()
	s.stop()
	s.rancher.RefuseMints(true)
	defer s.rancher.RefuseMints(false)
	s.start()
	poll(t, 60*time.Second, "the restarted service adopted the Secrets' tokens", func() error {
		if !strings.Contains(s.proc.tail(400), "adopted the rancher tokens our Secrets hold") {
			return fmt.Errorf("no adoption logged yet")
		}
		return nil
	}, func() string { return s.proc.tail(40) })
	time.Sleep(3 * time.Second) // listings and passes: nothing may change
	secrets, err := s.secrets()
	if err != nil {
		t.Fatal(err)
	}
	for id, b := range before {
		sec := secrets[id]
		if bearerToken(&sec) != b {
			t.Errorf("%s: the restart replaced a working token", id)
		}
		if r := argocdConnect(t, &sec); !r.OK {
			t.Errorf("%s after a restart while Rancher refuses new tokens: %s", id, r.Kind)
		}
	}
	if got := s.rancher.LiveTokensByCluster(); got["c-proxy1"] != 1 || got["c-ace1"] != 1 {
		t.Errorf("live tokens %v, want one per served cluster", got)
	}
	if n, d := s.rancher.TokensCreated()-created, s.rancher.TokensDeleted()-deleted; n != 0 || d != 0 {
		t.Errorf("the restart minted %d and revoked %d tokens, want none", n, d)
	}
}

// checkUninstall: the chart's pre-delete hook (revoke-tokens) revokes
// every token the installation minted.
func checkUninstall(t *testing.T, s *credService) {
	t.Helper()
	s.stop()
	out, err := exec.Command(e.binary, "revoke-tokens", "--config", s.config).CombinedOutput()
	if err != nil {
		t.Fatalf("revoke-tokens: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "source creds: revoked ") {
		t.Errorf("revoke-tokens printed:\n%s", out)
	}
	for cluster, n := range s.rancher.LiveTokensByCluster() {
		if cluster != "" && n != 0 {
			t.Errorf("%d live tokens for %s after revoke-tokens", n, cluster)
		}
	}
	if s.rancher.LiveTokens("") == 0 {
		t.Error("the listing token was revoked")
	}
}
