package main

import (
	"bytes"
	"context"
	"encoding/base64"
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

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/testca"
)

// TestDiscoverCheck: discover --check connects to each cluster with the
// credentials its Secret would get and says, one line per cluster, what a
// platform engineer needs when Argo CD shows a cluster as Unknown.
func TestDiscoverCheck(t *testing.T) {
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good-token" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`)
			return
		}
		fmt.Fprint(w, `{"major":"1","minor":"32","gitVersion":"v1.32.2"}`)
	}))
	defer api.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	require.NoError(t, err)
	defer silent.Close()

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
  - {name: eks, server: %[1]s/eks, caData: %[2]s, auth: {aws: {clusterName: eks}}}
  - {name: silent, server: "https://%[5]s", caData: %[2]s, auth: {bearerToken: {file: %[3]s/good}}}
`, api.URL, caData, dir, testca.CAData(otherDER), silent.Addr()))
	write("config.yaml", "server: {tokens: [{file: api-token}]}\nsources: [{name: f, provider: static, static: {file: clusters.yaml}}]\n")

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"discover", "--config", filepath.Join(dir, "config.yaml"), "--check", "--check-timeout", "500ms"}, &stdout, &stderr)
	assert.Equal(t, 1, code, stderr.String())
	assert.Contains(t, stderr.String(), "3 cluster(s) could not be reached")
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		name, result, _ := strings.Cut(l, " ")
		lines[name] = strings.TrimSpace(result)
	}
	assert.Equal(t, "ok v1.32.2", lines["ok"])
	assert.Equal(t, "401 unauthorized", lines["wrong-token"])
	assert.Contains(t, lines["wrong-ca"], "x509: certificate signed by unknown authority (issuer")
	assert.Equal(t, "not checked (exec credentials)", lines["eks"])
	assert.Equal(t, "timeout", lines["silent"])
	assert.Len(t, lines, 5)
	for _, secret := range []string{"good-token", "bad-token"} {
		assert.NotContains(t, stdout.String()+stderr.String(), secret, "no credential in the output")
	}
}
