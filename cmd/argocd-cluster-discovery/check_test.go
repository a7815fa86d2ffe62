package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testca"
)

// TestDiscoverCheck: discover --check connects to each cluster with the
// credentials its Secret would get and says, one line per cluster (name,
// server, phase, result, detail), what a platform engineer needs when
// Argo CD shows a cluster's connection as Failed: the HTTP status with the
// answer's own code and message (Rancher's proxy included), x509 with the
// issuer seen, a timeout; exec clusters reached anonymously with their CA;
// the clusters that get no Secret, with why. -o json gives the same.
func TestDiscoverCheck(t *testing.T) {
	config, apiURL, silentAddr := checkFixture(t)
	var stdout, stderr bytes.Buffer
	args := []string{"discover", "--config", config, "--check", "--check-timeout", "500ms"}
	code := run(context.Background(), args, &stdout, &stderr)
	assert.Equal(t, 1, code, stderr.String())
	assert.Contains(t, stderr.String(), "5 cluster(s) could not be reached")
	lines := map[string][]string{} // name: server, phase, result, detail
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		f := strings.Fields(l)
		require.GreaterOrEqual(t, len(f), 4, l)
		lines[f[0]] = []string{f[1], f[2], f[3], strings.Join(f[4:], " ")}
	}
	assert.Equal(t, []string{apiURL + "/ok", "ready", "ok", "v1.32.2"}, lines["ok"])
	assert.Equal(t, []string{apiURL + "/wrong-token", "ready", "failed", "401 Unauthorized"}, lines["wrong-token"])
	assert.Equal(t, "failed", lines["wrong-ca"][2])
	assert.Contains(t, lines["wrong-ca"][3], "x509: certificate signed by unknown authority (issuer")
	assert.Equal(t, []string{apiURL + "/k8s/clusters/c-disconnected", "ready", "failed", "503 ClusterUnavailable: cluster agent disconnected"}, lines["disconnected"])
	assert.Equal(t, []string{apiURL + "/eks", "ready", "reachable", "TLS and CA ok, anonymous /version: 401 Unauthorized; exec credentials not checked"}, lines["eks"])
	assert.Equal(t, "failed", lines["eks-wrong-ca"][2], "an exec cluster whose CA is wrong fails in Argo CD too")
	assert.Equal(t, []string{"https://" + silentAddr, "ready", "failed", "timeout"}, lines["silent"])
	assert.Equal(t, []string{"-", "pending", "unserved", "waiting for the agent"}, lines["waiting"])
	assert.Equal(t, []string{"-", "-", "unserved", "duplicate (same server) of eks from source f"}, lines["eks-twice"])
	assert.Len(t, lines, 9)
	for _, secret := range []string{"good-token", "bad-token"} {
		assert.NotContains(t, stdout.String()+stderr.String(), secret, "no credential in the output")
	}

	// the same as JSON
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), append(args, "-o", "json"), &stdout, &stderr)
	assert.Equal(t, 1, code, stderr.String())
	var results []checkResult
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &results), stdout.String())
	require.Len(t, results, 9)
	byName := map[string]checkResult{}
	for _, r := range results {
		byName[r.Name] = r
	}
	assert.Equal(t, checkResult{Name: "disconnected", Source: "f", Server: apiURL + "/k8s/clusters/c-disconnected", Phase: "ready",
		Result: checkFailed, Status: 503, Detail: "503 ClusterUnavailable: cluster agent disconnected"}, byName["disconnected"])
	assert.Equal(t, checkResult{Name: "ok", Source: "f", Server: apiURL + "/ok", Phase: "ready", Result: checkOK, Status: 200, Detail: "v1.32.2"}, byName["ok"])
	assert.Equal(t, checkResult{Name: "waiting", Source: "f", Phase: "pending", Result: checkUnserved, Detail: "waiting for the agent"}, byName["waiting"])
}

