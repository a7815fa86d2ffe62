package generator

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

func TestParseParameters(t *testing.T) {
	raw := func(s string) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(s), &m))
		return m
	}
	c := func(name, source, tenant, region string, labels map[string]string) *sources.Cluster {
		return &sources.Cluster{Name: name, Source: source, Provider: sources.ProviderStatic, Tenant: tenant, Region: region, Labels: labels}
	}
	prodEU := c("acme-prod-eu", "aws", "acme", "eu-west-1", map[string]string{"env": "prod"})
	devUS := c("globex-dev-us", "azure", "globex", "us-east-1", map[string]string{"env": "dev", "team": "x"})
	noTenant := c("shared", "aws", "", "eu-west-1", nil)

	cases := []struct {
		name    string
		params  string
		matches []*sources.Cluster
		misses  []*sources.Cluster
		err     string
	}{
		{name: "empty", params: `{}`, matches: []*sources.Cluster{prodEU, devUS, noTenant}},
		{name: "tenant", params: `{"tenant":"acme"}`, matches: []*sources.Cluster{prodEU}, misses: []*sources.Cluster{devUS, noTenant}},
		{name: "empty tenant selects clusters without one", params: `{"tenant":""}`, matches: []*sources.Cluster{noTenant}, misses: []*sources.Cluster{prodEU, devUS}},
		{name: "tenant list is OR", params: `{"tenant":["globex","acme"]}`, matches: []*sources.Cluster{prodEU, devUS}, misses: []*sources.Cluster{noTenant}},
		{name: "fields are AND", params: `{"tenant":"acme","region":"us-east-1"}`, misses: []*sources.Cluster{prodEU, devUS, noTenant}},
		{name: "source", params: `{"source":"azure"}`, matches: []*sources.Cluster{devUS}, misses: []*sources.Cluster{prodEU}},
		{name: "provider", params: `{"provider":"static"}`, matches: []*sources.Cluster{prodEU, devUS}},
		{name: "selector", params: `{"labelSelector":"env=dev,team"}`, matches: []*sources.Cluster{devUS}, misses: []*sources.Cluster{prodEU, noTenant}},
		{name: "selector notin matches missing label", params: `{"labelSelector":"env notin (dev)"}`, matches: []*sources.Cluster{prodEU, noTenant}, misses: []*sources.Cluster{devUS}},
		{name: "empty selector matches all", params: `{"labelSelector":""}`, matches: []*sources.Cluster{prodEU, devUS, noTenant}},
		{name: "regex unanchored", params: `{"nameRegex":"prod"}`, matches: []*sources.Cluster{prodEU}, misses: []*sources.Cluster{devUS}},
		{name: "unknown key", params: `{"tenants":"acme"}`, err: `unknown key "tenants" (accepted keys: labelSelector, nameRegex, provider, region, source, tenant)`},
		{name: "number", params: `{"region":1}`, err: "must be a string or a list of strings, got a number"},
		{name: "mixed list", params: `{"region":["a",1]}`, err: "got a list with non-string values"},
		{name: "selector list", params: `{"labelSelector":["a=b"]}`, err: "must be a string, got a list"},
		{name: "regex bad", params: `{"nameRegex":"a(b"}`, err: "invalid regular expression"},
		{name: "selector bad", params: `{"labelSelector":"=x"}`, err: "invalid label selector"},
		{name: "provider bad", params: `{"provider":["eks","openshift"]}`, err: `unknown provider "openshift"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseParameters(raw(tc.params), knownProviders())
			if tc.err != "" {
				require.Error(t, err)
				var ie *InputError
				require.ErrorAs(t, err, &ie)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			for _, m := range tc.matches {
				assert.True(t, f.Match(m), "should match %s", m.Name)
			}
			for _, m := range tc.misses {
				assert.False(t, f.Match(m), "should not match %s", m.Name)
			}
		})
	}
}

// TestParseParametersProviders: the provider names accepted are those
// given, and an unknown one is answered with them in the order given.
func TestParseParametersProviders(t *testing.T) {
	providers := []sources.Provider{"gke", sources.ProviderStatic}
	f, err := ParseParameters(map[string]json.RawMessage{ParamProvider: json.RawMessage(`["gke","static"]`)}, providers)
	require.NoError(t, err)
	assert.Equal(t, []string{"gke", "static"}, f.Providers)
	assert.True(t, f.Match(&sources.Cluster{Name: "a", Provider: "gke"}))
	assert.False(t, f.Match(&sources.Cluster{Name: "b", Provider: sources.ProviderEKS}))

	_, err = ParseParameters(map[string]json.RawMessage{ParamProvider: json.RawMessage(`"eks"`)}, providers)
	var ie *InputError
	require.ErrorAs(t, err, &ie)
	assert.EqualError(t, err, `input.parameters.provider: unknown provider "eks" (accepted: gke, static)`)

	_, err = ParseParameters(map[string]json.RawMessage{ParamProvider: json.RawMessage(`"static"`)}, nil)
	require.ErrorAs(t, err, &ie, "no provider is known")
	f, err = ParseInput([]byte(`{"parameters":{"provider":"gke"}}`), providers)
	require.NoError(t, err)
	assert.Equal(t, []string{"gke"}, f.Providers)
}

func TestServerProviders(t *testing.T) {
	_, err := New(Options{Inventory: demoInventory(t), Tokens: tokenSet(t, demoToken)})
	assert.EqualError(t, err, "providers are required")

	providers := []sources.Provider{sources.ProviderStatic, "gke"}
	h := newServer(t, demoInventory(t), func(o *Options) { o.Providers = providers }).Handler()
	providers[1] = "eks" // the server keeps its own copy
	rec := do(h, argoRequest(t, GetParamsPath, map[string]any{"provider": "eks"}))
	require.Equal(t, http.StatusBadRequest, rec.Code)
	assert.JSONEq(t, `{"message":"input.parameters.provider: unknown provider \"eks\" (accepted: static, gke)"}`, rec.Body.String())
}

func TestFilterKeyIsCanonical(t *testing.T) {
	key := func(s string) string {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(s), &m))
		f, err := ParseParameters(m, knownProviders())
		require.NoError(t, err)
		return f.Key()
	}
	assert.Equal(t, key(`{"tenant":"a","region":"x"}`), key(`{"region":["x"],"tenant":["a","a"]}`))
	assert.Equal(t, key(`{"labelSelector":"b=2,a=1"}`), key(`{"labelSelector":"a=1, b=2"}`))
	assert.NotEqual(t, key(`{}`), key(`{"tenant":""}`), "tenant \"\" is a filter, not an absent key")
	assert.NotEqual(t, key(`{}`), key(`{"labelSelector":""}`))
	assert.NotEqual(t, key(`{"tenant":"a"}`), key(`{"region":"a"}`))
}

func TestTokenRotation(t *testing.T) {
	dir := t.TempDir()
	oldFile, newFile := filepath.Join(dir, "old"), filepath.Join(dir, "new")
	require.NoError(t, os.WriteFile(oldFile, []byte("old-plugin-token-1\n"), 0o600))
	require.NoError(t, os.WriteFile(newFile, []byte("new-plugin-token-2"), 0o600))
	t.Setenv("ACD_TEST_TOKEN", "env-plugin-token-3")
	ts, err := NewTokenSet([]sources.SecretRef{{File: oldFile}, {File: newFile}, {Env: "ACD_TEST_TOKEN"}}, nil)
	require.NoError(t, err)

	assert.True(t, ts.Valid("old-plugin-token-1"), "trailing newline of a mounted file is ignored")
	assert.True(t, ts.Valid("new-plugin-token-2"), "two tokens at once during a rotation")
	assert.True(t, ts.Valid("env-plugin-token-3"))
	assert.False(t, ts.Valid("old-plugin-token-1\n"))
	assert.False(t, ts.Valid(""))
	assert.False(t, ts.Valid("old"))

	require.NoError(t, os.WriteFile(oldFile, []byte("rotated-plugin-token-4"), 0o600))
	require.NoError(t, ts.Reload())
	assert.False(t, ts.Valid("old-plugin-token-1"), "the replaced token stops working after a reload")
	assert.True(t, ts.Valid("rotated-plugin-token-4"))

	require.NoError(t, os.Remove(newFile))
	err = ts.Reload()
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "new-plugin-token-2", "errors never carry token values")
	assert.True(t, ts.Valid("new-plugin-token-2"), "an unreadable file keeps its last value")

	require.NoError(t, os.WriteFile(newFile, []byte("  \n"), 0o600))
	require.Error(t, ts.Reload(), "an empty file is an error, not an empty token")
	assert.True(t, ts.Valid("new-plugin-token-2"))
	assert.False(t, ts.Valid(""))
}

// TestNewTokenSetErrors: every token that cannot be used is reported at
// once, by its reference, never by its value.
func TestNewTokenSetErrors(t *testing.T) {
	_, err := NewTokenSet(nil, nil)
	require.EqualError(t, err, "no token configured")
	missing := filepath.Join(t.TempDir(), "missing")
	t.Setenv("ACD_EMPTY", "")
	t.Setenv("ACD_SHORT", "fifteen-chars-x")
	t.Setenv("ACD_GOOD", "a-token-long-enough")
	_, err = NewTokenSet([]sources.SecretRef{{File: missing}, {Env: "ACD_EMPTY"}, {Env: "ACD_GOOD"},
		{Secret: &sources.SecretKeyRef{Name: "a", Key: "b"}}, {Env: "ACD_SHORT"}, {Env: "ACD_UNSET"}}, nil)
	require.EqualError(t, err, "token 0: file:"+missing+": no such file or directory\n"+
		"token 1: env:ACD_EMPTY: empty\n"+
		"token 3: a Kubernetes Secret reference is not supported here; mount it as a file\n"+
		"token 4: env:ACD_SHORT holds 15 characters: a plugin token needs at least 16 (the chart generates 48 random ones; e.g. openssl rand -hex 24)\n"+
		"token 5: env:ACD_UNSET: not set")
	assert.NotContains(t, err.Error(), "fifteen-chars-x")
	assert.NoError(t, CheckToken(sources.SecretRef{Env: "ACD_GOOD"}))
}

func TestMethodNotAllowedSaysAllow(t *testing.T) {
	h := newServer(t, demoInventory(t)).Handler()
	for _, m := range []string{"GET", "PUT", "DELETE", "PATCH"} {
		rec := do(h, rawRequest(m, GetParamsPath, nil, "Bearer "+demoToken))
		assert.Equal(t, 405, rec.Code, m)
		assert.Contains(t, rec.Header().Get("Allow"), "POST", m)
	}
}

// panicking is an inventory with a bug: its snapshot panics.
type panicking struct{ Inventory }

func (panicking) Snapshot() *inventory.Snapshot { panic("a bug in the snapshot") }

// TestPanicIsA500WithAMessage: a handler that panics answers a 500 with
// Argo CD's {"message"} (Argo CD keeps what it has, and shows why),
// logged once with its stack. Before, net/http cut the
// connection and logged to stderr, outside the service's log.
func TestPanicIsA500WithAMessage(t *testing.T) {
	var logs bytes.Buffer
	inv := demoInventory(t)
	h := newServer(t, panicking{inv}, func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) }).Handler()
	rec := do(h, argoRequest(t, GetParamsPath, nil))
	assert.Equal(t, http.StatusInternalServerError, rec.Code)
	assert.JSONEq(t, `{"message":"Internal Server Error"}`, rec.Body.String())
	assert.Equal(t, 1, strings.Count(logs.String(), "\n"), "one log line: %s", logs.String())
	assert.Contains(t, logs.String(), `"msg":"request panicked"`)
	assert.Contains(t, logs.String(), "a bug in the snapshot")
	assert.Contains(t, logs.String(), "goroutine ", "with its stack")

	rec = do(h, rawRequest(http.MethodGet, "/healthz", nil, ""))
	assert.Equal(t, http.StatusOK, rec.Code, "the next request is served")
}
