package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testca"
)

// credNS is where the credentials scenario's service writes its Secrets,
// apart from the main scenario's.
const credNS = "creds-argocd"

// credService is a second instance of our service, against a Rancher of
// its own, with per-cluster tokens and ace auto.
type credService struct {
	t       *testing.T
	rancher *fakerancher.Fake
	// shared is a second Rancher, listed with clusterTokens shared: its
	// Secrets carry the listing token
	shared *fakerancher.Fake
	addr   string // the API's
	dir    string
	config string
	proc   *proc
}

func newCredService(t *testing.T) *credService {
	t.Helper()
	f, shared := newKubeRancher(t), newKubeRancher(t)
	shared.Set(fakerancher.Cluster{ID: "c-shared1", Name: "shared", State: "active"})
	if _, err := e.kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: credNS}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	// the scenario leaves nothing behind (runs after the service stops)
	t.Cleanup(func() {
		_ = e.kube.CoreV1().Secrets(credNS).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	// a cluster whose bearer token is a key of a Secret in Argo CD's
	// namespace, as for ARO: the suite's apiserver with a ServiceAccount token
	fx := newConnectFixture(t)
	if _, err := e.kube.CoreV1().Secrets(credNS).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "aro-token"}, StringData: map[string]string{"token": fx.token}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := &credService{t: t, rancher: f, shared: shared, addr: fmt.Sprintf("127.0.0.1:%d", port), dir: t.TempDir()}
	s.config = filepath.Join(s.dir, "config.yaml")
	files := map[string]string{"token": pluginToken + "\n", "rancher-token": rancherTok + "\n", "config.yaml": fmt.Sprintf(`log: {level: debug}
server: {listen: "127.0.0.1:%d", tokens: [{file: token}], shutdownTimeout: 2s}
inventory: {interval: 1s, timeout: 5s}
departure: {afterListings: 2, gracePeriod: 0s, maxFraction: 1, heldListings: 2}
sources:
  - name: creds
    provider: rancher
    # the fake's authorized cluster endpoints listen on the loopback: allowed by name, not by a wildcard
    rancher: {url: %s, token: {file: rancher-token}, requestTimeout: 2s, ace: auto, aceAllowedHosts: [127.0.0.1], clusterTokens: perCluster, tokenTTL: 1h}
  - name: shared
    provider: rancher
    rancher: {url: %s, token: {file: rancher-token}, requestTimeout: 2s, namePrefix: shared-}
  - name: aro
    provider: static
    static: {clusters: [{name: aro-cluster, server: %s, caData: %s, auth: {bearerToken: {secret: {name: aro-token, key: token}}}}]}
secrets:
  enabled: true
  namespace: %s
  ownerID: creds
  policy: sync
  resync: 2s
  prune: {afterListings: 2}
  leaderElection: {enabled: false}
  kubeconfig: %s
`, port, f.URL(), shared.URL(), fx.server, fx.ca, credNS, e.kubeconfig)}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// newKubeRancher starts a fake Rancher whose proxy and authorized
// endpoints lead to the suite's kube-apiserver, closed when t ends.
func newKubeRancher(t *testing.T) *fakerancher.Fake {
	t.Helper()
	f, err := fakerancher.New(filepath.Join(e.root, "testdata", "fixtures", "rancher"), rancherTok)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	if err := f.SetKube(e.rest); err != nil {
		t.Fatal(err)
	}
	return f
}

// secretOf returns the scenario's Secret of cluster id.
func (s *credService) secretOf(id string) (corev1.Secret, error) {
	secrets, err := s.secrets()
	if err != nil {
		return corev1.Secret{}, err
	}
	sec, ok := secrets[id]
	if !ok {
		return sec, fmt.Errorf("no Secret for %s", id)
	}
	return sec, nil
}

// restartWithFreshToken restarts the service after an administrator
// revoked cluster id's tokens, so that it mints one under Rancher's
// current maximum lifetime, and returns the Secret once it carries it.
func (s *credService) restartWithFreshToken(t *testing.T, id string) corev1.Secret {
	t.Helper()
	before, err := s.secretOf(id)
	if err != nil {
		t.Fatal(err)
	}
	s.stop()
	s.rancher.DropTokens(id)
	s.start()
	var fresh corev1.Secret
	poll(t, 30*time.Second, "a token minted under Rancher's maximum lifetime", func() (err error) {
		if fresh, err = s.secretOf(id); err == nil && bearerToken(&fresh) == bearerToken(&before) {
			err = fmt.Errorf("still the earlier token")
		}
		return err
	}, func() string { return s.proc.tail(40) })
	return fresh
}

func (s *credService) start() {
	s.t.Helper()
	s.proc = serve(s.t, serviceRun{name: "service", dir: s.dir, config: s.config})
	s.t.Cleanup(s.stop)
}

func (s *credService) stop() {
	if s.proc != nil {
		s.proc.stop()
		s.proc = nil
	}
}

// secrets returns the scenario's cluster Secrets by cluster id.
func (s *credService) secrets() (map[string]corev1.Secret, error) {
	list, err := e.kube.CoreV1().Secrets(credNS).List(context.Background(), metav1.ListOptions{LabelSelector: "argocd.argoproj.io/secret-type=cluster"})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Secret{}
	for _, sec := range list.Items {
		out[sec.Annotations["argocd-cluster-discovery.io/cluster-id"]] = sec
	}
	return out, nil
}

func bearerToken(s *corev1.Secret) string {
	var cfg struct {
		BearerToken string `json:"bearerToken"`
	}
	_ = json.Unmarshal(s.Data["config"], &cfg)
	return cfg.BearerToken
}

// withConfig returns a copy of s whose config has key set to value.
func withConfig(t *testing.T, s *corev1.Secret, key string, value any) *corev1.Secret {
	t.Helper()
	return editConfig(t, s, func(t *testing.T, cfg map[string]any) {
		if key == "caData" {
			mapAt(t, cfg, "tlsClientConfig")["caData"] = value
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
	s := newCredService(t)
	s.rancher.Set(fakerancher.Cluster{ID: "c-proxy1", Name: "proxied", State: "active"})
	s.rancher.Set(fakerancher.Cluster{ID: "c-ace1", Name: "direct", State: "active", ACE: true})
	s.start()
	var secrets map[string]corev1.Secret
	poll(t, 60*time.Second, "a Secret per cluster", func() (err error) {
		if secrets, err = s.secrets(); err == nil && len(secrets) != 4 {
			err = fmt.Errorf("%d secrets", len(secrets))
		}
		return err
	}, func() string { return s.proc.tail(40) })
	proxied, direct, aro := secrets["c-proxy1"], secrets["c-ace1"], secrets["aro-cluster"]
	aceServer, _, err := s.rancher.ACE("c-ace1")
	if err != nil {
		t.Fatal(err)
	}
	if string(direct.Data["server"]) != aceServer || !strings.Contains(string(proxied.Data["server"]), "/k8s/clusters/c-proxy1") {
		t.Fatalf("servers: ace %s (want %s), proxy %s", direct.Data["server"], aceServer, proxied.Data["server"])
	}
	if r := argocdConnect(t, &aro); !r.OK {
		t.Errorf("Argo CD cannot connect with the Secret of the ARO-like cluster: %s %s", r.Kind, r.Error)
	}
	sharedSecret := secrets["c-shared1"]
	if r := argocdConnect(t, &sharedSecret); !r.OK || bearerToken(&sharedSecret) != rancherTok {
		t.Errorf("the proxy with the shared listing token: %s %s", r.Kind, r.Error)
	}
	for _, sec := range []corev1.Secret{proxied, direct} {
		if r := argocdConnect(t, &sec); !r.OK {
			t.Errorf("Argo CD cannot connect with the Secret of %s: %s %s", sec.Data["name"], r.Kind, r.Error)
		}
		if tok := bearerToken(&sec); tok == "" || tok == rancherTok {
			t.Errorf("%s: the Secret must carry a token of its own, not the listing token", sec.Data["name"])
		}
	}
	if bearerToken(&proxied) == bearerToken(&direct) {
		t.Error("two clusters share one token")
	}
	if got := s.rancher.LiveTokensByCluster(); got["c-proxy1"] != 1 || got["c-ace1"] != 1 {
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
func checkOwnersCannotRedirect(t *testing.T, s *credService) {
	t.Helper()
	const attacker = "attacker.example.net"
	label := map[string]string{"argocd-cluster-discovery.io/ace": "true"}
	s.rancher.Set(fakerancher.Cluster{ID: "c-evil1", Name: "evil", State: "active", ACEFQDN: attacker, Labels: label})
	s.shared.Set(fakerancher.Cluster{ID: "c-evil2", Name: "evil2", State: "active", ACEFQDN: attacker, Labels: label})
	var evil2 corev1.Secret
	poll(t, 30*time.Second, "the proxy source's Secret for the labelled cluster", func() error {
		secrets, err := s.secrets()
		if err != nil {
			return err
		}
		var ok bool
		if evil2, ok = secrets["c-evil2"]; !ok {
			return errors.New("no Secret for c-evil2 yet")
		}
		return nil
	}, func() string { return s.proc.tail(40) })
	if srv := string(evil2.Data["server"]); srv != s.shared.Server("c-evil2") || bearerToken(&evil2) != rancherTok {
		t.Errorf("the proxy source's Secret: server %s (want %s), the listing token: %v", srv, s.shared.Server("c-evil2"), bearerToken(&evil2) == rancherTok)
	}
	time.Sleep(3 * time.Second) // three listings of the ace source
	secrets, err := s.secrets()
	if err != nil {
		t.Fatal(err)
	}
	if sec, ok := secrets["c-evil1"]; ok {
		t.Errorf("a Secret for the cluster whose endpoint is at %s: server %s", attacker, sec.Data["server"])
	}
	if n := s.rancher.LiveTokensByCluster()["c-evil1"]; n != 0 || s.rancher.TokensCreatedFor("c-evil1") != 0 {
		t.Errorf("tokens minted for the cluster whose endpoint is at %s: %d live", attacker, n)
	}
	doc, err := statusDocAt(s.addr)
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
	if r := argocdConnect(t, withConfig(t, direct, "bearerToken", rancherTok)); r.Kind != "unauthorized" {
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
	if r := argocdConnect(t, withConfig(t, direct, "caData", other)); r.OK || r.Kind == "unauthorized" {
		t.Errorf("a wrong CA: %s, want a TLS failure", r.Kind)
	}
	if r := argocdConnect(t, withConfig(t, proxied, "bearerToken", bearerToken(direct))); r.Kind != "unauthorized" {
		t.Errorf("another cluster's token at the proxy: %s, want unauthorized", r.Kind)
	}
}

// checkDiscover is a step of TestRancherCredentialsConnect.
func checkDiscover(t *testing.T, s *credService) {
	t.Helper()
	out, err := exec.Command(e.binary, "discover", "--config", s.config, "--check", "-o", "json").Output()
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
	if strings.Contains(string(out), rancherTok) {
		t.Error("a credential in the output")
	}
}

// checkDeparture is a step of TestRancherCredentialsConnect.
func checkDeparture(t *testing.T, s *credService) {
	t.Helper()
	s.rancher.Remove("c-proxy1")
	poll(t, 60*time.Second, "the departed cluster's token revoked", func() error {
		if n := s.rancher.LiveTokensByCluster()["c-proxy1"]; n != 0 {
			return fmt.Errorf("%d live tokens for c-proxy1", n)
		}
		return nil
	}, func() string { return s.proc.tail(40) })
	if n := s.rancher.LiveTokensByCluster()["c-ace1"]; n != 1 {
		t.Errorf("the cluster that stays has %d live tokens, want 1", n)
	}
	poll(t, 30*time.Second, "the departed cluster's Secret pruned (policy sync)", func() error {
		secrets, err := s.secrets()
		if _, still := secrets["c-proxy1"]; err == nil && still {
			err = fmt.Errorf("the Secret of c-proxy1 is still there")
		}
		return err
	}, func() string { return s.proc.tail(40) })
}

// checkRenewal: Rancher cuts token lifetimes to its maximum (here 4 s): the
// service renews at two thirds of the lifetime Rancher granted, so the
// Secret carries a fresh token before the old one expires, and the old one
// is refused once it has expired or been revoked.
func checkRenewal(t *testing.T, s *credService) {
	t.Helper()
	s.rancher.SetMaxTTL(4 * time.Second)
	defer s.rancher.SetMaxTTL(0)
	current := func() (corev1.Secret, error) { return s.secretOf("c-ace1") }
	first := s.restartWithFreshToken(t, "c-ace1")
	minted := time.Now()
	var renewed corev1.Secret
	poll(t, 10*time.Second, "the token renewed within a listing of two thirds of its lifetime", func() (err error) {
		if renewed, err = current(); err == nil && bearerToken(&renewed) == bearerToken(&first) {
			err = fmt.Errorf("not renewed yet")
		}
		return err
	}, func() string { return s.proc.tail(40) })
	if took := time.Since(minted); took > 4*time.Second {
		t.Errorf("renewed after %s: the old token had expired", took)
	}
	if r := argocdConnect(t, &renewed); !r.OK {
		t.Errorf("the renewed Secret: %s %s", r.Kind, r.Error)
	}
	time.Sleep(time.Until(minted.Add(4 * time.Second)))
	if r := argocdConnect(t, &first); r.Kind != "unauthorized" {
		t.Errorf("the expired token: %s, want unauthorized", r.Kind)
	}
}
