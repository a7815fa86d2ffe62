package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
)

// TestClientGoLogsInTheConfiguredFormat: what client-go logs through klog
// (for example its client-side throttling lines) comes out as the
// service's own JSON lines, at the configured level, not klog's format.
func TestClientGoLogsInTheConfiguredFormat(t *testing.T) {
	var logs testlog.Buffer
	routeKlog(newLogger(config.Log{Level: "info", Format: "json"}, &logs))
	defer klog.ClearLogger()

	klog.Infof("Waited for %s due to client-side throttling, not priority and fairness", "1.2s")
	klog.V(4).Info("a detail below the configured level")
	klog.Flush()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 1, logs.String())
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &line), "a JSON line, not klog's I1123 ... format: %s", lines[0])
	assert.Equal(t, "client-go", line["component"])
	assert.Contains(t, line["msg"], "client-side throttling")
	assert.Equal(t, "INFO", line["level"])
}

// TestKubeClientRateLimits: the reconciler's and the trigger's client take
// secrets.client, not client-go's defaults (5/s, burst 10).
func TestKubeClientRateLimits(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	def := config.Default().Secrets
	def.Kubeconfig = kubeconfig
	rc, err := kubeConfig(def)
	require.NoError(t, err)
	assert.Equal(t, float32(200), rc.QPS, "the default")
	assert.Equal(t, 400, rc.Burst)
	assert.True(t, strings.HasPrefix(rc.UserAgent, "argocd-cluster-discovery/"))

	def.Client = config.Client{QPS: 50, Burst: 60}
	rc, err = kubeConfig(def)
	require.NoError(t, err)
	assert.Equal(t, float32(50), rc.QPS)
	assert.Equal(t, 60, rc.Burst)
}
