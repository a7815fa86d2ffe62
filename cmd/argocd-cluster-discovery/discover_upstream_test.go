package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDiscoverEKSThroughTheRealSDK wires an eks source from the
// configuration file to an HTTP fake of the EKS API serving the upstream
// fixtures, and prints what the plugin API would answer.
func TestDiscoverEKSThroughTheRealSDK(t *testing.T) {
	describe, err := os.ReadFile("../../testdata/fixtures/eks/eks-describe-cluster.json")
	require.NoError(t, err)
	var calls sync.Map
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Store(r.Method+" "+r.URL.Path, true)
		assert.Contains(t, r.Header.Get("Authorization"), "AKIDEXAMPLE/", "signed with the configured credentials")
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/clusters":
			_, _ = io.WriteString(w, `{"clusters":["payments-prod"]}`)
		case "/clusters/payments-prod":
			_, _ = w.Write(describe)
		case "/": // the Resource Groups Tagging API (AWS JSON 1.1), tags read at every listing
			assert.Equal(t, "ResourceGroupsTaggingAPI_20170126.GetResources", r.Header.Get("X-Amz-Target"))
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			_, _ = io.WriteString(w, `{"PaginationToken":"","ResourceTagMappingList":[{"ResourceARN":"arn:aws:eks:eu-west-1:123456789012:cluster/payments-prod","Tags":[{"Key":"env","Value":"prod"}]}]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer fake.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`
server: {tokens: [{file: token}]}
sources:
  - name: aws-prod
    provider: eks
    eks:
      regions: [eu-west-1]
      accounts: [{id: "123456789012", argocdRoleARN: "arn:aws:iam::123456789012:role/argocd-deployer"}]
      endpoint: `+fake.URL+`
      taggingEndpoint: `+fake.URL+`
      maxAttempts: 1
`), 0o600))
	params, stdout, stderr := discoverParams(t, filepath.Join(dir, "config.yaml"))
	require.Len(t, params, 1)
	p := params[0]
	assert.Equal(t, "payments-prod", p["name"])
	assert.Equal(t, "prod", p["metadata"].(map[string]any)["labels"].(map[string]any)["env"], "tags from the tagging API")
	assert.Equal(t, "ready", p["phase"])
	assert.Equal(t, "eks", p["provider"])
	assert.Equal(t, "aws-prod", p["source"])
	assert.Equal(t, "eu-west-1", p["region"])
	_, listed := calls.Load("GET /clusters")
	assert.True(t, listed)

	stdout.Reset()
	code := run(context.Background(), []string{"discover", "--config", filepath.Join(dir, "config.yaml"), "--secrets"}, stdout, stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Contains(t, stdout.String(), `"awsAuthConfig":{"clusterName":"payments-prod","roleARN":"arn:aws:iam::123456789012:role/argocd-deployer"}`)
}

// discoverParams runs discover on a configuration file and decodes the
// parameters it prints; stdout and stderr are returned for more checks.
func discoverParams(t *testing.T, config string) ([]map[string]any, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"discover", "--config", config}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	var out struct {
		Output struct {
			Parameters []map[string]any `json:"parameters"`
		} `json:"output"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	return out.Output.Parameters, &stdout, &stderr
}

// fakeRancher serves the upstream-shaped /v3 fixtures: the API root with
// X-Api-Schemas, the schemas, two pages of clusters and the cacerts
// setting, with the fixtures' absolute links pointing at the fake.
func fakeRancher(t *testing.T, token string) *httptest.Server {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("../../testdata/fixtures/rancher", name))
		require.NoError(t, err)
		return b
	}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v3/settings/cacerts" && r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"type":"error","status":"401","message":"must authenticate"}`)
			return
		}
		serve := func(name string) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(bytes.ReplaceAll(read(name), []byte("https://rancher.example.com"), []byte(srv.URL)))
		}
		switch {
		case r.URL.Path == "/v3":
			w.Header().Set("X-Api-Schemas", srv.URL+"/v3/schemas")
			_, _ = io.WriteString(w, `{"type":"apiRoot"}`)
		case r.URL.Path == "/v3/schemas":
			serve("rancher-schemas-min.json")
		case r.URL.Path == "/v3/settings/cacerts":
			serve("rancher-settings-cacerts.json")
		case r.URL.Path == "/v3/clusters" && r.URL.Query().Get("marker") == "c-m-2x7kqz4b":
			serve("rancher-clusters-page2.json")
		case r.URL.Path == "/v3/clusters":
			serve("rancher-clusters-page1.json")
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDiscoverRancherThroughNorman wires a rancher source from the
// configuration file to a fake Rancher serving the upstream fixtures.
func TestDiscoverRancherThroughNorman(t *testing.T) {
	const token = "token-abcde:k8vq5x2m9lzt7wbr4c6nhp8sd2jfk4gqx9mt5vwl2rzc7b8nq4xsdh"
	fake := fakeRancher(t, token)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rancher-token"), []byte(token+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`
server: {tokens: [{file: token}]}
sources:
  - name: rancher-eu
    provider: rancher
    rancher:
      url: `+fake.URL+`
      token: {file: rancher-token}
      namePrefix: eu-
secrets: {ownerID: fleet-a}
`), 0o600))
	params, stdout, stderr := discoverParams(t, filepath.Join(dir, "config.yaml"))
	var got []string
	for _, p := range params {
		got = append(got, p["name"].(string)+" "+p["server"].(string))
		assert.Equal(t, "rancher", p["provider"])
	}
	assert.Equal(t, []string{
		"eu-edge-k3s-01 " + fake.URL + "/k8s/clusters/c-5tbxq",
		"eu-prod-eu-west " + fake.URL + "/k8s/clusters/c-m-2x7kqz4b",
		"eu-staging-eks " + fake.URL + "/k8s/clusters/c-7qgnz",
	}, got, "clusters across both pages, the unavailable one too (degraded, still served); the local one is left out (includeLocal: false)")
	assert.NotContains(t, stdout.String()+stderr.String(), "k8vq5x2m9", "the Rancher token is in no output")

	stdout.Reset()
	code := run(context.Background(), []string{"discover", "--config", filepath.Join(dir, "config.yaml"), "--secrets"}, stdout, stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Contains(t, stdout.String(), `"bearerToken":"<redacted>"`)
	assert.NotContains(t, stdout.String(), "k8vq5x2m9")
}

// TestDiscoverUnresolvableUpstream: a source whose host does not resolve
// fails the listing with a clear error, and nothing is printed as if there
// were no clusters.
func TestDiscoverUnresolvableUpstream(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rancher-token"), []byte("token-abcde:secretvalue"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`
server: {tokens: [{file: token}]}
sources:
  - name: rancher-gone
    provider: rancher
    timeout: 10s
    rancher: {url: "https://rancher.invalid", token: {file: rancher-token}}
`), 0o600))
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"discover", "--config", filepath.Join(dir, "config.yaml")}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout.String(), "no empty answer")
	assert.Contains(t, stderr.String(), "rancher-gone")
	assert.Contains(t, stderr.String(), "have not completed a listing")
	assert.Contains(t, stderr.String(), "rancher.invalid")
	assert.NotContains(t, stderr.String(), "secretvalue")
}
