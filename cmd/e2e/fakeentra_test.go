package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The Entra ID of the AKS proof: the tenants, the Argo CD controller's
// application (multi-tenant, with a federated credential for its
// Kubernetes ServiceAccount) and the API server applications the clusters
// accept tokens for.
const (
	entraHost = "login.microsoftonline.com"
	// entraHomeTenant is the controller's own tenant (the fixture's
	// aadProfile.tenantID); entraLighthouseTenant one whose subscription
	// is delegated to it.
	entraHomeTenant       = "72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80"
	entraLighthouseTenant = "0f2e4d6c-8b1a-4c3e-9d5f-7a6b5c4d3e2f"
	// aksManagedServerApp is the AKS server application that AKS-managed
	// Entra integration accepts (argocd-k8s-auth's default).
	aksManagedServerApp = "6dae42f8-4368-4678-94ff-3960e28e3630"
	// aksLegacyServerApp is a legacy AAD cluster's own server application,
	// registered in the Lighthouse tenant.
	aksLegacyServerApp = "8c4b2a0e-6f1d-4e3c-b5a7-9d8e7f6a5b4c"
	// entraSAAudience is the audience of the federated credential
	entraSAAudience = "api://AzureADTokenExchange"
	// entraControllerOID is the controller's service principal object id,
	// the user the clusters see.
	entraControllerOID = "5e4d3c2b-1a0f-4e9d-8c7b-6a5f4e3d2c1b"
)

// fakeEntra is Entra ID's token service for the workload identity flow
// argocd-k8s-auth azure runs (kubelogin, azidentity, MSAL): instance and
// tenant discovery, and the client-credentials grant with a client
// assertion, which it checks as Entra checks a federated credential (the
// ServiceAccount token's signature, issuer, subject and audience). It
// issues access tokens as Entra does for an API application: RS256-signed
// JWTs with aud = the application, tid = the tenant, the v1 issuer of that
// tenant, each unique (uti), as the apiserver caches webhook decisions
// by token. It listens on loopback with a certificate for
// login.microsoftonline.com, reached through a connectProxy.
type fakeEntra struct {
	srv    *httptest.Server
	caFile string
	// key signs the access tokens
	key *rsa.PrivateKey
	// pod is the issuer of the application's federated credential: the
	// cluster where the controller runs
	pod *podIdentity

	mu    sync.Mutex
	calls []string // one line per token request: what was asked, what answered
}

// entraResources lists, by tenant, the API applications with a service
// principal there: those a token may be asked for.
var entraResources = map[string][]string{
	entraHomeTenant:       {aksManagedServerApp},
	entraLighthouseTenant: {aksManagedServerApp, aksLegacyServerApp},
}

func newFakeEntra(t *testing.T, pod *podIdentity) *fakeEntra {
	t.Helper()
	f := &fakeEntra{pod: pod}
	var err error
	if f.key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	f.srv, _, f.caFile = startHostTLS(t, "e2e-fake-entra-ca", []string{entraHost}, http.HandlerFunc(f.serve))
	return f
}

func (f *fakeEntra) addr() string { return f.srv.Listener.Addr().String() }

func (f *fakeEntra) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// entraFault is an error answer of Entra's token service.
type entraFault struct {
	status int
	code   string // the OAuth error
	aadsts int    // the AADSTS number, the first of error_codes
	desc   string
}

func (f *entraFault) Error() string { return fmt.Sprintf("AADSTS%d: %s", f.aadsts, f.desc) }

// entraError answers as Entra's token service does.
func entraError(w http.ResponseWriter, f *entraFault) {
	writeJSON(w, f.status, "application/json; charset=utf-8", map[string]any{"error": f.code, "error_description": f.Error(),
		"error_codes": []int{f.aadsts}, "timestamp": time.Now().UTC().Format(time.DateTime), "trace_id": "e2e", "correlation_id": "e2e"})
}

func (f *fakeEntra) serve(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	const jsonType = "application/json; charset=utf-8"
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/common/discovery/instance":
		// MSAL's instance discovery: the tenant's OpenID configuration
		auth, err := url.Parse(r.URL.Query().Get("authorization_endpoint"))
		tenant := ""
		if err == nil {
			tenant, _, _ = strings.Cut(strings.TrimPrefix(auth.Path, "/"), "/")
		}
		writeJSON(w, http.StatusOK, jsonType, map[string]any{"api-version": "1.1",
			"tenant_discovery_endpoint": "https://" + entraHost + "/" + tenant + "/v2.0/.well-known/openid-configuration",
			"metadata": []map[string]any{{"preferred_network": entraHost, "preferred_cache": "login.windows.net",
				"aliases": []string{entraHost, "login.windows.net", "login.microsoft.com", "sts.windows.net"}}}})
	case r.Method == http.MethodGet && len(parts) == 4 && parts[1] == "v2.0" && parts[3] == "openid-configuration":
		tenant := parts[0]
		if _, ok := entraResources[tenant]; !ok {
			entraError(w, &entraFault{http.StatusBadRequest, "invalid_tenant", 90002, "Tenant '" + tenant + "' not found."})
			return
		}
		base := "https://" + entraHost + "/" + tenant
		writeJSON(w, http.StatusOK, jsonType, map[string]any{"token_endpoint": base + "/oauth2/v2.0/token",
			"authorization_endpoint": base + "/oauth2/v2.0/authorize", "issuer": base + "/v2.0",
			"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt", "client_secret_basic"}})
	case r.Method == http.MethodPost && len(parts) == 4 && parts[1] == "oauth2" && parts[3] == "token":
		f.serveToken(w, r, parts[0])
	default:
		entraError(w, &entraFault{http.StatusNotFound, "invalid_request", 900561, "fake Entra: no route " + r.Method + " " + r.URL.Path})
	}
}

