package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
)

const twoSourcesNS = "argocd-two-sources"

// TestTwoSourcesOnOneRancherUser: two Rancher sources of one installation
// on the same Rancher user (the same server reached by two addresses, so
// each serves the cluster under its own server) mint a token each for the
// cluster and keep each other's: after a restart both Secrets still hold
// their working tokens, nothing is minted or revoked.
func TestTwoSourcesOnOneRancherUser(t *testing.T) {
	f := e.NewKubeRancher(t)
	f.Set(fakerancher.Cluster{ID: "c-two1", Name: "shared", State: "active"})
	ctx := context.Background()
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: twoSourcesNS}},
		metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Secrets(twoSourcesNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	dir := t.TempDir()
	cfg := writeTwoSourcesConfig(t, f, dir)
	var p *Proc
	start := func() { p = e.Serve(t, ServiceRun{Name: "service", Dir: dir, Config: cfg}) }
	start()
	t.Cleanup(func() { p.Stop() })
	logs := func() string { return p.Tail(40) }
	connect := func() (map[string]string, error) { return twoSourcesConnect(t) }
	var before map[string]string
	Poll(t, 60*time.Second, "a Secret per source, each with its own working token", func() (err error) {
		before, err = connect()
		return err
	}, logs)
	created, deleted := f.TokensCreated(), f.TokensDeleted()
	p.Stop()
	start()
	Poll(t, 60*time.Second, "both sources adopted their tokens", func() error {
		if n := strings.Count(p.Tail(400), "adopted the rancher tokens our Secrets hold"); n < 2 {
			return fmt.Errorf("%d sources adopted", n)
		}
		return nil
	}, logs)
	time.Sleep(3 * time.Second) // past the grace period, with passes and sweeps
	after, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	if after["left"] != before["left"] || after["right"] != before["right"] {
		t.Error("a restart replaced a source's working token")
	}
	if n, d := f.TokensCreated()-created, f.TokensDeleted()-deleted; n != 0 || d != 0 {
		t.Errorf("the restart minted %d and revoked %d tokens, want none", n, d)
	}
	if got := f.LiveTokens("c-two1"); got != 2 {
		t.Errorf("%d live tokens for the cluster, want one per source", got)
	}
}

// writeTwoSourcesConfig writes the service's configuration for
// TestTwoSourcesOnOneRancherUser into dir and returns its path.
func writeTwoSourcesConfig(t *testing.T, f *fakerancher.Fake, dir string) string {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	WriteFile(t, filepath.Join(dir, "token"), PluginToken+"\n")
	WriteFile(t, filepath.Join(dir, "rancher-token"), RancherToken+"\n")
	other := strings.Replace(f.URL(), "127.0.0.1", "localhost", 1) // the same Rancher, another address
	cfg := filepath.Join(dir, "config.yaml")
	WriteFile(t, cfg, fmt.Sprintf(`log: {level: debug}
server: {listen: "127.0.0.1:%d", tokens: [{file: token}], shutdownTimeout: 2s}
inventory: {interval: 1s, timeout: 5s}
sources:
  - name: left
    provider: rancher
    rancher: {url: %s, token: {file: rancher-token}, requestTimeout: 2s, clusterTokens: perCluster, tokenTTL: 1h, tokenGracePeriod: 1s}
  - name: right
    provider: rancher
    rancher: {url: %s, token: {file: rancher-token}, requestTimeout: 2s, clusterTokens: perCluster, tokenTTL: 1h, tokenGracePeriod: 1s, namePrefix: right-}
secrets:
  enabled: true
  namespace: %s
  ownerID: two
  policy: sync
  resync: 2s
  leaderElection: {enabled: false}
  kubeconfig: %s
`, port, f.URL(), other, twoSourcesNS, e.Kubeconfig))
	return cfg
}

// twoSourcesConnect checks that each source has a Secret that Argo CD
// connects with, each with its own token, and returns the tokens by source.
func twoSourcesConnect(t *testing.T) (map[string]string, error) {
	list, err := e.Kube.CoreV1().Secrets(twoSourcesNS).List(context.Background(), metav1.ListOptions{LabelSelector: "argocd.argoproj.io/secret-type=cluster"})
	if err != nil {
		return nil, err
	}
	if len(list.Items) != 2 {
		return nil, fmt.Errorf("%d Secrets, want one per source", len(list.Items))
	}
	tokens := map[string]string{}
	for i := range list.Items {
		s := &list.Items[i]
		if r := ArgoCDConnect(t, s); !r.OK {
			return nil, fmt.Errorf("%s: %s", s.Data["name"], r.Kind)
		}
		tokens[s.Labels["argocd-cluster-discovery.io/source"]] = BearerToken(s)
	}
	if tokens["left"] == tokens["right"] {
		return nil, fmt.Errorf("the two sources share a token")
	}
	return tokens, nil
}
