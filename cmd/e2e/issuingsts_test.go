package e2e

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/authn"
	fakeaws "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/aws"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/podidentity"
)

// The fake STS's accounts, keys and roles for the EKS proof.
const (
	eksAccount          = "111111111111"
	eksControllerKeyID  = "AKIAE2EEKSCONTROLLER"
	eksControllerSecret = "e2eEksControllerSecretAccessKeyEXAMPLE01"
	eksControllerARN    = "arn:aws:iam::" + eksAccount + ":user/argocd-controller"
	// eksDeployerRole may be assumed; its credentials are remembered.
	eksDeployerRole = "arn:aws:iam::" + eksAccount + ":role/e2e-eks-deployer"
	// eksForgottenRole may be assumed, but STS forgets what it issued:
	// tokens signed with them are signed with an unknown key.
	eksForgottenRole = "arn:aws:iam::" + eksAccount + ":role/e2e-eks-forgotten"
	// eksRefusedRole may not be assumed (AccessDenied).
	eksRefusedRole = "arn:aws:iam::" + eksAccount + ":role/e2e-eks-refused"
	// eksIRSARole is the controller's role under IRSA: its ServiceAccount
	// token, from the cluster's OIDC issuer, is exchanged for it
	// (AssumeRoleWithWebIdentity).
	eksIRSARole     = "arn:aws:iam::" + eksAccount + ":role/argocd-controller"
	eksOIDCIssuer   = "https://oidc.eks." + k8sAuthRegion + ".amazonaws.com/id/E2E0123456789ABCDEF"
	eksOIDCAudience = "sts.amazonaws.com"
	// eksIssuedSessionPrefix starts every session token it issues
	eksIssuedSessionPrefix = fakeaws.IssuedSessionPrefix
)

// issuingSTS is the fake STS of internal/fake/aws, which issues
// temporary credentials and remembers them, so that it can verify
// signatures made with them: of AssumeRole, and of the presigned
// GetCallerIdentity the apiserver's webhook sends it, as
// aws-iam-authenticator does. argocd-k8s-auth reaches it through a CONNECT
// proxy (HTTPS_PROXY; its own, or the cloud proof's connectProxy) and
// trusts its CA through AWS_CA_BUNDLE.
type issuingSTS struct {
	*fakeaws.STS
	sts    *httptest.Server
	proxy  *connectProxy
	caFile string
	// client reaches sts at its STS hosts, trusting its CA: the
	// webhook's, as aws-iam-authenticator's
	client *http.Client

	mu sync.Mutex
	// pod is the OIDC provider of the controller's cluster (IRSA); nil:
	// none trusted
	pod *podidentity.Issuer
}

func newIssuingSTS(t *testing.T) *issuingSTS {
	t.Helper()
	s := &issuingSTS{STS: fakeaws.NewSTS()}
	s.Issue(eksControllerKeyID, fakeaws.Key{Secret: eksControllerSecret, ARN: eksControllerARN})
	s.Allow(true, eksDeployerRole, eksIRSARole)
	s.Allow(false, eksForgottenRole)
	s.VerifyWebIdentity = s.verifyWebIdentity
	var caPEM []byte
	s.sts, caPEM, s.caFile = startHostTLS(t, "e2e-fake-sts-ca", []string{"sts.amazonaws.com", authn.STSHost(k8sAuthRegion)}, s.STS)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	addr := s.sts.Listener.Addr().String()
	transport := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
	s.client = &http.Client{Timeout: 10 * time.Second, Transport: transport}
	t.Cleanup(transport.CloseIdleConnections)
	s.proxy = newSTSProxy(t, s.sts)
	return s
}

// allow lets the controller assume roles, and remembers what it issues
// for them.
func (s *issuingSTS) allow(roles ...string) { s.Allow(true, roles...) }

func (s *issuingSTS) seen() []string { return s.Seen() }

func (s *issuingSTS) secrets() []string { return s.Secrets() }

// callerIdentity is the webhook's authn.STSCaller: it sends the presigned
// request to this STS at the URL's host with the header x-k8s-aws-id.
func (s *issuingSTS) callerIdentity(presigned *url.URL, cluster string) (string, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, presigned.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("x-k8s-aws-id", cluster)
	resp, err := s.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("STS: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Arn   string `xml:"GetCallerIdentityResult>Arn"`
		Error struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		} `xml:"Error"`
	}
	if err := xml.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return "", fmt.Errorf("STS answered %s: %w", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK || out.Arn == "" {
		return "", fmt.Errorf("STS %s: %s", out.Error.Code, out.Error.Message)
	}
	return out.Arn, nil
}

// verifyWebIdentity checks a ServiceAccount token as STS checks a web
// identity for role: from the IAM OIDC provider (the controller's
// cluster), for STS's audience, and role trusts it (only the
// controller's IRSA role does).
func (s *issuingSTS) verifyWebIdentity(token, role string) (string, *fakeaws.Fault) {
	s.mu.Lock()
	pod := s.pod
	s.mu.Unlock()
	if err := pod.Verify(token, eksOIDCAudience); err != nil {
		return "", fakeaws.Faultf(http.StatusBadRequest, "InvalidIdentityToken", "%v", err)
	}
	if role != eksIRSARole {
		return "", fakeaws.Faultf(http.StatusForbidden, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity on %s", role)
	}
	return "web identity " + podidentity.ControllerSubject, nil
}

// irsaEnv is what EKS's pod identity webhook gives the Argo CD
// controller's pod under IRSA (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE,
// AWS_STS_REGIONAL_ENDPOINTS=regional), with env's other settings and no
// static keys: this STS trusts pod's issuer from now on.
func (s *issuingSTS) irsaEnv(t *testing.T, pod *podidentity.Issuer) []string {
	t.Helper()
	s.mu.Lock()
	s.pod = pod
	s.mu.Unlock()
	return append(s.env(t), "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_STS_REGIONAL_ENDPOINTS=regional",
		"AWS_ROLE_ARN="+eksIRSARole, "AWS_WEB_IDENTITY_TOKEN_FILE="+tokenFile(t, pod, eksOIDCAudience))
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// env is what argocd-cluster-check needs to run argocd-k8s-auth as Argo
// CD's pod does: the binary on the PATH, the controller's static keys, a
// region, and STS reached through the proxy; nothing of this machine's
// AWS configuration.
func (s *issuingSTS) env(t *testing.T) []string {
	home := t.TempDir()
	assets := filepath.Dir(k8sAuthBinary(t))
	return []string{"PATH=" + assets + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home,
		"AWS_ACCESS_KEY_ID=" + eksControllerKeyID, "AWS_SECRET_ACCESS_KEY=" + eksControllerSecret,
		"AWS_SESSION_TOKEN=", "AWS_PROFILE=", "AWS_ROLE_ARN=", "AWS_WEB_IDENTITY_TOKEN_FILE=",
		"AWS_REGION=" + k8sAuthRegion, "AWS_DEFAULT_REGION=" + k8sAuthRegion,
		"AWS_CONFIG_FILE=" + filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none"),
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CA_BUNDLE=" + s.caFile,
		"HTTPS_PROXY=" + s.proxy.URL(), "https_proxy=" + s.proxy.URL(), "NO_PROXY=", "no_proxy="}
}
