package azure

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Entra is Microsoft Entra ID's token service as azidentity, MSAL and
// kubelogin (argocd-k8s-auth azure) call it: instance and tenant
// discovery, and the client-credentials grant with a client secret or a
// client assertion. It issues access tokens as Entra does for an API
// application (RS256-signed JWTs with aud = the application, tid = the
// tenant, the v1 issuer of that tenant, each unique), or a fixed one. It
// is an http.Handler: serve it over TLS (httptest.NewTLSServer, or a
// listener with a certificate for login.microsoftonline.com). Set its
// exported fields before the first request.
type Entra struct {
	// Authority is the base URL its discovery documents name, as clients
	// reach it ("https://login.microsoftonline.com").
	Authority string
	// Tenants lists, by tenant, the API applications with a service
	// principal there: those a token may be asked for. A tenant not in it
	// is unknown (AADSTS90002). nil: every tenant and application.
	Tenants map[string][]string
	// ClientID is the one application that may ask ("": any).
	ClientID string
	// VerifyAssertion checks a client assertion as Entra checks a
	// federated credential; with it, only the assertion flow is accepted.
	// nil: any client secret or assertion is accepted (and recorded:
	// Received).
	VerifyAssertion func(assertion string) error
	// AccessToken, when set, is the access token handed out instead of a
	// signed JWT.
	AccessToken string
	// ObjectID is the oid and sub of the tokens it signs.
	ObjectID string

	key *rsa.PrivateKey

	mu              sync.Mutex
	failStatus      int
	failBody        string
	calls, received []string
}

// NewEntra returns a token service with a signing key of its own.
func NewEntra() (*Entra, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("fake entra: %w", err)
	}
	return &Entra{key: key}, nil
}

// PublicKey verifies the access tokens it signs.
func (e *Entra) PublicKey() *rsa.PublicKey { return &e.key.PublicKey }

// Fail answers every token request with status and body (0: succeed
// again).
func (e *Entra) Fail(status int, body string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failStatus, e.failBody = status, body
}

// Seen returns one line per token request: what was asked, what answered.
func (e *Entra) Seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

// Received returns the client_secret and client_assertion values of the
// token requests, two per request.
func (e *Entra) Received() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.received)
}

// fault is an error answer of Entra's token service.
type fault struct {
	status int
	code   string // the OAuth error
	aadsts int    // the AADSTS number, the first of error_codes
	desc   string
}

func (f *fault) Error() string { return fmt.Sprintf("AADSTS%d: %s", f.aadsts, f.desc) }

// write answers as Entra's token service does.
func (f *fault) write(w http.ResponseWriter) {
	writeJSON(w, f.status, map[string]any{"error": f.code, "error_description": f.Error(),
		"error_codes": []int{f.aadsts}, "timestamp": time.Now().UTC().Format(time.DateTime), "trace_id": "fake", "correlation_id": "fake"})
}

func (e *Entra) knownTenant(tenant string) bool {
	_, ok := e.Tenants[tenant]
	return e.Tenants == nil || ok
}

// ServeHTTP answers instance discovery, a tenant's OpenID configuration
// and its token endpoint.
func (e *Entra) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	host := strings.TrimPrefix(strings.TrimPrefix(e.Authority, "https://"), "http://")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/common/discovery/instance":
		// MSAL's instance discovery: the tenant's OpenID configuration
		auth, err := url.Parse(r.URL.Query().Get("authorization_endpoint"))
		tenant := ""
		if err == nil {
			tenant, _, _ = strings.Cut(strings.TrimPrefix(auth.Path, "/"), "/")
		}
		writeJSON(w, http.StatusOK, map[string]any{"api-version": "1.1",
			"tenant_discovery_endpoint": e.Authority + "/" + tenant + "/v2.0/.well-known/openid-configuration",
			"metadata": []map[string]any{{"preferred_network": host, "preferred_cache": "login.windows.net",
				"aliases": []string{host, "login.windows.net", "login.microsoft.com", "sts.windows.net"}}}})
	case r.Method == http.MethodGet && len(parts) == 4 && parts[1] == "v2.0" && parts[3] == "openid-configuration":
		tenant := parts[0]
		if !e.knownTenant(tenant) {
			(&fault{http.StatusBadRequest, "invalid_tenant", 90002, "Tenant '" + tenant + "' not found."}).write(w)
			return
		}
		base := e.Authority + "/" + tenant
		writeJSON(w, http.StatusOK, map[string]any{"token_endpoint": base + "/oauth2/v2.0/token",
			"authorization_endpoint": base + "/oauth2/v2.0/authorize", "issuer": base + "/v2.0",
			"device_authorization_endpoint":         base + "/oauth2/v2.0/devicecode",
			"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt", "client_secret_basic"}})
	case r.Method == http.MethodPost && len(parts) == 4 && parts[1] == "oauth2" && parts[3] == "token":
		e.serveToken(w, r, parts[0])
	default:
		(&fault{http.StatusNotFound, "invalid_request", 900561, "fake Entra: no route " + r.Method + " " + r.URL.Path}).write(w)
	}
}

