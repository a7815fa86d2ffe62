package clustersecret

// Agent clusters on the envtest control plane: the Secrets that
// argocd-agentctl or the principal write are never written, adopted or
// pruned, and no Secret of ours takes an agent's name.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// listedClusters is a source that lists what the test sets.
type listedClusters struct {
	mu       sync.Mutex
	clusters []sources.Cluster
}

func (l *listedClusters) Clusters(context.Context) ([]sources.Cluster, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.clusters, nil
}

// agentSecret is the Secret argocd-agentctl agent create writes for agent
// (argocd-agent cmd/ctl/agent.go), with extra labels.
func agentSecret(ns, agent string, extra map[string]string) *corev1.Secret {
	labels := map[string]string{LabelSecretType: "cluster", sources.LabelAgentName: agent}
	for k, v := range extra {
		labels[k] = v
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-" + agent, Namespace: ns, Labels: labels,
			Annotations: map[string]string{sources.AnnotationSkipReconcile: "true", sources.AnnotationAgentManagedBy: sources.AgentManager}},
		StringData: map[string]string{"name": agent, "server": "https://argocd-agent-resource-proxy:9090?agentName=" + agent,
			"config": `{"tlsClientConfig":{"insecure":false,"certData":"Y2VydA==","keyData":"a2V5","caData":"Y2E="}}`},
	}
}

// TestAgentSecretsAreNeverWritten: with agent Secrets as argocd-agentctl
// writes them in Argo CD's namespace, one of them carrying our managed-by
// and owner labels (copied by hand), passes with policy sync write our
// Secret for the push cluster only: nothing for the agent cluster, no
// Secret for a push cluster named as an agent (a clash by cluster name),
// and not one event on an agent Secret (a watch would see any create,
// update or delete), also when the agent cluster leaves.
func TestAgentSecretsAreNeverWritten(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, s := range []*corev1.Secret{
		agentSecret(e.ns, "edge-1", nil),
		agentSecret(e.ns, "edge-2", map[string]string{LabelManagedBy: ManagedByValue, LabelOwner: "test-owner", LabelSource: "fleet"}),
	} {
		_, err := e.admin.CoreV1().Secrets(e.ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	l, err := e.admin.CoreV1().Secrets(e.ns).List(ctx, metav1.ListOptions{LabelSelector: sources.LabelAgentName})
	require.NoError(t, err)
	w, err := e.admin.CoreV1().Secrets(e.ns).Watch(ctx, metav1.ListOptions{LabelSelector: sources.LabelAgentName, ResourceVersion: l.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()

	agent := sources.Cluster{Name: "edge-1", ID: "/subscriptions/s/resourcegroups/rg/providers/microsoft.redhatopenshift/openshiftclusters/one",
		Server: "https://argocd-agent-resource-proxy:9090?agentName=edge-1", Ready: true, Tenant: "acme",
		Auth: sources.Auth{Kind: sources.AuthAgent, Agent: &sources.AgentAuth{Name: "edge-1", Secret: "cluster-edge-1"}}}
	push := func(name string) sources.Cluster {
		return sources.Cluster{Name: name, Server: "https://" + name + ".example.com", Ready: true,
			Auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: name}}}
	}
	src := &listedClusters{clusters: []sources.Cluster{agent, push("edge-2"), push("plain")}}
	inv, err := inventory.New([]inventory.SourceSpec{{Name: "fleet", Provider: sources.ProviderStatic, Source: src, Interval: time.Hour, Timeout: 5 * time.Second}},
		inventory.Options{Departure: inventory.Departure{AfterListings: 2, GracePeriod: -1, MaxFraction: 1}})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(ctx))
	r := newReconciler(t, e, &fleet{t: t, inv: inv})

	ch := pass(t, r)
	assert.Equal(t, []string{sn("plain")}, names(ch.Create), "only the push cluster without a clash gets a Secret")
	assert.Equal(t, []Clash{{Cluster: "edge-2", Secret: "cluster-edge-2", By: "cluster name"}}, ch.Clashes,
		"a push cluster named as an agent gets no Secret")
	assert.Empty(t, ch.Delete)
	assert.ElementsMatch(t, []string{"cluster-edge-1", "cluster-edge-2", sn("plain")}, e.secretNames())

	// the agent cluster and edge-2 leave: confirmed after two listings
	src.mu.Lock()
	src.clusters = []sources.Cluster{push("plain")}
	src.mu.Unlock()
	for range 3 {
		require.NoError(t, inv.RefreshAll(ctx))
		ch = pass(t, r)
		assert.Empty(t, ch.Delete, "nothing of ours to delete: the agents' Secrets are theirs")
		assert.Empty(t, ch.Update)
	}
	assert.ElementsMatch(t, []string{"cluster-edge-1", "cluster-edge-2", sn("plain")}, e.secretNames())

	select {
	case ev := <-w.ResultChan():
		s, _ := ev.Object.(*corev1.Secret)
		require.Failf(t, "an agent Secret was written", "%s %v", ev.Type, s.GetName())
	case <-time.After(500 * time.Millisecond):
	}
}

// TestOursNeverTakesAnAgentsName: our Secret of cluster edge-3 was written
// before an agent named edge-3 registered; from then on the cluster's
// changes are not written (two Secrets with one name break Argo CD's
// destination lookup, and an update would write the agent's name again),
// the clash is reported, and our Secret is not deleted for it.
func TestOursNeverTakesAnAgentsName(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	f := newFleet(t, "edge-3")
	r := newReconciler(t, e, f)
	require.Equal(t, []string{sn("edge-3")}, names(pass(t, r).Create))
	_, err := e.admin.CoreV1().Secrets(e.ns).Create(ctx, agentSecret(e.ns, "edge-3", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	before := e.get(sn("edge-3"))

	writeMembers(t, f.path, member{name: "edge-3", env: "staging"}) // a change our Secret would take
	require.NoError(t, f.refresh())
	ch := pass(t, r)
	assert.Equal(t, []Clash{{Cluster: "edge-3", Secret: "cluster-edge-3", By: "cluster name"}}, ch.Clashes)
	assert.Empty(t, ch.Update, "never written again under an agent's name")
	assert.Empty(t, ch.Delete)
	assert.Equal(t, before.ResourceVersion, e.get(sn("edge-3")).ResourceVersion)
}
