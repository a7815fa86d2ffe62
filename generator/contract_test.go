package generator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// contractCase is a request exactly as Argo CD sends it, the status it
// gets and, in testdata/golden/<name>.json, the body.
type contractCase struct {
	name   string
	req    func() *http.Request
	status int
}

// TestContractParameters: the answers to input.parameters, filtering and
// rejected.
func TestContractParameters(t *testing.T) {
	runContract(t, []contractCase{
		{"input-empty", func() *http.Request { return argoRequest(t, GetParamsPath, nil) }, 200},
		{"input-absent", func() *http.Request {
			return rawRequest("POST", GetParamsPath, []byte(`{"applicationSetName":"x"}`), "Bearer "+demoToken)
		}, 200},
		{"input-null-parameters", func() *http.Request {
			return rawRequest("POST", GetParamsPath, []byte(`{"applicationSetName":"x","input":{"parameters":null}}`), "Bearer "+demoToken)
		}, 200},
		{"tenant-acme", func() *http.Request {
			return argoRequest(t, GetParamsPath, map[string]any{"tenant": "acme"})
		}, 200},
		{"every-filter", func() *http.Request {
			return argoRequest(t, GetParamsPath, map[string]any{
				"tenant": []any{"globex", "initech"}, "provider": "static", "source": []any{"demo-azure"},
				"region": []any{"eastus", "westeurope", "northeurope"}, "labelSelector": "env in (prod,staging),cloud=azure",
				"nameRegex": "^(globex|initech)-",
			})
		}, 200},
		{"tenant-without-clusters", func() *http.Request {
			return argoRequest(t, GetParamsPath, map[string]any{"tenant": "umbrella"})
		}, 200},
		{"wrong-type-number", func() *http.Request { return argoRequest(t, GetParamsPath, map[string]any{"tenant": 42}) }, 400},
		{"wrong-type-bool", func() *http.Request { return argoRequest(t, GetParamsPath, map[string]any{"region": true}) }, 400},
		{"wrong-type-object", func() *http.Request {
			return argoRequest(t, GetParamsPath, map[string]any{"labelSelector": map[string]any{"env": "prod"}})
		}, 400},
		{"wrong-type-null", func() *http.Request { return argoRequest(t, GetParamsPath, map[string]any{"nameRegex": nil}) }, 400},
		{"wrong-type-list-of-numbers", func() *http.Request {
			return argoRequest(t, GetParamsPath, map[string]any{"source": []any{1, 2}})
		}, 400},
		{"empty-list", func() *http.Request { return argoRequest(t, GetParamsPath, map[string]any{"tenant": []any{}}) }, 400},
		{"unknown-key", func() *http.Request { return argoRequest(t, GetParamsPath, map[string]any{"tennant": "acme"}) }, 400},
		{"unknown-provider", func() *http.Request { return argoRequest(t, GetParamsPath, map[string]any{"provider": "gke"}) }, 400},
		{"provider-not-configured", func() *http.Request { return argoRequest(t, GetParamsPath, map[string]any{"provider": "eks"}) }, 400},
		{"source-not-configured", func() *http.Request { return argoRequest(t, GetParamsPath, map[string]any{"source": "demo-gcp"}) }, 400},
		{"bad-label-selector", func() *http.Request {
			return argoRequest(t, GetParamsPath, map[string]any{"labelSelector": "env in (prod"})
		}, 400},
		{"bad-name-regex", func() *http.Request { return argoRequest(t, GetParamsPath, map[string]any{"nameRegex": "(unclosed"}) }, 400},
	})
}

// TestContractBody: bodies that are not a request.
func TestContractBody(t *testing.T) {
	big := bytes.Repeat([]byte(" "), MaxBodyBytes+1)
	big[0] = '{'
	runContract(t, []contractCase{
		{"malformed-json", func() *http.Request {
			return rawRequest("POST", GetParamsPath, []byte(`{"input": {"parameters": {`), "Bearer "+demoToken)
		}, 400},
		{"body-not-object", func() *http.Request {
			return rawRequest("POST", GetParamsPath, []byte(`["tenant"]`), "Bearer "+demoToken)
		}, 400},
		{"input-not-object", func() *http.Request {
			return rawRequest("POST", GetParamsPath, []byte(`{"input":"tenant=acme"}`), "Bearer "+demoToken)
		}, 400},
		{"empty-body", func() *http.Request { return rawRequest("POST", GetParamsPath, nil, "Bearer "+demoToken) }, 400},
		{"body-too-large", func() *http.Request { return rawRequest("POST", GetParamsPath, big, "Bearer "+demoToken) }, 413},
		{"body-too-large-chunked", func() *http.Request {
			req := rawRequest("POST", GetParamsPath, big, "Bearer "+demoToken)
			req.ContentLength = -1
			return req
		}, 413},
	})
}

