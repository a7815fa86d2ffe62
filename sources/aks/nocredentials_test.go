package aks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Distinctive credentials: the identity's (client secret, federated token,
// the access token the fake Entra ID hands out) and those of the user
// kubeconfig listClusterUserCredential returns (client certificate and
// key, token, password).
const (
	ncClientSecret   = "NoCredAzureClientSecret~8Q~aBcDeFgHiJkLmNoPqRsTuVwXyZ"
	ncFederatedToken = "eyJhbGciOiJSUzI1NiJ9.NoCredFederatedTokenPayload.NoCredFederatedSig"
	ncAccessToken    = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.NoCredArmAccessToken.NoCredArmSig"
	ncKubeCert       = "NOCRED-KUBECONFIG-CLIENT-CERTIFICATE-7f3a9c"
	ncKubeKey        = "NOCRED-KUBECONFIG-CLIENT-KEY-2b8e4d"
	ncKubeToken      = "nocred-kubeconfig-user-token-5c1f0a9e3d7b"
	ncKubePassword   = "nocred-kubeconfig-password-0a9e3d"
)

func ncSecrets() []string {
	b64 := base64.StdEncoding.EncodeToString
	return []string{
		ncClientSecret, ncFederatedToken, ncAccessToken, "NoCredArmAccessToken", "NoCredFederatedTokenPayload",
		ncKubeCert, ncKubeKey, b64([]byte(ncKubeCert)), b64([]byte(ncKubeKey)), ncKubeToken, ncKubePassword,
	}
}

// ncKubeconfig is the fixture's user kubeconfig with a client certificate,
// key, token and password added to its user, as listClusterUserCredential
// returns it (base64 in the JSON answer).
func ncKubeconfig(t *testing.T) []byte {
	t.Helper()
	b64 := base64.StdEncoding.EncodeToString
	kc := string(fixture(t, "aks-user-kubeconfig.decoded.yaml"))
	require.Contains(t, kc, "  user:\n    exec:\n")
	return []byte(strings.Replace(kc, "  user:\n    exec:\n", "  user:\n"+
		"    client-certificate-data: "+b64([]byte(ncKubeCert))+"\n"+
		"    client-key-data: "+b64([]byte(ncKubeKey))+"\n"+
		"    token: "+ncKubeToken+"\n"+
		"    username: clusterUser\n"+
		"    password: "+ncKubePassword+"\n"+
		"    exec:\n", 1))
}

func ncCredentialsBody(kubeconfig []byte) string {
	b, _ := json.Marshal(map[string]any{"kubeconfigs": []map[string]any{{"name": "clusterUser", "value": kubeconfig}}})
	return string(b)
}

// fakeEntra is the shared fake of Microsoft Entra ID's token service
// (internal/fake/azure), taking any client secret or federated token and
// handing out ncAccessToken, or failing as told.
type fakeEntra struct {
	*fakeazure.Entra
	srv *httptest.Server
}

func newFakeEntra(t *testing.T) *fakeEntra {
	e, err := fakeazure.NewEntra()
	require.NoError(t, err)
	e.AccessToken = ncAccessToken
	f := &fakeEntra{Entra: e, srv: httptest.NewTLSServer(e)}
	t.Cleanup(f.srv.Close)
	e.Authority = f.srv.URL
	return f
}

func (e *fakeEntra) fail(status int, body string) { e.Fail(status, body) }

func (e *fakeEntra) got() []string { return e.Received() }

const (
	ncTenant   = "72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80"
	ncClientID = "80faf920-1908-4b52-b5ef-a8e7bedfc67a"
)

func (e *fakeEntra) clientOptions() azcore.ClientOptions {
	return azcore.ClientOptions{
		Cloud:     cloud.Configuration{ActiveDirectoryAuthorityHost: e.srv.URL + "/", Services: map[cloud.ServiceName]cloud.ServiceConfiguration{}},
		Transport: e.srv.Client(),
		Retry:     policy.RetryOptions{MaxRetries: -1},
	}
}

// staticToken is a credential that hands out ncAccessToken, or an error.
type staticToken struct{ err error }

