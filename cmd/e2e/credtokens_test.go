package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
)

// checkRestart is a step of TestRancherCredentialsConnect: a restart
// takes the tokens the Secrets hold (the only place their values live)
// instead of revoking and minting them again, even while Rancher refuses
// every new token: each Secret keeps its working token.
func checkRestart(t *testing.T, s *CredService, proxied, direct *corev1.Secret) {
	t.Helper()
	if got := s.Rancher.LiveTokensByCluster(); got["c-proxy1"] != 1 || got["c-ace1"] != 1 {
		t.Fatalf("after discover --check, live tokens %v: the check releases what it minted", got)
	}
	before := map[string]string{"c-proxy1": BearerToken(proxied), "c-ace1": BearerToken(direct)}
	created, deleted := s.Rancher.TokensCreated(), s.Rancher.TokensDeleted()
	s.Stop()
	s.Rancher.RefuseMints(true)
	defer s.Rancher.RefuseMints(false)
	s.Start()
	Poll(t, 60*time.Second, "the restarted service adopted the Secrets' tokens", func() error {
		if !strings.Contains(s.Proc.Tail(400), "adopted the rancher tokens our Secrets hold") {
			return fmt.Errorf("no adoption logged yet")
		}
		return nil
	}, func() string { return s.Proc.Tail(40) })
	time.Sleep(3 * time.Second) // listings and passes: nothing may change
	secrets, err := s.Secrets()
	if err != nil {
		t.Fatal(err)
	}
	for id, b := range before {
		sec := secrets[id]
		if BearerToken(&sec) != b {
			t.Errorf("%s: the restart replaced a working token", id)
		}
		if r := ArgoCDConnect(t, &sec); !r.OK {
			t.Errorf("%s after a restart while Rancher refuses new tokens: %s", id, r.Kind)
		}
	}
	if got := s.Rancher.LiveTokensByCluster(); got["c-proxy1"] != 1 || got["c-ace1"] != 1 {
		t.Errorf("live tokens %v, want one per served cluster", got)
	}
	if n, d := s.Rancher.TokensCreated()-created, s.Rancher.TokensDeleted()-deleted; n != 0 || d != 0 {
		t.Errorf("the restart minted %d and revoked %d tokens, want none", n, d)
	}
}

