package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// agentSource is an aro source in agent mode, after the static one.
const agentSource = `  - name: aro-agents
    provider: aro
    aro:
      subscriptions: [2d8f4a6c-9b1e-4c3d-a5f7-8e0b1c2d3e4f]
      auth: agent
`

// TestHybridHub: a hub with agent clusters and the Secrets we write needs
// Argo CD 3.4 or later: a stated older version is refused, a newer one
// taken, an unstated one warned about; without Secrets, or without an
// agent source, no version matters.
func TestHybridHub(t *testing.T) {
	parse := sectionParser(t)
	secrets := func(extra string) string {
		return "secrets: {enabled: true, namespace: argocd, ownerID: hub" + extra + "}\n"
	}
	tests := []struct {
		name, yaml string
		wantErr    string
		wantWarn   bool
	}{
		{name: "older than 3.4", yaml: agentSource + secrets(", argocdVersion: 3.3.6"),
			wantErr: `secrets.argocdVersion: Invalid value: "3.3.6": a hub with agent clusters and the Secrets this service writes needs Argo CD 3.4.0 or later`},
		{name: "with a v", yaml: agentSource + secrets(", argocdVersion: v2.14.21"), wantErr: `secrets.argocdVersion: Invalid value: "v2.14.21": a hub with agent`},
		{name: "not a version", yaml: agentSource + secrets(", argocdVersion: latest"), wantErr: `secrets.argocdVersion: Invalid value: "latest": not a version such as 3.4.2`},
		{name: "3.4.0", yaml: agentSource + secrets(", argocdVersion: 3.4.0")},
		{name: "3.6.1", yaml: agentSource + secrets(", argocdVersion: v3.6.1")},
		{name: "unstated", yaml: agentSource + secrets(""), wantWarn: true},
		{name: "no Secrets written", yaml: agentSource + "secrets: {enabled: false, argocdVersion: 3.2.12}\n"},
		{name: "no agent source", yaml: secrets(", argocdVersion: 3.2.12")},
		{name: "credentials for an agent source", yaml: agentSource + secrets(", credentials: {aro-agents: {bearerToken: {env: T}}}"),
			wantErr: "secrets.credentials[aro-agents]: Forbidden: the source's clusters are reached through the Argo CD agent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parse(tt.yaml)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if !tt.wantWarn {
				assert.Empty(t, cfg.Warnings)
				return
			}
			require.Len(t, cfg.Warnings, 1)
			assert.Contains(t, cfg.Warnings[0], "sources aro-agents reach their clusters through the Argo CD agent and secrets.enabled is on")
			assert.Contains(t, cfg.Warnings[0], "set secrets.argocdVersion to have it checked")
		})
	}
}
