package clustersecret

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestRedactedHidesTheTokenOfAWrittenSecret protects the redaction of
// dry-run output on another path than TestBuild's: the Secret is the one
// the reconciler wrote, as the API server returns it, with a bearer token
// read from a file. Redacted's copy holds the token in none of its data,
// says "<redacted>" in its place, keeps the rest of the config as written,
// and leaves the Secret it was given as it was.
func TestRedactedHidesTheTokenOfAWrittenSecret(t *testing.T) {
	const token = "sha256~RedactMeFromTheTokenFile-4f8a2c9e"
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	e := newEnv(t)
	f := newFleet(t, "a")
	pass(t, newReconciler(t, e, f, func(c *Config) {
		c.Credentials = map[string]CredentialOverride{"fleet": {BearerToken: &sources.SecretRef{File: tokenFile}}}
	}))
	written := e.get(sn("a"))
	config := string(written.Data["config"])
	require.Contains(t, config, token, "the Secret holds the token")

	red := Redacted(written)
	for k, v := range red.Data {
		assert.NotContains(t, string(v), "RedactMeFromTheTokenFile", "data %s holds the token", k)
	}
	var got, want map[string]any
	require.NoError(t, json.Unmarshal(red.Data["config"], &got))
	require.NoError(t, json.Unmarshal(written.Data["config"], &want))
	assert.Equal(t, "<redacted>", got["bearerToken"], "the token is replaced")
	delete(got, "bearerToken")
	delete(want, "bearerToken")
	assert.Equal(t, want, got, "the rest of the config as written")
	assert.Equal(t, written.Labels, red.Labels)
	assert.Equal(t, config, string(written.Data["config"]), "the Secret given is not modified")
}
