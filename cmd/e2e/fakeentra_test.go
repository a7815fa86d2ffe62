package e2e

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	fakeazure "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/azure"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/podidentity"
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
// argocd-k8s-auth azure runs (kubelogin, azidentity, MSAL): the shared
// fake (internal/fake/azure), checking the client assertion as Entra
// checks a federated credential (the ServiceAccount token's signature,
// issuer, subject and audience) and issuing RS256 JWTs as Entra does for
// an API application, each unique, as the apiserver caches webhook
// decisions by token. It listens on loopback with a certificate for
// login.microsoftonline.com, reached through a connectProxy.
type fakeEntra struct {
	*fakeazure.Entra
	srv    *httptest.Server
	caFile string
	// pod is the issuer of the application's federated credential: the
	// cluster where the controller runs
	pod *podidentity.Issuer
}

// entraResources lists, by tenant, the API applications with a service
// principal there: those a token may be asked for.
var entraResources = map[string][]string{
	entraHomeTenant:       {aksManagedServerApp},
	entraLighthouseTenant: {aksManagedServerApp, aksLegacyServerApp},
}

func newFakeEntra(t *testing.T, pod *podidentity.Issuer) *fakeEntra {
	t.Helper()
	e, err := fakeazure.NewEntra()
	if err != nil {
		t.Fatal(err)
	}
	e.Authority, e.Tenants, e.ClientID, e.ObjectID = "https://"+entraHost, entraResources, cloudClientID, entraControllerOID
	e.VerifyAssertion = func(assertion string) error { return pod.Verify(assertion, entraSAAudience) }
	f := &fakeEntra{Entra: e, pod: pod}
	f.srv, _, f.caFile = startHostTLS(t, "e2e-fake-entra-ca", []string{entraHost}, e)
	return f
}

func (f *fakeEntra) addr() string { return f.srv.Listener.Addr().String() }

func (f *fakeEntra) seen() []string { return f.Seen() }

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
		"AZURE_FEDERATED_TOKEN_FILE=" + tokenFile(t, f.pod, entraSAAudience), "AZURE_AUTHORITY_HOST=https://" + entraHost + "/",
		"AZURE_CLIENT_SECRET=", "AZURE_CLIENT_CERTIFICATE_PATH=",
		"SSL_CERT_FILE=" + f.caFile, "SSL_CERT_DIR=" + t.TempDir(),
		"HTTPS_PROXY=" + proxy.URL(), "https_proxy=" + proxy.URL(), "HTTP_PROXY=" + proxy.URL(), "http_proxy=" + proxy.URL(),
		"NO_PROXY=", "no_proxy="}
}