// TestContractHTTP: the method, the path and the bearer token.
func TestContractHTTP(t *testing.T) {
	runContract(t, []contractCase{
		{"method-get", func() *http.Request { return rawRequest("GET", GetParamsPath, nil, "Bearer "+demoToken) }, 405},
		{"unknown-path", func() *http.Request { return rawRequest("POST", "/api/v1/getparams", nil, "Bearer "+demoToken) }, 404},
		{"token-missing", func() *http.Request { return rawRequest("POST", GetParamsPath, []byte(`{}`), "") }, 401},
		{"token-wrong", func() *http.Request { return rawRequest("POST", GetParamsPath, []byte(`{}`), "Bearer not-the-token") }, 401},
		{"token-not-bearer", func() *http.Request { return rawRequest("POST", GetParamsPath, []byte(`{}`), "Basic ZGVtbzpkZW1v") }, 401},
		{"token-unresolved-plugin-ref", func() *http.Request {
			return rawRequest("POST", GetParamsPath, []byte(`{}`), "Bearer $plugin.cluster-discovery.token")
		}, 401},
		{"token-unresolved-secret-ref", func() *http.Request {
			return rawRequest("POST", GetParamsPath, []byte(`{}`), "Bearer $argocd-cluster-discovery-token:token")
		}, 401},
		// a value after "$" that is not a key name (a pasted secret), or a
		// token that starts with "$" and looks like a key name (rotated in
		// before the tokens are read again): the 401 says Argo CD sent a
		// value starting with "$", never the value
		{"token-dollar-not-a-reference", func() *http.Request {
			return rawRequest("POST", GetParamsPath, []byte(`{}`), "Bearer $Zm9vYmFy/c2VjcmV0+dmFsdWU=")
		}, 401},
		{"token-dollar-like-a-reference", func() *http.Request {
			return rawRequest("POST", GetParamsPath, []byte(`{}`), "Bearer $Xq7-9fK2.aa81Zt0Pq3w")
		}, 401},
	})
}

