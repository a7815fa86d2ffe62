package e2e

import (
	"testing"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/front"
)

// clusterFront stands at the API server addresses the fake clouds report
// (EKS endpoints, AKS FQDNs; reached through a connectProxy) and passes
// every request, its bearer token included, to the suite's kube-apiserver
// (internal/fake/front). It remembers the host each token was sent to, so
// that the webhook can judge a token as the cluster at that host would
// (authn.Webhook.RouteBy).
type clusterFront struct {
	*front.ClusterFront
	caPEM []byte
}

// newClusterFront serves hosts (wildcards allowed, as in certificates).
func newClusterFront(t *testing.T, hosts ...string) *clusterFront {
	t.Helper()
	f, err := front.NewClusterFront(e.rest, "e2e-cloud-cluster-ca", t.TempDir(), hosts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return &clusterFront{ClusterFront: f, caPEM: f.CAPEM()}
}

// addr is where a connectProxy tunnels the clusters' hosts.
func (f *clusterFront) addr() string { return f.Addr() }

// served says how many requests came for host.
func (f *clusterFront) served(host string) int { return f.Served(host) }

// hostOf is the host a bearer token was sent to.
func (f *clusterFront) hostOf(token string) (string, bool) { return f.HostOf(token) }
