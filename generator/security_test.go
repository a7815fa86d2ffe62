package generator

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
)

// TestTokenNeverLogged drives every path of the API with a known token at
// debug level and checks that neither the token nor a wrong token sent by a
// client appears in the logs or on /status.
func TestTokenNeverLogged(t *testing.T) {
	const secret = "s3cr3t-plugin-token-value"
	const wrong = "wrong-token-value-from-a-client"
	var logs testlog.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := New(Options{Inventory: demoInventory(t), Tokens: tokenSet(t, secret), Providers: knownProviders(), Logger: logger})
	require.NoError(t, err)
	h := srv.Handler()

	for _, req := range []*http.Request{
		rawRequest("POST", GetParamsPath, []byte(`{"input":{"parameters":{"tenant":"acme"}}}`), "Bearer "+secret),
		rawRequest("POST", GetParamsPath, []byte(`{"input":{"parameters":{"tennant":"acme"}}}`), "Bearer "+secret),
		rawRequest("POST", GetParamsPath, []byte(`{"input":`), "Bearer "+secret),
		rawRequest("POST", GetParamsPath, []byte(`{}`), "Bearer "+wrong),
		rawRequest("POST", GetParamsPath, []byte(`{}`), "Bearer $"+wrong+" with spaces"),
		rawRequest("GET", GetParamsPath, nil, "Bearer "+secret),
		rawRequest("GET", "/status", nil, "Bearer "+secret),
	} {
		rec := do(h, req)
		assert.NotContains(t, rec.Body.String(), secret)
		assert.NotContains(t, rec.Body.String(), wrong, "a client's wrong token is not echoed back")
	}
	require.NotEmpty(t, logs.String(), "debug logging is on")
	assert.NotContains(t, logs.String(), secret)
	assert.NotContains(t, logs.String(), wrong)
	assert.NotContains(t, logs.String(), "Authorization", "headers are not logged")
}
