package sources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	aroOne = "/subscriptions/s/resourcegroups/rg/providers/microsoft.redhatopenshift/openshiftclusters/one"
	aroTwo = "/subscriptions/s/resourcegroups/rg/providers/microsoft.redhatopenshift/openshiftclusters/two"
)

// registered is the agent Secret argocd-agentctl writes for agent, bound
// by the hub to the cluster id ("" unbound).
func registered(agent, id string) AgentSecret {
	return AgentSecret{Agent: agent, Secret: "cluster-" + agent, Name: agent,
		Server: "https://argocd-agent-resource-proxy:9090?agentName=" + agent, ClusterID: id, SkipReconcile: true}
}

func TestJoin(t *testing.T) {
	bound := registered("edge-1", aroOne)
	tests := []struct {
		name    string
		secrets []AgentSecret
		id      string
		claim   string
		want    AgentSecret
		wantErr string
	}{
		{name: "bound by the hub, untagged", secrets: []AgentSecret{bound}, id: aroOne, want: bound},
		{name: "the id compares case-insensitively", secrets: []AgentSecret{bound},
			id: "/subscriptions/s/resourceGroups/RG/providers/Microsoft.RedHatOpenShift/openShiftClusters/one", want: bound},
		{name: "bound and tagged alike", secrets: []AgentSecret{bound}, id: aroOne, claim: "edge-1", want: bound},
		{name: "nothing registered", id: aroOne,
			wantErr: "agent not registered: no agent Secret is bound to this cluster (annotate the agent's Secret argocd-cluster-discovery.io/cluster-id=" + aroOne + ")"},
		{name: "a tag alone never joins", secrets: []AgentSecret{registered("edge-1", "")}, id: aroOne, claim: "edge-1",
			wantErr: `agent "edge-1" is registered but not bound to this cluster: annotate the agent's Secret argocd-cluster-discovery.io/cluster-id=` + aroOne},
		{name: "a tag naming another cluster's agent", secrets: []AgentSecret{registered("edge-2", aroTwo)}, id: aroOne, claim: "edge-2",
			wantErr: `agent "edge-2" is bound to another cluster by its Secret cluster-edge-2: the tag argocd-agent-name alone never joins`},
		{name: "a tag naming no agent", secrets: []AgentSecret{bound}, id: aroOne, claim: "edge-9",
			wantErr: `agent not registered: tag argocd-agent-name names agent "edge-9", and no Secret is labelled argocd-agent.argoproj-labs.io/agent-name=edge-9`},
		{name: "a tag that is no DNS label", secrets: []AgentSecret{bound}, id: aroOne, claim: "Edge_1",
			wantErr: `tag argocd-agent-name names agent "Edge_1", which is not a DNS label`},
		{name: "two agents bound to one cluster", secrets: []AgentSecret{bound, registered("edge-2", aroOne)}, id: aroOne,
			wantErr: "2 agent Secrets are bound to this cluster (cluster-edge-1, cluster-edge-2): keep one"},
		{name: "two Secrets of one agent", secrets: []AgentSecret{bound, {Agent: "edge-1", Secret: "copy", Name: "edge-1"}}, id: aroOne,
			wantErr: `agent "edge-1" has 2 Secrets: its principal maps one only`},
		{name: "data.name is not the agent", secrets: []AgentSecret{func() AgentSecret { s := bound; s.Name = "renamed"; return s }()}, id: aroOne,
			wantErr: `agent Secret cluster-edge-1 names the cluster "renamed", not its agent "edge-1"`},
		{name: "no skip-reconcile", secrets: []AgentSecret{func() AgentSecret { s := bound; s.SkipReconcile = false; return s }()}, id: aroOne,
			wantErr: "agent Secret cluster-edge-1 lacks argocd.argoproj.io/skip-reconcile=true"},
		{name: "a server with user info", secrets: []AgentSecret{func() AgentSecret { s := bound; s.Server = "https://u:p@proxy:9090?agentName=edge-1"; return s }()}, id: aroOne,
			wantErr: "agent Secret cluster-edge-1: agent server url must not carry user info"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IndexAgents(tt.secrets).Join(tt.id, tt.claim, DefaultAgentTag)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), "p@proxy", "never the server's user info")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := IndexAgents(nil).Join(aroOne, "", DefaultAgentTag)
	assert.ErrorIs(t, err, ErrAgentNotRegistered)
}