// checkUninstall: the chart's pre-delete hook (revoke-tokens) revokes
// every token the installation minted.
func checkUninstall(t *testing.T, s *CredService) {
	t.Helper()
	s.Stop()
	out, err := exec.Command(e.Binary, "revoke-tokens", "--config", s.Config).CombinedOutput()
	if err != nil {
		t.Fatalf("revoke-tokens: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "source creds: revoked ") {
		t.Errorf("revoke-tokens printed:\n%s", out)
	}
	for cluster, n := range s.Rancher.LiveTokensByCluster() {
		if cluster != "" && n != 0 {
			t.Errorf("%d live tokens for %s after revoke-tokens", n, cluster)
		}
	}
	if s.Rancher.LiveTokens("") == 0 {
		t.Error("the listing token was revoked")
	}
}

// checkTwoInstallations: a second installation with the same owner id and
// source name, on the same Rancher user, in another namespace (another
// installation id) mints its own tokens and never revokes the first's,
// not even as orphans once its grace period has passed; its revoke-tokens
// revokes only its own.
func checkTwoInstallations(t *testing.T, s *CredService) {
	t.Helper()
	const otherNS = "argocd-creds-second"
	ctx := context.Background()
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}},
		metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Secrets(otherNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	first, err := s.Secrets()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), "namespace: "+CredNS, "namespace: "+otherNS, 1)
	cfg = strings.Replace(cfg, s.Addr, fmt.Sprintf("127.0.0.1:%d", port), 1)
	cfg = strings.Replace(cfg, "clusterTokens: perCluster, tokenTTL: 1h", "clusterTokens: perCluster, tokenTTL: 1h, tokenGracePeriod: 1s", 1)
	path := filepath.Join(s.Dir, "second.yaml")
	WriteFile(t, path, cfg)
	p := e.Serve(t, ServiceRun{Name: "second", Dir: s.Dir, Config: path})
	defer p.Stop()
	Poll(t, 60*time.Second, "the second installation's Secrets of the Rancher clusters", func() error {
		list, err := e.Kube.CoreV1().Secrets(otherNS).List(ctx, metav1.ListOptions{LabelSelector: "argocd-cluster-discovery.io/source=creds"})
		if err == nil && len(list.Items) != 2 {
			err = fmt.Errorf("%d Secrets, want 2", len(list.Items))
		}
		return err
	}, func() string { return p.Tail(40) })
	time.Sleep(3 * time.Second) // past its grace period, with passes and sweeps
	for id, sec := range first {
		if r := ArgoCDConnect(t, &sec); !r.OK {
			t.Errorf("%s: the first installation's Secret after the second started: %s", id, r.Kind)
		}
	}
	if got := s.Rancher.LiveTokensByCluster(); got["c-proxy1"] != 2 || got["c-ace1"] != 2 {
		t.Errorf("live tokens %v, want one per cluster and installation", got)
	}
	p.Stop()
	out, err := exec.Command(e.Binary, "revoke-tokens", "--config", path).CombinedOutput()
	if err != nil {
		t.Fatalf("revoke-tokens: %v\n%s", err, out)
	}
	if got := s.Rancher.LiveTokensByCluster(); got["c-proxy1"] != 1 || got["c-ace1"] != 1 {
		t.Errorf("live tokens %v after the second installation's revoke-tokens, want the first's", got)
	}
	for id, sec := range first {
		if r := ArgoCDConnect(t, &sec); !r.OK {
			t.Errorf("%s: the first installation's Secret after the second's uninstall: %s", id, r.Kind)
		}
	}
}

// checkDisconnectedEndpoint: Rancher copies a token to a cluster's
// authorized endpoint through the cluster's agent. While the agent is
// disconnected (Connected False), the cluster keeps its token past the
// renewal point (a new one would be refused there) until it expires; once
// the agent is back, the new token is synced and Argo CD connects with it.
func checkDisconnectedEndpoint(t *testing.T, s *CredService) {
	t.Helper()
	s.Rancher.SetMaxTTL(9 * time.Second)
	defer s.Rancher.SetMaxTTL(0)
	direct := fakerancher.Cluster{ID: "c-ace1", Name: "direct", State: "active", ACE: true}
	defer s.Rancher.Set(direct)
	current := func() (corev1.Secret, error) { return s.SecretOf("c-ace1") }
	first := s.RestartWithFreshToken(t, "c-ace1") // a 9 s token
	minted := time.Now()
	disconnected := direct
	disconnected.Disconnected = true
	disconnected.Conditions = []fakerancher.Condition{{Type: "Connected", Status: "False", Reason: "Disconnected"}}
	s.Rancher.Set(disconnected)
	time.Sleep(time.Until(minted.Add(8 * time.Second))) // past the renewal point (6 s), before expiry (9 s)
	held, err := current()
	if err != nil {
		t.Fatal(err)
	}
	if BearerToken(&held) != BearerToken(&first) {
		t.Error("the token was rotated while the agent was disconnected")
	}
	if r := ArgoCDConnect(t, &held); !r.OK {
		t.Errorf("the endpoint while its agent is disconnected: %s %s", r.Kind, r.Error)
	}
	s.Rancher.Set(direct)
	Poll(t, 30*time.Second, "a new token, synced once the agent is back", func() error {
		sec, err := current()
		if err != nil {
			return err
		}
		if BearerToken(&sec) == BearerToken(&first) {
			return fmt.Errorf("not renewed yet")
		}
		if r := ArgoCDConnect(t, &sec); !r.OK {
			return fmt.Errorf("%s", r.Kind)
		}
		return nil
	}, func() string { return s.Proc.Tail(40) })
}
