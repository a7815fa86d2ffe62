package azure_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
)

const (
	tenant   = "72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80"
	clientID = "80faf920-1908-4b52-b5ef-a8e7bedfc67a"
	api      = "6dae42f8-4368-4678-94ff-3960e28e3630"
)

func newEntra(t *testing.T) (*fakeazure.Entra, azcore.ClientOptions) {
	t.Helper()
	e, err := fakeazure.NewEntra()
	require.NoError(t, err)
	srv := httptest.NewTLSServer(e)
	t.Cleanup(srv.Close)
	e.Authority, e.ClientID, e.ObjectID = srv.URL, clientID, "oid-1"
	e.Tenants = map[string][]string{tenant: {api}}
	return e, azcore.ClientOptions{Transport: srv.Client(), Retry: policy.RetryOptions{MaxRetries: -1},
		Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: srv.URL + "/", Services: map[cloud.ServiceName]cloud.ServiceConfiguration{}}}
}

func scope(resource string) policy.TokenRequestOptions {
	return policy.TokenRequestOptions{Scopes: []string{resource + "/.default"}}
}

// TestAzidentityGetsTokens: azidentity's client secret and client
// assertion credentials get tokens signed as Entra signs them for the API
// asked for, and what Entra refuses comes back as azidentity reports
// Entra's errors.
func TestAzidentityGetsTokens(t *testing.T) {
	e, opts := newEntra(t)
	secret, err := azidentity.NewClientSecretCredential(tenant, clientID, "s3cret",
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	require.NoError(t, err)
	tok, err := secret.GetToken(context.Background(), scope(api))
	require.NoError(t, err)
	claims := jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(tok.Token, claims, func(*jwt.Token) (any, error) { return e.PublicKey(), nil })
	require.NoError(t, err)
	assert.Equal(t, api, claims["aud"])
	assert.Equal(t, tenant, claims["tid"])
	assert.Equal(t, "oid-1", claims["oid"])
	assert.Equal(t, []string{"s3cret", ""}, e.Received())

	_, err = secret.GetToken(context.Background(), scope("api://unknown"))
	assertAADSTS(t, err, "AADSTS500011")

	// the federated flow only: a secret is refused, an assertion checked
	e.VerifyAssertion = func(a string) error {
		if a != "good" {
			return errors.New("unknown issuer")
		}
		return nil
	}
	secret, err = azidentity.NewClientSecretCredential(tenant, clientID, "s3cret", // a new one: azidentity caches tokens
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	require.NoError(t, err)
	_, err = secret.GetToken(context.Background(), scope(api))
	assertAADSTS(t, err, "AADSTS7000218")
	for assertion, want := range map[string]string{"good": "", "bad": "AADSTS70021"} {
		cred, err := azidentity.NewClientAssertionCredential(tenant, clientID, func(context.Context) (string, error) { return assertion, nil },
			&azidentity.ClientAssertionCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
		require.NoError(t, err)
		_, err = cred.GetToken(context.Background(), scope(api))
		if want == "" {
			require.NoError(t, err)
		} else {
			assertAADSTS(t, err, want)
		}
	}

	e.Fail(http.StatusUnauthorized, `{"error":"invalid_client","error_description":"AADSTS7000222: expired","error_codes":[7000222]}`)
	cred, err := azidentity.NewClientSecretCredential(tenant, clientID, "s3cret",
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	require.NoError(t, err)
	_, err = cred.GetToken(context.Background(), scope(api))
	assertAADSTS(t, err, "AADSTS7000222")
	assert.Len(t, e.Seen(), 5, "one line per request it judged, none for the one failed as told")
}

func assertAADSTS(t *testing.T, err error, code string) {
	t.Helper()
	var failed *azidentity.AuthenticationFailedError
	require.ErrorAs(t, err, &failed)
	assert.Contains(t, failed.Error(), code)
}