// serveToken answers the client-credentials grant for tenant, or refuses
// it as Entra would.
func (e *Entra) serveToken(w http.ResponseWriter, r *http.Request, tenant string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	form, ferr := url.ParseQuery(string(body))
	if err != nil || ferr != nil {
		(&fault{http.StatusBadRequest, "invalid_request", 900144, "malformed request body"}).write(w)
		return
	}
	// MSAL adds the OpenID scopes to the resource's /.default
	resource := ""
	for _, sc := range strings.Fields(form.Get("scope")) {
		if r, ok := strings.CutSuffix(sc, "/.default"); ok {
			resource = r
		}
	}
	e.mu.Lock()
	e.received = append(e.received, form.Get("client_secret"), form.Get("client_assertion"))
	status, failBody := e.failStatus, e.failBody
	e.mu.Unlock()
	if status != 0 {
		write(w, status, []byte(failBody))
		return
	}
	token, f := e.issue(tenant, form, resource)
	e.mu.Lock()
	if f != nil {
		e.calls = append(e.calls, fmt.Sprintf("refused %s in %s: %v", resource, tenant, f))
	} else {
		e.calls = append(e.calls, fmt.Sprintf("token for %s in %s", resource, tenant))
	}
	e.mu.Unlock()
	if f != nil {
		f.write(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token})
}

// issue checks a token request as Entra does, the client before the
// resource, and returns the access token.
func (e *Entra) issue(tenant string, form url.Values, resource string) (string, *fault) {
	assertion := form.Get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	switch {
	case !e.knownTenant(tenant):
		return "", &fault{http.StatusBadRequest, "invalid_tenant", 90002, "Tenant '" + tenant + "' not found."}
	case form.Get("grant_type") != "client_credentials" || e.VerifyAssertion != nil && !assertion:
		return "", &fault{http.StatusBadRequest, "invalid_request", 7000218, "The request body must contain client_assertion."}
	case e.ClientID != "" && form.Get("client_id") != e.ClientID:
		return "", &fault{http.StatusBadRequest, "unauthorized_client", 700016,
			"Application with identifier '" + form.Get("client_id") + "' was not found in the directory."}
	}
	if e.VerifyAssertion != nil {
		if err := e.VerifyAssertion(form.Get("client_assertion")); err != nil {
			return "", &fault{http.StatusUnauthorized, "invalid_client", 70021,
				"No matching federated identity record found for presented assertion: " + err.Error()}
		}
	}
	if e.Tenants != nil && !slices.Contains(e.Tenants[tenant], resource) {
		return "", &fault{http.StatusBadRequest, "invalid_resource", 500011,
			"The resource principal named " + resource + " was not found in the tenant " + tenant + "."}
	}
	if e.AccessToken != "" {
		return e.AccessToken, nil
	}
	uti := make([]byte, 11)
	_, _ = rand.Read(uti)
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"aud": resource, "iss": "https://sts.windows.net/" + tenant + "/", "tid": tenant,
		"uti": hex.EncodeToString(uti), "oid": e.ObjectID, "sub": e.ObjectID, "appid": form.Get("client_id"), "idtyp": "app", "ver": "1.0",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}).SignedString(e.key)
	if err != nil {
		return "", &fault{http.StatusInternalServerError, "server_error", 50000, err.Error()}
	}
	return tok, nil
}