func (s staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if s.err != nil {
		return azcore.AccessToken{}, s.err
	}
	return azcore.AccessToken{Token: ncAccessToken, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// ncCredKind is the identity the service lists with.
type ncCredKind int

const (
	ncSecret    ncCredKind = iota // a client secret, exchanged at the fake Entra ID
	ncFederated                   // a federated token, exchanged at the fake Entra ID
	ncStatic                      // a plain access token
)

// ncCase is one listing: its identity, what the fakes do, and what it
// gives.
type ncCase struct {
	name  string
	cred  ncCredKind
	setup func(t *testing.T, a *armServer, e *fakeEntra)
	// wantErr is in the listing's error; wantNotReady in the cluster's
	// reason (the listing then succeeds).
	wantErr, wantNotReady string
	// listStatus and listBody, when set, answer the cluster list.
	listStatus int
	listBody   string
}

var ncCases = []ncCase{
	{name: "client secret: success", cred: ncSecret},
	{name: "federated token: success", cred: ncFederated},
	{name: "access token: success", cred: ncStatic},
	{name: "client secret expired at Entra ID", cred: ncSecret, wantErr: "authentication failed", setup: func(t *testing.T, a *armServer, e *fakeEntra) {
		e.fail(http.StatusUnauthorized, `{"error":"invalid_client","error_description":"AADSTS7000222: The provided client secret keys for app '`+ncClientID+`' are expired.\r\nTrace ID: 1","error_codes":[7000222]}`)
	}},
	{name: "federated token expired at Entra ID", cred: ncFederated, wantErr: "authentication failed", setup: func(t *testing.T, a *armServer, e *fakeEntra) {
		e.fail(http.StatusBadRequest, `{"error":"invalid_client","error_description":"AADSTS700024: Client assertion is not within its valid time range.\r\nTrace ID: 2","error_codes":[700024]}`)
	}},
	{name: "access token expired at ARM", cred: ncStatic, wantErr: "ExpiredAuthenticationToken", listStatus: http.StatusUnauthorized,
		listBody: `{"error":{"code":"ExpiredAuthenticationToken","message":"The access token expiry UTC time '1/1/2026 12:00:00 AM' is earlier than current UTC time."}}`},
	{name: "list 500", cred: ncSecret, wantErr: "500", listStatus: http.StatusInternalServerError,
		listBody: `{"error":{"code":"InternalServerError","message":"An internal error occurred."}}`},
	{name: "listClusterUserCredential 403", cred: ncSecret, wantNotReady: "HTTP 403 AuthorizationFailed", setup: func(t *testing.T, a *armServer, e *fakeEntra) {
		a.SetCredentials(http.StatusForbidden, `{"error":{"code":"AuthorizationFailed","message":"The client '`+ncClientID+`' does not have authorization to perform action 'Microsoft.ContainerService/managedClusters/listClusterUserCredential/action'."}}`)
	}},
	{name: "listClusterUserCredential 500", cred: ncFederated, wantNotReady: "HTTP 500", setup: func(t *testing.T, a *armServer, e *fakeEntra) {
		a.SetCredentials(http.StatusInternalServerError, `{"error":{"code":"InternalServerError","message":"An internal error occurred."}}`)
	}},
	{name: "kubeconfig that does not parse", cred: ncStatic, wantNotReady: "does not parse", setup: func(t *testing.T, a *armServer, e *fakeEntra) {
		a.SetCredentials(http.StatusOK, ncCredentialsBody(append(ncKubeconfig(t), []byte("\n  : [unbalanced "+ncKubeToken+"\n")...)))
	}},
	{name: "kubeconfig without a CA", cred: ncStatic, wantNotReady: "no certificate-authority-data", setup: func(t *testing.T, a *armServer, e *fakeEntra) {
		kc := ncKubeconfig(t)
		kc = []byte(strings.Replace(string(kc), "certificate-authority-data:", "certificate-authority-data-x:", 1))
		a.SetCredentials(http.StatusOK, ncCredentialsBody(kc))
	}},
}

// TestNoCredentialInLogsOrErrors lists through the ARM fake at debug level
// with a client secret and a federated token exchanged at a fake Entra ID,
// and with a plain access token, on success and on failures (Entra ID
// refusing an expired secret or assertion, ARM answering 401 for an expired
// token, 500 on the list, 403 on listClusterUserCredential, a kubeconfig
// that does not parse), with a user kubeconfig holding a client
// certificate, key, token and password. None of them may appear in the
// logs, errors, clusters, inventory status or metrics; the clusters carry
// the kubeconfig's CA and nothing else of it.
func TestNoCredentialInLogsOrErrors(t *testing.T) {
	for _, tc := range ncCases {
		t.Run(tc.name, func(t *testing.T) {
			a, e := ncARMServer(t, tc), newFakeEntra(t)
			if tc.setup != nil {
				tc.setup(t, a, e)
			}
			var logs testlog.Buffer
			logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("source", "azure-prod")
			reg := prometheus.NewRegistry()
			cfg := explicit(subA)
			cfg.Default()
			src, err := newSource(cfg, sources.SourceOptions{Name: "azure-prod", Logger: logger,
				Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"source": "azure-prod"}, reg)},
				azurearm.Hooks{Credential: ncCredential(t, tc.cred, e), Options: a.clientOptions()})
			require.NoError(t, err)

			texts := ncListing(t, tc, src, a)
			switch tc.cred {
			case ncSecret:
				assert.Contains(t, e.got(), ncClientSecret, "the secret was sent")
			case ncFederated:
				assert.Contains(t, e.got(), ncFederatedToken, "the assertion was sent")
			}
			status, metrics, err := ncService(t, src, logger, reg)
			if err != nil {
				texts = append(texts, err.Error())
			}
			require.NotEmpty(t, logs.String(), "debug logging is on")
			if tc.wantErr != "" {
				assert.Contains(t, logs.String(), tc.wantErr, "the failure is logged")
			}
			for where, text := range map[string]string{
				"the debug log": logs.String(), "the errors and clusters": strings.Join(texts, "\n"),
				"the inventory's status": status, "the metrics": metrics,
			} {
				for _, s := range ncSecrets() {
					assert.NotContains(t, text, s, "%s holds a credential", where)
				}
			}
		})
	}
}