func TestAgentServer(t *testing.T) {
	for _, s := range []string{"https://argocd-agent-resource-proxy:9090?agentName=edge-1", "https://proxy.example.com/?agentName=a&x=y"} {
		got, err := AgentServer(s)
		require.NoError(t, err, s)
		assert.Equal(t, s, got, "verbatim: the query is the agent's identity")
	}
	for s, want := range map[string]string{
		"ftp://proxy?agentName=a":           "scheme must be https or http",
		"https://?agentName=a":              "has no host",
		"https://proxy#x":                   "must not have a fragment",
		"https://proxy ?agentName=a":        "invalid agent server url",
		"https://proxy?agentName=a b":       "must not contain whitespace",
		"https://user@proxy:9090?agentName": "must not carry user info",
	} {
		_, err := AgentServer(s)
		assert.ErrorContains(t, err, want, s)
	}
}

// TestServerKeyKeepsTheQuery: every agent of a principal shares its host;
// the query tells them apart.
func TestServerKeyKeepsTheQuery(t *testing.T) {
	a := ServerKey("https://argocd-agent-resource-proxy:9090?agentName=a")
	assert.NotEqual(t, a, ServerKey("https://argocd-agent-resource-proxy:9090?agentName=b"))
	assert.Equal(t, a, ServerKey("HTTPS://Argocd-Agent-Resource-Proxy:9090/?agentName=a"))
	assert.Equal(t, "https://h.example.com", ServerKey("https://h.example.com:443/"))
}

func TestServeThroughAgent(t *testing.T) {
	labels := map[string]string{"env": "prod"}
	c := Cluster{Name: "aro-one", Server: "https://api.one.example.com:6443", ProxyURL: "http://proxy:3128", Labels: labels,
		Auth: Auth{Kind: AuthBearerToken, TokenRef: &SecretRef{Secret: &SecretKeyRef{Name: "t", Key: "token"}}}}
	c.ServeThroughAgent(registered("edge-1", aroOne))
	assert.Equal(t, "edge-1", c.Name)
	assert.Equal(t, "https://argocd-agent-resource-proxy:9090?agentName=edge-1", c.Server)
	assert.Empty(t, c.ProxyURL)
	assert.Equal(t, Auth{Kind: AuthAgent, Agent: &AgentAuth{Name: "edge-1", Secret: "cluster-edge-1"}}, c.Auth)
	assert.Equal(t, map[string]string{"env": "prod", LabelAgentName: "edge-1"}, c.Labels)
	assert.Equal(t, map[string]string{"env": "prod"}, labels, "the source's labels are not modified")
	require.NoError(t, c.Validate())
}

// TestDropAgentLabels: an owner's label or annotation never marks a
// cluster as an agent's; the service's own mark on an agent cluster stays.
func TestDropAgentLabels(t *testing.T) {
	owners := map[string]string{LabelAgentName: "edge-1", LabelAgentSelfRegistered: "true", "env": "prod"}
	notes := map[string]string{AnnotationAgentManagedBy: AgentManager, "note": "x"}
	push := Cluster{Labels: owners, Annotations: notes}
	push.DropAgentLabels()
	assert.Equal(t, map[string]string{"env": "prod"}, push.Labels)
	assert.Equal(t, map[string]string{"note": "x"}, push.Annotations)
	assert.Len(t, owners, 3, "copied, not modified")

	agent := Cluster{Labels: owners}
	agent.ServeThroughAgent(registered("edge-2", aroOne))
	agent.DropAgentLabels()
	assert.Equal(t, map[string]string{LabelAgentName: "edge-2", "env": "prod"}, agent.Labels)

	plain := map[string]string{"env": "prod"}
	c := Cluster{Labels: plain}
	c.DropAgentLabels()
	assert.Equal(t, map[string]string{"env": "prod"}, c.Labels)
}

func TestIsAgentSecret(t *testing.T) {
	assert.True(t, IsAgentSecret(map[string]string{LabelAgentName: "a"}, nil))
	assert.True(t, IsAgentSecret(map[string]string{LabelAgentSelfRegistered: "true"}, nil))
	assert.True(t, IsAgentSecret(nil, map[string]string{AnnotationAgentManagedBy: AgentManager}))
	assert.False(t, IsAgentSecret(map[string]string{"env": "prod"}, map[string]string{AnnotationAgentManagedBy: "someone"}))
}