// serveToken answers the client-credentials grant of the workload identity
// flow for tenant, or refuses it as Entra would.
func (f *fakeEntra) serveToken(w http.ResponseWriter, r *http.Request, tenant string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	form, ferr := url.ParseQuery(string(body))
	if err != nil || ferr != nil {
		entraError(w, &entraFault{http.StatusBadRequest, "invalid_request", 900144, "malformed request body"})
		return
	}
	// MSAL adds the OpenID scopes to the resource's /.default
	resource := ""
	for _, sc := range strings.Fields(form.Get("scope")) {
		if r, ok := strings.CutSuffix(sc, "/.default"); ok {
			resource = r
		}
	}
	token, fault := f.issue(tenant, form, resource)
	f.mu.Lock()
	if fault != nil {
		f.calls = append(f.calls, fmt.Sprintf("refused %s in %s: %v", resource, tenant, fault))
	} else {
		f.calls = append(f.calls, fmt.Sprintf("token for %s in %s", resource, tenant))
	}
	f.mu.Unlock()
	if fault != nil {
		entraError(w, fault)
		return
	}
	writeJSON(w, http.StatusOK, "application/json; charset=utf-8", map[string]any{"token_type": "Bearer",
		"expires_in": 3599, "ext_expires_in": 3599, "access_token": token})
}

// issue checks a token request as Entra does, the client before the
// resource, and returns the access token.
func (f *fakeEntra) issue(tenant string, form url.Values, resource string) (string, *entraFault) {
	apps, ok := entraResources[tenant]
	switch {
	case !ok:
		return "", &entraFault{http.StatusBadRequest, "invalid_tenant", 90002, "Tenant '" + tenant + "' not found."}
	case form.Get("grant_type") != "client_credentials" ||
		form.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
		return "", &entraFault{http.StatusBadRequest, "invalid_request", 7000218, "The request body must contain client_assertion."}
	case form.Get("client_id") != cloudClientID:
		return "", &entraFault{http.StatusBadRequest, "unauthorized_client", 700016,
			"Application with identifier '" + form.Get("client_id") + "' was not found in the directory."}
	}
	if err := f.pod.verify(form.Get("client_assertion"), entraSAAudience); err != nil {
		return "", &entraFault{http.StatusUnauthorized, "invalid_client", 70021,
			"No matching federated identity record found for presented assertion: " + err.Error()}
	}
	if !slices.Contains(apps, resource) {
		return "", &entraFault{http.StatusBadRequest, "invalid_resource", 500011,
			"The resource principal named " + resource + " was not found in the tenant " + tenant + "."}
	}
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"aud": resource, "iss": "https://sts.windows.net/" + tenant + "/", "tid": tenant,
		"uti": randomHex(11), "oid": entraControllerOID, "sub": entraControllerOID, "appid": cloudClientID, "idtyp": "app", "ver": "1.0",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}).SignedString(f.key)
	if err != nil {
		return "", &entraFault{http.StatusInternalServerError, "server_error", 50000, err.Error()}
	}
	return tok, nil
}

// env is what the workload identity webhook puts in the Argo CD
// controller's pod, which argocd-k8s-auth azure inherits, with the token
// service reached through proxy: a cluster Secret's env overrides it.
// AAD_SERVER_APPLICATION_ID must stay unset: argocd-k8s-auth takes even an
// empty value over its default.
func (f *fakeEntra) env(t *testing.T, proxy *connectProxy) []string {
	t.Helper()
	assets := filepath.Dir(k8sAuthBinary(t))
	return []string{"PATH=" + assets + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"AZURE_CLIENT_ID=" + cloudClientID, "AZURE_TENANT_ID=" + entraHomeTenant,
		"AZURE_FEDERATED_TOKEN_FILE=" + f.pod.tokenFile(t, entraSAAudience), "AZURE_AUTHORITY_HOST=https://" + entraHost + "/",
		"AZURE_CLIENT_SECRET=", "AZURE_CLIENT_CERTIFICATE_PATH=",
		"SSL_CERT_FILE=" + f.caFile, "SSL_CERT_DIR=" + t.TempDir(),
		"HTTPS_PROXY=" + proxy.URL(), "https_proxy=" + proxy.URL(), "HTTP_PROXY=" + proxy.URL(), "http_proxy=" + proxy.URL(),
		"NO_PROXY=", "no_proxy="}
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