// runContract drives the API with each case and compares every answer with
// its golden file.
func runContract(t *testing.T, cases []contractCase) {
	t.Helper()
	h := newServer(t, demoInventory(t)).Handler()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(h, tc.req())
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			assert.Equal(t, "application/json", strings.Split(rec.Header().Get("Content-Type"), ";")[0])
			golden(t, tc.name, rec.Body.Bytes())
			if tc.status != http.StatusOK {
				var m map[string]any
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m))
				assert.NotEmpty(t, m["message"], "Argo CD shows the message field")
				return
			}
			var resp struct {
				Output struct {
					Parameters []map[string]any `json:"parameters"`
				} `json:"output"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
			require.NotNil(t, resp.Output.Parameters, "parameters is a list, never null")
			for _, p := range resp.Output.Parameters {
				assert.NotContains(t, p, "generator", "Argo CD overwrites it")
				assert.NotContains(t, p, "values", "Argo CD overwrites it")
			}
		})
	}
}

func TestNoCredentialsInParameters(t *testing.T) {
	c := testCluster("with-token", "acme")
	c.Auth = sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{File: "/var/run/secrets/rancher-token"}}
	c.CA = sources.CAFromData("LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t")
	e := testCluster("with-exec", "acme")
	e.Auth = sources.Auth{Kind: sources.AuthExec, Exec: &sources.ExecProvider{Command: "argocd-k8s-auth", Env: map[string]string{"AZURE_CLIENT_ID": "client-id-value"}}}
	inv := inventoryOf(t, &scripted{steps: []func() ([]sources.Cluster, error){ok(c, e)}})
	rec := do(newServer(t, inv).Handler(), argoRequest(t, GetParamsPath, nil))
	require.Equal(t, 200, rec.Code)
	body := rec.Body.String()
	for _, secretish := range []string{"rancher-token", "caData", "LS0tLS1CRUdJTi", "argocd-k8s-auth", "client-id-value", "auth"} {
		assert.NotContains(t, body, secretish)
	}
}

func inventoryOf(t testing.TB, srcs ...*scripted) *inventory.Inventory {
	t.Helper()
	var specs []inventory.SourceSpec
	for i, s := range srcs {
		specs = append(specs, inventory.SourceSpec{Name: []string{"alpha", "beta", "gamma"}[i], Provider: sources.ProviderStatic,
			Source: s, Interval: time.Hour, Timeout: time.Second})
	}
	inv, err := inventory.New(specs, inventory.Options{})
	require.NoError(t, err)
	_ = inv.RefreshAll(context.Background())
	return inv
}

func paramNames(t *testing.T, body []byte) []string {
	t.Helper()
	var resp struct {
		Output struct {
			Parameters []Parameters `json:"parameters"`
		} `json:"output"`
	}
	require.NoError(t, json.Unmarshal(body, &resp), string(body))
	out := []string{}
	for _, p := range resp.Output.Parameters {
		out = append(out, p.Name)
	}
	return out
}

// TestNeverAnEmpty200ForUnknownData is the rule that protects users: Argo CD
// deletes Applications on an empty 200, so a source that has not synced
// makes the answer a 503 for every request that could select it.
func TestNeverAnEmpty200ForUnknownData(t *testing.T) {
	alpha := &scripted{steps: []func() ([]sources.Cluster, error){ok(testCluster("a1", "acme"))}}
	beta := &scripted{steps: []func() ([]sources.Cluster, error){fail("connect: connection refused")}}
	inv := inventoryOf(t, alpha, beta)
	h := newServer(t, inv).Handler()

	rec := do(h, argoRequest(t, GetParamsPath, nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "beta")
	assert.NotContains(t, rec.Body.String(), "alpha")
	assert.NotEmpty(t, rec.Header().Get("Retry-After"))

	rec = do(h, argoRequest(t, GetParamsPath, map[string]any{"tenant": "acme"}))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "beta could hold acme clusters")

	rec = do(h, argoRequest(t, GetParamsPath, map[string]any{"source": "alpha"}))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code,
		"the start-up barrier: until every source has listed once, a source listing later could change any answer (its clusters may be duplicates or name conflicts of alpha's)")

	// readiness says the same without Options.Ready
	rec = do(h, rawRequest("GET", "/readyz", nil, ""))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "beta")

	// with it, readiness is whether the replica can answer: the 503 above
	// is an answer, which Argo CD shows
	ready := errors.New("the ledger has not been read yet")
	h = newServer(t, inv, func(o *Options) { o.Ready = func() error { return ready } }).Handler()
	rec = do(h, rawRequest("GET", "/readyz", nil, ""))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "the ledger has not been read yet")
	ready = nil
	rec = do(h, rawRequest("GET", "/readyz", nil, ""))
	require.Equal(t, http.StatusOK, rec.Code)
	rec = do(h, argoRequest(t, GetParamsPath, nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "the barrier is the plugin API's, whatever readiness says")
}

// TestStaleSourceKeepsServing: a source that fails after its first
// listing keeps serving its last complete result, marked stale; once it
// recovers with fewer clusters, the smaller set is served.
func TestStaleSourceKeepsServing(t *testing.T) {
	alpha := &scripted{steps: []func() ([]sources.Cluster, error){
		ok(testCluster("a1", "acme"), testCluster("a2", "acme"), testCluster("a3", "globex")),
		fail("upstream answered 500"),
		ok(testCluster("a1", "acme")),
	}}
	inv := inventoryOf(t, alpha)
	h := newServer(t, inv).Handler()
	req := func() *http.Request { return argoRequest(t, GetParamsPath, map[string]any{"tenant": "acme"}) }

	rec := do(h, req())
	require.Equal(t, 200, rec.Code)
	assert.Equal(t, []string{"a1", "a2"}, paramNames(t, rec.Body.Bytes()))
	assert.Empty(t, rec.Header().Get(StaleHeader))

	require.Error(t, inv.RefreshAll(context.Background()))
	rec = do(h, req())
	require.Equal(t, 200, rec.Code)
	assert.Equal(t, []string{"a1", "a2"}, paramNames(t, rec.Body.Bytes()), "last complete result while failing")
	assert.Equal(t, "alpha", rec.Header().Get(StaleHeader))

	require.NoError(t, inv.RefreshAll(context.Background()))
	rec = do(h, req())
	require.Equal(t, 200, rec.Code)
	assert.Equal(t, []string{"a1", "a2"}, paramNames(t, rec.Body.Bytes()), "a2 is absent from one listing: not gone yet")
	assert.Contains(t, rec.Body.String(), `"phase":"absent"`, "the cache follows the new snapshot")
	assert.Empty(t, rec.Header().Get(StaleHeader))
}

func TestNotReadyClustersAreLeftOut(t *testing.T) {
	notReady := testCluster("waiting-for-ca", "acme")
	notReady.Ready, notReady.NotReadyReason = false, "CA not fetched"
	inv := inventoryOf(t, &scripted{steps: []func() ([]sources.Cluster, error){ok(testCluster("ready", "acme"), notReady)}})
	rec := do(newServer(t, inv).Handler(), argoRequest(t, GetParamsPath, nil))
	require.Equal(t, 200, rec.Code)
	assert.Equal(t, []string{"ready"}, paramNames(t, rec.Body.Bytes()))
}

func TestPathPrefix(t *testing.T) {
	h := newServer(t, demoInventory(t), func(o *Options) { o.PathPrefix = "discovery/" }).Handler()
	rec := do(h, argoRequest(t, "/discovery"+GetParamsPath, map[string]any{"tenant": "acme"}))
	require.Equal(t, 200, rec.Code, rec.Body.String())
	assert.Len(t, paramNames(t, rec.Body.Bytes()), 4)
	rec = do(h, argoRequest(t, GetParamsPath, nil))
	assert.Equal(t, 404, rec.Code, "the API moved below the prefix")
	rec = do(h, rawRequest("GET", "/healthz", nil, ""))
	assert.Equal(t, 200, rec.Code, "ops endpoints stay at the root")
}

func TestCachedAnswersAreEqualAndPerInput(t *testing.T) {
	h := newServer(t, demoInventory(t)).Handler()
	first := do(h, argoRequest(t, GetParamsPath, map[string]any{"tenant": "acme"})).Body.String()
	second := do(h, argoRequest(t, GetParamsPath, map[string]any{"tenant": "acme"})).Body.String()
	assert.Equal(t, first, second)
	// the same filter written differently shares the canonical key ...
	third := do(h, argoRequest(t, GetParamsPath, map[string]any{"tenant": []any{"acme", "acme"}})).Body.String()
	assert.Equal(t, first, third)
	// ... and a different filter does not
	other := do(h, argoRequest(t, GetParamsPath, map[string]any{"tenant": "globex"})).Body.String()
	assert.NotEqual(t, first, other)
}

func TestOpsEndpoints(t *testing.T) {
	srv := newServer(t, demoInventory(t), func(o *Options) { o.Version = "v9.9.9" })
	h := srv.Handler()

	rec := do(h, rawRequest("GET", "/healthz", nil, ""))
	assert.Equal(t, 200, rec.Code)
	rec = do(h, rawRequest("GET", "/readyz", nil, ""))
	assert.Equal(t, 200, rec.Code, rec.Body.String())

	rec = do(h, rawRequest("GET", "/status", nil, ""))
	require.Equal(t, 401, rec.Code, "on the API's listener /status needs the plugin token")
	rec = do(srv.OpsHandler(), rawRequest("GET", "/status", nil, ""))
	require.Equal(t, 200, rec.Code, "open on server.opsListen")
	rec = do(h, rawRequest("GET", "/status", nil, "Bearer "+demoToken))
	require.Equal(t, 200, rec.Code)
	var st struct {
		Version string `json:"version"`
		inventory.Status
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
	assert.Equal(t, "v9.9.9", st.Version)
	assert.Equal(t, 12, st.Clusters)
	require.Len(t, st.Sources, 2)
	assert.True(t, st.Sources[0].Synced)
	assert.Equal(t, 6, st.Sources[0].Clusters)
	assert.NotContains(t, rec.Body.String(), demoToken)

	// split listeners: the API handler has no ops routes and vice versa
	assert.Equal(t, 404, do(srv.APIHandler(), rawRequest("GET", "/healthz", nil, "")).Code)
	assert.Equal(t, 404, do(srv.OpsHandler(), argoRequest(t, GetParamsPath, nil)).Code)
}

func TestNormalizePrefix(t *testing.T) {
	for in, want := range map[string]string{"": "", "/": "", "discovery": "/discovery", "/a/b/": "/a/b"} {
		got, err := NormalizePrefix(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"/a b", "/a?b", "/a//b", "/%2e"} {
		_, err := NormalizePrefix(bad)
		assert.Error(t, err, bad)
	}
}
