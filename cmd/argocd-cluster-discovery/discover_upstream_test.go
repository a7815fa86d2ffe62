package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeaws "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/aws"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
)

// TestDiscoverEKSThroughTheRealSDK wires an eks source from the
// configuration file to the fake EKS API (internal/fake/aws) serving the
// upstream fixtures, and prints what the plugin API would answer.
func TestDiscoverEKSThroughTheRealSDK(t *testing.T) {
	fake, err := fakeaws.New("../../testdata/fixtures/eks")
	require.NoError(t, err)
	defer fake.Close()
	fake.KnownKeysOnly = true // signed with the configured credentials
	fake.SetKey("AKIDEXAMPLE", "123456789012")
	fake.Add("123456789012", "eu-west-1", fakeaws.Cluster{Name: "payments-prod", Tags: map[string]string{"env": "prod"}})
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
      endpoint: `+fake.URL()+`
      taggingEndpoint: `+fake.URL()+`
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
	assert.Equal(t, 1, fake.Count("ListClusters"))
	assert.Empty(t, fake.BadAuth())

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

// TestDiscoverRancherThroughNorman wires a rancher source from the
// configuration file to the fake Rancher (internal/fake/rancher), through
// norman, two pages of clusters.
func TestDiscoverRancherThroughNorman(t *testing.T) {
	const token = "token-abcde:k8vq5x2m9lzt7wbr4c6nhp8sd2jfk4gqx9mt5vwl2rzc7b8nq4xsdh"
	fake, err := fakerancher.New("../../testdata/fixtures/rancher", token)
	require.NoError(t, err)
	defer fake.Close()
	for _, c := range []fakerancher.Cluster{{ID: "c-m-00000001", Name: "prod-eu-west", State: "active"},
		{ID: "c-m-00000002", Name: "staging-eks", State: "active"}, {ID: "c-m-00000003", Name: "edge-k3s-01", State: "active"}} {
		fake.Set(c)
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rancher-token"), []byte(token+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(`
server: {tokens: [{file: token}]}
sources:
  - name: rancher-eu
    provider: rancher
    rancher:
      url: `+fake.URL()+`
      token: {file: rancher-token}
      namePrefix: eu-
      pageLimit: 2
secrets: {ownerID: fleet-a}
`), 0o600))
	params, stdout, stderr := discoverParams(t, filepath.Join(dir, "config.yaml"))
	var got []string
	for _, p := range params {
		got = append(got, p["name"].(string)+" "+p["server"].(string))
		assert.Equal(t, "rancher", p["provider"])
	}
	assert.Equal(t, []string{
		"eu-edge-k3s-01 " + fake.Server("c-m-00000003"),
		"eu-prod-eu-west " + fake.Server("c-m-00000001"),
		"eu-staging-eks " + fake.Server("c-m-00000002"),
	}, got, "clusters across both pages (pageLimit 2), sorted by name")
	assert.Equal(t, 2, fake.Served(), "two pages")
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