// ncARMServer is the ARM fake, answering the cluster list with
// tc.listStatus when set, and listClusterUserCredential with the
// kubeconfig full of credentials.
func ncARMServer(t *testing.T, tc ncCase) *armServer {
	a := newARMServer(t)
	if tc.listStatus != 0 {
		a.SetListAnswer(tc.listStatus, tc.listBody)
	}
	a.SetCredentials(http.StatusOK, ncCredentialsBody(ncKubeconfig(t)))
	return a
}

func ncCredential(t *testing.T, kind ncCredKind, e *fakeEntra) azcore.TokenCredential {
	t.Helper()
	switch kind {
	case ncSecret:
		cred, err := azidentity.NewClientSecretCredential(ncTenant, ncClientID, ncClientSecret,
			&azidentity.ClientSecretCredentialOptions{ClientOptions: e.clientOptions(), DisableInstanceDiscovery: true})
		require.NoError(t, err)
		return cred
	case ncFederated:
		cred, err := azidentity.NewClientAssertionCredential(ncTenant, ncClientID,
			func(context.Context) (string, error) { return ncFederatedToken, nil },
			&azidentity.ClientAssertionCredentialOptions{ClientOptions: e.clientOptions(), DisableInstanceDiscovery: true})
		require.NoError(t, err)
		return cred
	}
	return staticToken{}
}

// ncListing lists once, checks the outcome tc expects, and returns the
// texts the listing gave: its error, or its clusters.
func ncListing(t *testing.T, tc ncCase, src *Source, a *armServer) []string {
	t.Helper()
	cs, err := src.Clusters(t.Context())
	if tc.wantErr != "" {
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.wantErr)
		return []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)}
	}
	require.NoError(t, err)
	require.NotEmpty(t, cs)
	var texts []string
	for _, c := range cs {
		b, err := json.Marshal(c)
		require.NoError(t, err)
		texts = append(texts, string(b), fmt.Sprintf("%+v %+v", c, c.Auth.Exec))
		if tc.wantNotReady != "" {
			assert.False(t, c.Ready)
			assert.Contains(t, c.NotReadyReason, tc.wantNotReady)
		} else {
			assert.Equal(t, fixtureCAData(t), c.CA.Data(), "the kubeconfig's CA, and only it")
			assert.NotEqual(t, sources.AuthBearerToken, c.Auth.Kind, "never the kubeconfig's token")
		}
	}
	// The authorization header carried the access token.
	assert.Contains(t, a.Authorizations(), "Bearer "+ncAccessToken)
	return texts
}

// ncService runs the listing as the service does, through the inventory,
// and returns its status, the metrics page and the listing's error.
func ncService(t *testing.T, src *Source, logger *slog.Logger, reg *prometheus.Registry) (status, metrics string, listErr error) {
	t.Helper()
	inv, err := inventory.New([]inventory.SourceSpec{{
		Name: "azure-prod", Provider: sources.ProviderAKS, Source: src, Interval: time.Hour, Timeout: 30 * time.Second,
	}}, inventory.Options{Logger: logger, Registerer: reg})
	require.NoError(t, err)
	listErr = inv.RefreshAll(t.Context())
	b, err := json.Marshal(inv.Status())
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return string(b), rec.Body.String(), listErr
}
