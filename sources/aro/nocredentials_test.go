package aro

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Distinctive credentials: the identity's ARM access token, and the
// secrets an OpenShift cluster's ARM resource holds (its pull secret, its
// service principal's client secret), which the resource provider blanks
// in GET and LIST answers but a malformed answer could carry.
const (
	ncAccessToken  = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.NoCredAroArmAccessToken.NoCredArmSig"
	ncPullSecret   = `{"auths":{"cloud.openshift.com":{"auth":"NoCredAroPullSecret7f3a9c"}}}`
	ncClientSecret = "NoCredAroClientSecret~8Q~aBcDeFgHiJkLmNoPqRsTuVwXyZ"
)

func ncSecrets() []string {
	return []string{ncAccessToken, "NoCredAroArmAccessToken", "NoCredAroPullSecret7f3a9c", ncClientSecret}
}

// ncToken is a credential that hands out ncAccessToken.
type ncToken struct{}

func (ncToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: ncAccessToken, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// ncPage is the fixture's first page with the secrets put back into every
// cluster.
func ncPage(t *testing.T) string {
	t.Helper()
	var page map[string]any
	require.NoError(t, json.Unmarshal(fixture(t, "openshift-clusters-list.json"), &page))
	delete(page, "nextLink")
	for _, v := range page["value"].([]any) {
		props := v.(map[string]any)["properties"].(map[string]any)
		props["clusterProfile"].(map[string]any)["pullSecret"] = ncPullSecret
		props["servicePrincipalProfile"].(map[string]any)["clientSecret"] = ncClientSecret
	}
	b, err := json.Marshal(page)
	require.NoError(t, err)
	return string(b)
}

// TestNoCredentialLeaks lists with a distinctive access token, over an
// answer that carries the clusters' secrets, then fails a listing on a
// refused token: no secret reaches a cluster, an error, a log line or a
// metric.
func TestNoCredentialLeaks(t *testing.T) {
	a := newARMServer(t)
	a.RequireToken(ncAccessToken)
	a.SetAROList(subA, ncPage(t))
	cfg := Config{Subscriptions: []string{subA}, ResourceGroups: []string{"rg-aro-payments", "rg-shared"}} // a skip is logged
	env := newTestEnv(t, cfg, a.clientOptions(), tokenSecrets{}.bind(prodID, "prod-token"), ncToken{})
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 2)
	assert.True(t, byName(cs, "aro-payments-prod").Ready, "the token reaches the Secret by reference only")
	assert.Equal(t, "Bearer "+ncAccessToken, a.Authorizations()[0], "the token was sent")

	a.RequireToken("another-token")
	_, listErr := env.src.Clusters(context.Background())
	require.ErrorContains(t, listErr, "HTTP 401 InvalidAuthenticationToken")

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(env.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	clusters, err := json.Marshal(cs)
	require.NoError(t, err)
	for where, text := range map[string]string{
		"clusters": string(clusters), "error": listErr.Error(), "logs": env.logs.String(), "metrics": rec.Body.String(),
	} {
		for _, s := range ncSecrets() {
			assert.NotContains(t, text, s, where)
		}
	}
	assert.Contains(t, env.logs.String(), `"msg":"cluster skipped"`, "the logs were written")
}

// TestTokenValuesAreNeverRead: the source names token Secrets and never
// reads them; a not-ready reason names the Secrets bound and the key, no
// value.
func TestTokenValuesAreNeverRead(t *testing.T) {
	a := newARMServer(t)
	env := newTestEnv(t, explicit(subA), a.clientOptions(), tokenSecrets{}.bind(prodID, "a").bind(prodID, "b"), nil)
	cs, err := env.src.Clusters(context.Background())
	require.NoError(t, err)
	prod := byName(cs, "aro-payments-prod")
	assert.Equal(t, "2 token Secrets are bound to it (a, b): keep one", prod.NotReadyReason)
	for _, c := range cs {
		if c.Auth.TokenRef != nil {
			assert.Nil(t, c.Auth.TokenRef.Issued)
			assert.Empty(t, c.Auth.TokenRef.File)
			assert.Empty(t, c.Auth.TokenRef.Env)
		}
	}
	b, err := json.Marshal(cs)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"bearerToken":`, "no token value in the model")
	assert.Equal(t, sources.AuthNone, prod.Auth.Kind)
}
