package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
)

func TestRefreshConfig(t *testing.T) {
	base := "server: {tokens: [{env: T}]}\nsources: [{name: one, provider: static, static: {clusters: [{name: a, server: 'https://a.example.com'}]}}]\n"
	parse := func(doc string) *config.Config {
		cfg, err := config.Parse([]byte(base+doc), t.TempDir())
		require.NoError(t, err)
		return cfg
	}

	rc := parse("applicationSetRefresh: {enabled: true}\nsecrets: {namespace: argo}\n").Refresh()
	assert.Equal(t, []string{"argo"}, rc.Namespaces, "no namespace: Argo CD's")
	assert.Empty(t, rc.SecretsNamespace, "no Secret reconciler, no Secret watch")
	assert.False(t, rc.DryRun)
	assert.Equal(t, "argocd-cluster-discovery", rc.PluginConfigMap)

	cfg := parse("applicationSetRefresh: {enabled: true, namespaces: ['*']}\nsecrets: {enabled: true, ownerID: fleet-a, dryRun: true}\n")
	rc = cfg.Refresh()
	assert.Equal(t, []string{"*"}, rc.Namespaces)
	assert.Equal(t, "argocd", rc.SecretsNamespace)
	assert.Equal(t, "argocd.argoproj.io/secret-type=cluster,app.kubernetes.io/managed-by=argocd-cluster-discovery,argocd-cluster-discovery.io/owner=fleet-a", rc.SecretsSelector)
	assert.True(t, rc.DryRun, "--dry-run (secrets.dryRun) writes nothing, ApplicationSets included")
	require.Empty(t, rc.Validate(nil))
}
