package aro

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// agentSecrets are the agents' Secrets of Argo CD's namespace, as the
// service reads them.
type agentSecrets struct {
	secrets []sources.AgentSecret
	err     error
}

func (a agentSecrets) Agents(context.Context) ([]sources.AgentSecret, error) { return a.secrets, a.err }

// agentFor is the Secret argocd-agentctl writes for agent, bound by the hub
// to the cluster with resource id id ("": unbound), in any case.
func agentFor(agent, id string) sources.AgentSecret {
	return sources.AgentSecret{Agent: agent, Secret: "cluster-" + agent, Name: agent,
		Server: "https://argocd-agent-resource-proxy:9090?agentName=" + agent, ClusterID: strings.ToLower(id), SkipReconcile: true}
}

// newAgentEnv is newTestEnv in agent mode.
func newAgentEnv(t *testing.T, a *armServer, agents sources.Agents, mut func(*Config)) *testEnv {
	t.Helper()
	cfg := Config{Subscriptions: []string{subC}, Auth: AuthAgent, NamePrefix: "aro-"}
	if mut != nil {
		mut(&cfg)
	}
	return newTestEnvWith(t, cfg, a.clientOptions(), sources.SourceOptions{TokenBindings: tokenSecrets{}, Agents: agents}, nil)
}

// TestAgentMode: each cluster is served under the agent its Secret is
// bound to, with that Secret's server verbatim and no credentials of its
// own, whatever its API server, domain or visibility; a cluster without a
// bound agent is listed not ready with the reason, never absent; an
// Updating one keeps its phase.
func TestAgentMode(t *testing.T) {
	a := newARMServer(t)
	bound := cluster(subC, "rg", "bound")
	tagged := cluster(subC, "rg", "tagged")
	tagged.Tags = map[string]string{"Argocd-Agent-Name": "edge-tagged"} // ARM tag keys are case-insensitive
	private := cluster(subC, "rg", "private")
	private.Private, private.Domain = true, "ocp.example.com" // no CA configured: push mode would not be ready
	updating := cluster(subC, "rg", "updating")
	updating.Provisioning = "Updating"
	unbound := cluster(subC, "rg", "unbound")
	unbound.Tags = map[string]string{"argocd-agent-name": "edge-unbound"}
	stranger := cluster(subC, "rg", "stranger")
	stranger.Tags = map[string]string{"argocd-agent-name": "edge-bound"} // another cluster's agent
	none := cluster(subC, "rg", "none")
	a.SetOpenShiftClusters(bound, tagged, private, updating, unbound, stranger, none)
	agents := agentSecrets{secrets: []sources.AgentSecret{
		agentFor("edge-bound", bound.ID()), agentFor("edge-tagged", tagged.ID()), agentFor("edge-private", private.ID()),
		agentFor("edge-updating", strings.ToUpper(updating.ID())), agentFor("edge-unbound", ""),
	}}
	env := newAgentEnv(t, a, agents, func(c *Config) { c.PrivateEndpoints.ProxyURL = "http://proxy.example.com:3128" })
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"aro-none", "aro-stranger", "aro-unbound", "edge-bound", "edge-private", "edge-tagged", "edge-updating"}, names(cs))

	for _, agent := range []string{"edge-bound", "edge-private", "edge-tagged", "edge-updating"} {
		c := byName(cs, agent)
		assert.True(t, c.Ready, agent)
		assert.Equal(t, "https://argocd-agent-resource-proxy:9090?agentName="+agent, c.Server, "the agent Secret's server, verbatim")
		assert.Equal(t, sources.Auth{Kind: sources.AuthAgent, Agent: &sources.AgentAuth{Name: agent, Secret: "cluster-" + agent}}, c.Auth)
		assert.True(t, c.CA.IsZero(), "no CA of the cluster's own: the agent Secret has the proxy's")
		assert.Empty(t, c.ProxyURL, "Argo CD never calls the cluster's API server")
		assert.Equal(t, agent, c.Labels[sources.LabelAgentName], "selectable as the cluster generator selects agent Secrets")
		require.NoError(t, c.Validate())
	}
	assert.Equal(t, sources.PhaseDegraded, byName(cs, "edge-updating").Phase, "Updating keeps its phase through the agent")
	assert.Equal(t, strings.ToLower(bound.ID()), byName(cs, "edge-bound").ID, "tracked by its resource id, whatever its name")

	for name, want := range map[string]string{
		"aro-none":     "agent not registered: no agent Secret is bound to this cluster (annotate the agent's Secret argocd-cluster-discovery.io/cluster-id=" + strings.ToLower(none.ID()) + ")",
		"aro-unbound":  `agent "edge-unbound" is registered but not bound to this cluster: annotate the agent's Secret argocd-cluster-discovery.io/cluster-id=` + strings.ToLower(unbound.ID()),
		"aro-stranger": `agent "edge-bound" is bound to another cluster by its Secret cluster-edge-bound: the tag argocd-agent-name alone never joins`,
	} {
		c := byName(cs, name)
		assert.False(t, c.Ready, name)
		assert.Equal(t, want, c.NotReadyReason, name)
		assert.NotEqual(t, sources.AuthAgent, c.Auth.Kind, name)
	}
	assert.Equal(t, 3.0, testutil.ToFloat64(env.src.metrics.NotReady.WithLabelValues(notReadyAgent)))
}

// TestAgentModeTagNames: a configured tag replaces argocd-agent-name; the
// default tag is then not read.
func TestAgentModeTagNames(t *testing.T) {
	a := newARMServer(t)
	c := cluster(subC, "rg", "one")
	c.Tags = map[string]string{"agent": "edge-other", "argocd-agent-name": "edge-one"}
	a.SetOpenShiftClusters(c)
	agents := agentSecrets{secrets: []sources.AgentSecret{agentFor("edge-one", c.ID())}}
	cs, err := newAgentEnv(t, a, agents, func(c *Config) { c.Agent.Tag = "agent" }).src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.False(t, cs[0].Ready)
	assert.Contains(t, cs[0].NotReadyReason, `tag agent names agent "edge-other"`)
}

// TestAgentsUnknown: when the agents' Secrets cannot be read the listing
// fails (Argo CD keeps everything), classified by the Kubernetes API's
// answer.
func TestAgentsUnknown(t *testing.T) {
	a := newARMServer(t)
	a.SetOpenShiftClusters(cluster(subC, "rg", "one"))
	env := newAgentEnv(t, a, agentSecrets{err: errors.New("agent secrets: list secrets in argocd: connection refused")}, nil)
	cs, err := env.src.Clusters(context.Background())
	require.Error(t, err)
	assert.Nil(t, cs)
	assert.Equal(t, opAgents, upstream.OperationOf(err))
	assert.Contains(t, err.Error(), "agents: agent secrets: list secrets in argocd")
}
