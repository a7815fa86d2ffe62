package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
)

const flapNS = "argocd-tokenflap"

// flapReplica is one replica of TestTokensSurviveLeaderFlaps.
type flapReplica struct {
	addr string
	proc *Proc
}

// freeze stops the replica's process as a frozen node would (SIGSTOP), or
// lets it run again.
func (r *flapReplica) freeze(stop bool) {
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	_ = syscall.Kill(-r.proc.Cmd.Process.Pid, sig)
}

// TestTokensSurviveLeaderFlaps: two replicas, per-cluster tokens that
// Rancher cuts to 12 s (renewed every 8 s, the replaced one revoked 1 s
// after its Secret holds the new one). No token is ever revoked while a
// Secret holds it. The leader is frozen past its lease, the other takes
// over; then the first leads again (A→B→A). After each change of hands,
// Argo CD's own client code connects through every Secret: a returning
// leader never writes a token of its earlier term, which its successor
// revoked or let expire; and once the grace periods have passed, each
// cluster has one live token.
func TestTokensSurviveLeaderFlaps(t *testing.T) {
	f := e.NewKubeRancher(t)
	f.Set(fakerancher.Cluster{ID: "c-flap1", Name: "proxied", State: "active"})
	f.Set(fakerancher.Cluster{ID: "c-flap2", Name: "direct", State: "active", ACE: true})
	f.SetMaxTTL(12 * time.Second)
	revokedHeld := watchRevocations(t, f, flapNS)
	replicas := startFlapReplicas(t, f)
	logs := func() string { return replicas[0].proc.Tail(30) + "\n" + replicas[1].proc.Tail(30) }
	leader := func() int {
		for i, r := range replicas {
			if Leads(r.addr) {
				return i
			}
		}
		return -1
	}
	var a int
	Poll(t, 60*time.Second, "a leader", func() error {
		if a = leader(); a < 0 {
			return fmt.Errorf("no leader yet")
		}
		return nil
	}, logs)
	connects := func(what string) {
		t.Helper()
		Poll(t, 40*time.Second, what, func() error { return flapSecretsConnect(t, f) }, logs)
	}
	connects("the first leader's Secrets connect")
	b := 1 - a
	for _, step := range []struct{ frozen, next int }{{a, b}, {b, a}, {a, b}} {
		replicas[step.frozen].freeze(true)
		Poll(t, 30*time.Second, "the other replica takes over", func() error {
			if !Leads(replicas[step.next].addr) {
				return fmt.Errorf("replica %d does not lead yet", step.next)
			}
			return nil
		}, logs)
		time.Sleep(9 * time.Second) // every token renewed at least once under the new leader
		replicas[step.frozen].freeze(false)
		connects(fmt.Sprintf("every Secret connects after replica %d took over from %d", step.next, step.frozen))
	}
	Poll(t, 20*time.Second, "one live token per cluster once the grace periods have passed", func() error {
		if got := f.LiveTokensByCluster(); got["c-flap1"] != 1 || got["c-flap2"] != 1 {
			return fmt.Errorf("live tokens %v", got)
		}
		return nil
	}, logs)
	if held := revokedHeld(); len(held) > 0 {
		t.Errorf("tokens revoked while a Secret held them, of %v", held)
	}
	if f.TokensDeleted() == 0 {
		t.Error("no token was revoked: the scenario did not renew")
	}
}

// watchRevocations records, at each revocation on f, the clusters whose
// Secret in namespace holds the revoked token; the function returned
// reads them.
func watchRevocations(t *testing.T, f *fakerancher.Fake, namespace string) func() []string {
	t.Helper()
	var mu sync.Mutex
	var held []string
	f.OnRevoke(func(bearer string) {
		list, err := e.Kube.CoreV1().Secrets(namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return
		}
		for i := range list.Items {
			if BearerToken(&list.Items[i]) == bearer {
				mu.Lock()
				held = append(held, string(list.Items[i].Data["name"]))
				mu.Unlock()
			}
		}
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), held...)
	}
}

// startFlapReplicas starts two replicas of one installation on f, with
// leader election on a short lease, writing in flapNS.
func startFlapReplicas(t *testing.T, f *fakerancher.Fake) []*flapReplica {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: flapNS}},
		metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Secrets(flapNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	dir := t.TempDir()
	WriteFile(t, filepath.Join(dir, "token"), PluginToken+"\n")
	WriteFile(t, filepath.Join(dir, "rancher-token"), RancherToken+"\n")
	replicas := make([]*flapReplica, 2)
	for i := range replicas {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		replicas[i] = &flapReplica{addr: fmt.Sprintf("127.0.0.1:%d", port)}
		cfg := filepath.Join(dir, fmt.Sprintf("config-%d.yaml", i))
		WriteFile(t, cfg, fmt.Sprintf(`log: {level: debug}
server: {listen: %q, tokens: [{file: token}], shutdownTimeout: 2s}
inventory: {interval: 1s, timeout: 5s}
sources:
  - name: flap
    provider: rancher
    rancher: {url: %s, token: {file: rancher-token}, requestTimeout: 2s, ace: auto, aceAllowedHosts: [127.0.0.1],
              clusterTokens: perCluster, tokenTTL: 1h, tokenGracePeriod: 1s}
secrets:
  enabled: true
  namespace: %s
  ownerID: flap
  policy: sync
  resync: 2s
  leaderElection: {leaseName: acd-flap, leaseDuration: 3s, renewDeadline: 2s, retryPeriod: 300ms}
  kubeconfig: %s
`, replicas[i].addr, f.URL(), flapNS, e.Kubeconfig))
		p := e.Serve(t, ServiceRun{Name: fmt.Sprintf("replica-%d", i), Dir: dir, Config: cfg})
		replicas[i].proc = p
		t.Cleanup(func() { replicas[i].freeze(false); p.Stop() })
	}
	return replicas
}

// flapSecretsConnect checks that both clusters have a Secret and Argo CD
// connects through each.
func flapSecretsConnect(t *testing.T, f *fakerancher.Fake) error {
	list, err := e.Kube.CoreV1().Secrets(flapNS).List(context.Background(), metav1.ListOptions{LabelSelector: "argocd.argoproj.io/secret-type=cluster"})
	if err != nil {
		return err
	}
	if len(list.Items) != 2 {
		return fmt.Errorf("%d Secrets", len(list.Items))
	}
	for i := range list.Items {
		if r := ArgoCDConnect(t, &list.Items[i]); !r.OK {
			return fmt.Errorf("%s: %s (live tokens %v)", list.Items[i].Data["name"], r.Kind, f.LiveTokensByCluster())
		}
	}
	return nil
}