// checkFixture is a TLS API server (/version for the token good-token, 401
// otherwise, Rancher's 503 for a disconnected cluster's proxy path), a
// port that never answers, and a static source listing one cluster for
// each case of discover --check; it returns the configuration's path.
func checkFixture(t *testing.T) (config, apiURL, silentAddr string) {
	t.Helper()
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Header.Get("Authorization") != "Bearer good-token":
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`)
		case strings.HasPrefix(r.URL.Path, "/k8s/clusters/c-disconnected/"): // Rancher's proxy, the agent gone
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"type":"error","status":"503","code":"ClusterUnavailable","message":"cluster agent disconnected"}`)
		default:
			fmt.Fprint(w, `{"major":"1","minor":"32","gitVersion":"v1.32.2"}`)
		}
	}))
	t.Cleanup(api.Close)
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	require.NoError(t, err)
	t.Cleanup(func() { silent.Close() })

	caData := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw}))
	other, err := testca.NewSigner()
	require.NoError(t, err)
	otherDER, err := other.DER(1)
	require.NoError(t, err)

	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	write("good", "good-token\n")
	write("bad", "bad-token\n")
	write("api-token", "t\n")
	write("clusters.yaml", fmt.Sprintf(`clusters:
  - {name: ok, server: %[1]s/ok, caData: %[2]s, auth: {bearerToken: {file: %[3]s/good}}}
  - {name: wrong-token, server: %[1]s/wrong-token, caData: %[2]s, auth: {bearerToken: {file: %[3]s/bad}}}
  - {name: wrong-ca, server: %[1]s/wrong-ca, caData: %[4]s, auth: {bearerToken: {file: %[3]s/good}}}
  - {name: disconnected, server: %[1]s/k8s/clusters/c-disconnected, caData: %[2]s, auth: {bearerToken: {file: %[3]s/good}}}
  - {name: eks, server: %[1]s/eks, caData: %[2]s, auth: {aws: {clusterName: eks}}}
  - {name: eks-wrong-ca, server: %[1]s/eks-other, caData: %[4]s, auth: {aws: {clusterName: eks-other}}}
  - {name: silent, server: "https://%[5]s", caData: %[2]s, auth: {bearerToken: {file: %[3]s/good}}}
  - {name: waiting, server: %[1]s/waiting, phase: pending, ready: false, notReadyReason: "waiting for the agent"}
`, api.URL, caData, dir, testca.CAData(otherDER), silent.Addr()))
	// a second source lists eks again: one file may not name a server twice
	write("more.yaml", fmt.Sprintf("clusters:\n  - {name: eks-twice, server: %s/eks, caData: %s, auth: {aws: {clusterName: eks}}}\n", api.URL, caData))
	write("config.yaml", "server: {tokens: [{file: api-token}]}\nsources:\n"+
		"  - {name: f, provider: static, static: {file: clusters.yaml}}\n  - {name: g, provider: static, static: {file: more.yaml}}\n")

	return filepath.Join(dir, "config.yaml"), api.URL, silent.Addr().String()
}

// TestAnswerText: an error answer as the check prints it.
func TestAnswerText(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"rancher", 503, `{"type":"error","status":"503","code":"ClusterUnavailable","message":"cluster agent disconnected"}`, "503 ClusterUnavailable: cluster agent disconnected"},
		{"a Status", 403, `{"kind":"Status","status":"Failure","message":"forbidden: User \"x\" cannot get path \"/version\"","reason":"Forbidden","code":403}`,
			`403 Forbidden: forbidden: User "x" cannot get path "/version"`},
		{"no body", 502, ``, "502 Bad Gateway"},
		{"html", 500, `<html>oops</html>`, "500 Internal Server Error"},
		{"rancher's proxy, as text", 500, "cluster agent disconnected", "500 Internal Server Error: cluster agent disconnected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, answerText(tc.status, []byte(tc.body)))
		})
	}
}
