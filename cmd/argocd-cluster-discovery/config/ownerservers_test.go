package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoCredentialsOverrideWhereOwnersChooseServers: secrets.credentials
// sends one credential to every server of a source, so it is refused for
// a source whose cluster owners choose their servers (Rancher with ace
// true or auto, ARO), and taken for a Rancher source through its proxy.
func TestNoCredentialsOverrideWhereOwnersChooseServers(t *testing.T) {
	parse := sectionParser(t)
	rancher := func(ace string) string {
		return "  - name: r\n    provider: rancher\n    rancher:\n      url: https://rancher.example.com\n      token: {env: RANCHER_TOKEN}\n" +
			"      ace: " + ace + "\n      aceAllowedHosts: [\"*.k8s.example.com\"]\n"
	}
	const aro = "  - name: r\n    provider: aro\n    aro:\n      subscriptions: [2d8f4a6c-9b1e-4c3d-a5f7-8e0b1c2d3e4f]\n"
	const override = "secrets: {enabled: true, namespace: argocd, ownerID: hub, credentials: {r: {bearerToken: {env: T}}}}\n"
	const why = "secrets.credentials[r]: Forbidden: the source's cluster owners choose their servers"
	for _, tc := range []struct{ name, sources, wantErr string }{
		{name: "rancher, ace true", sources: rancher("\"true\""), wantErr: why},
		{name: "rancher, ace auto", sources: rancher("auto"), wantErr: why},
		{name: "rancher through its proxy", sources: rancher("\"false\"")},
		{name: "aro", sources: aro, wantErr: why},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.sources + override)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
