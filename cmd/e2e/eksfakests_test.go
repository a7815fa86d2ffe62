package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
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
)

// issuingSTS is a fake STS that issues temporary credentials and
// remembers them (access key id → secret, session token, ARN), so that
// the apiserver's EKS webhook can verify signatures made with them, as STS
// does for GetCallerIdentity. It verifies the SigV4 signature of every
// AssumeRole. argocd-k8s-auth reaches it through the CONNECT proxy of
// k8sauth_test.go (HTTPS_PROXY, AWS_CA_BUNDLE).
type issuingSTS struct {
	sts, proxy *httptest.Server
	caFile     string
	// client reaches sts at its STS hosts, trusting its CA: the
	// webhook's, as aws-iam-authenticator's
	client *http.Client
	// oidcKey signs the ServiceAccount tokens of the cluster where the
	// controller runs (IRSA)
	oidcKey *rsa.PrivateKey

	mu   sync.Mutex
	keys map[string]issuedKey
	// roles may be assumed; the credentials of those marked true are
	// remembered (the others' are forgotten)
	roles map[string]bool
	calls []string
	n     int
}

func newIssuingSTS(t *testing.T) *issuingSTS {
	t.Helper()
	s := &issuingSTS{keys: map[string]issuedKey{
		eksControllerKeyID: {secret: eksControllerSecret, arn: eksControllerARN}},
		roles: map[string]bool{eksDeployerRole: true, eksForgottenRole: false, eksIRSARole: true}}
	var err error
	if s.oidcKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	var caPEM []byte
	s.sts, caPEM, s.caFile = startHostTLS(t, "e2e-fake-sts-ca", []string{"sts.amazonaws.com", stsHost(k8sAuthRegion)}, http.HandlerFunc(s.serve))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	addr := s.sts.Listener.Addr().String()
	s.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
	tunnel := &fakeSTS{sts: s.sts} // its CONNECT proxy, to this STS
	s.proxy = httptest.NewServer(http.HandlerFunc(tunnel.serveConnect))
	t.Cleanup(s.proxy.Close)
	return s
}

// allow lets the controller assume roles, and remembers what it issues
// for them.
func (s *issuingSTS) allow(roles ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range roles {
		s.roles[r] = true
	}
}

// lookup is the webhook's keyLookup.
func (s *issuingSTS) lookup(id string) (issuedKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[id]
	return k, ok
}

func (s *issuingSTS) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// serve answers AssumeRole, signed (SigV4, in the Authorization header)
// with a key it issued, and AssumeRoleWithWebIdentity (unsigned) with a
// ServiceAccount token of the cluster's OIDC issuer, in STS's query API
// shapes.
func (s *issuingSTS) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		s.serveCallerIdentity(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	form, ferr := url.ParseQuery(string(body))
	if err != nil || ferr != nil || r.Method != http.MethodPost {
		stsError(w, http.StatusBadRequest, "InvalidAction", "fake STS: POST a form")
		return
	}
	action, role := form.Get("Action"), form.Get("RoleArn")
	var caller string
	if action == "AssumeRoleWithWebIdentity" {
		caller, err = s.verifyWebIdentity(form.Get("WebIdentityToken"), role)
	} else {
		caller, err = s.verifyRequest(r, body)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.calls = append(s.calls, "unverified "+action+": "+err.Error())
		stsError(w, http.StatusForbidden, "SignatureDoesNotMatch", err.Error())
		return
	}
	s.calls = append(s.calls, action+" "+role+" by "+caller)
	remember, ok := s.roles[role]
	if action != "AssumeRole" && action != "AssumeRoleWithWebIdentity" || !ok {
		stsError(w, http.StatusForbidden, "AccessDenied",
			fmt.Sprintf("User: %s is not authorized to perform: sts:%s on resource: %s", caller, action, role))
		return
	}
	s.n++
	id := fmt.Sprintf("ASIAE2EEKS%010d", s.n)
	key := issuedKey{secret: randomHex(20), sessionToken: "e2e-eks-session-" + randomHex(16)}
	session := form.Get("RoleSessionName")
	key.arn = fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", strings.Split(role, ":")[4], role[strings.LastIndex(role, "/")+1:], session)
	if remember {
		s.keys[id] = key
	}
	w.Header().Set("Content-Type", "text/xml")
	_, _ = fmt.Fprintf(w, `<%[1]sResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <%[1]sResult>
    <AssumedRoleUser><Arn>%[2]s</Arn><AssumedRoleId>AROAE2EEKS:%[3]s</AssumedRoleId></AssumedRoleUser>
    <Credentials>
      <AccessKeyId>%[4]s</AccessKeyId><SecretAccessKey>%[5]s</SecretAccessKey>
      <SessionToken>%[6]s</SessionToken><Expiration>%[7]s</Expiration>
    </Credentials>
  </%[1]sResult>
  <ResponseMetadata><RequestId>e2e-eks-%[8]d</RequestId></ResponseMetadata>
</%[1]sResponse>`, action, key.arn, session, id, key.secret, key.sessionToken,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339), s.n)
}

// serveCallerIdentity answers a presigned GetCallerIdentity, as STS does
// for aws-iam-authenticator: with the identity of the key it was signed
// with, when that key is one STS issued and the signature holds for the
// request's host and x-k8s-aws-id header.
func (s *issuingSTS) serveCallerIdentity(w http.ResponseWriter, r *http.Request) {
	cluster := r.Header.Get("x-k8s-aws-id")
	arn, err := verifyPresigned(r.URL, r.Host, cluster, s.lookup)
	s.mu.Lock()
	if err != nil {
		s.calls = append(s.calls, "GetCallerIdentity for "+cluster+" refused: "+err.Error())
	} else {
		s.calls = append(s.calls, "GetCallerIdentity for "+cluster+": "+arn)
	}
	s.mu.Unlock()
	if err != nil {
		stsError(w, http.StatusForbidden, "SignatureDoesNotMatch", err.Error())
		return
	}
	account := strings.Split(arn, ":")[4]
	w.Header().Set("Content-Type", "text/xml")
	_, _ = fmt.Fprintf(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <GetCallerIdentityResult><Arn>%s</Arn><UserId>AROAE2EEKS:e2e</UserId><Account>%s</Account></GetCallerIdentityResult>
  <ResponseMetadata><RequestId>e2e-eks-gci</RequestId></ResponseMetadata>
</GetCallerIdentityResponse>`, arn, account)
}

// callerIdentity is the webhook's stsCaller: it sends the presigned
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
// identity for role: signed by the IAM OIDC provider's issuer, for STS's
// audience, trusted by role (only the controller's IRSA role trusts it).
func (s *issuingSTS) verifyWebIdentity(token, role string) (string, error) {
	var c jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return &s.oidcKey.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(eksOIDCIssuer), jwt.WithAudience(eksOIDCAudience),
		jwt.WithExpirationRequired())
	switch {
	case err != nil:
		return "", fmt.Errorf("InvalidIdentityToken: %w", err)
	case role != eksIRSARole:
		return "", fmt.Errorf("not authorized to perform sts:AssumeRoleWithWebIdentity on %s", role)
	}
	return "web identity " + c.Subject, nil
}

// irsaEnv is what EKS's pod identity webhook gives the Argo CD
// controller's pod under IRSA (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE),
// with env's other settings and no static keys.
func (s *issuingSTS) irsaEnv(t *testing.T) []string {
	t.Helper()
	file := writeServiceAccountToken(t, s.oidcKey, eksOIDCIssuer, entraSASubject, eksOIDCAudience)
	return append(s.env(t), "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=",
		"AWS_ROLE_ARN="+eksIRSARole, "AWS_WEB_IDENTITY_TOKEN_FILE="+file, "AWS_ROLE_SESSION_NAME=argocd-controller")
}

// verifyRequest checks the SigV4 Authorization of r with a key this STS
// issued and returns the caller's ARN.
func (s *issuingSTS) verifyRequest(r *http.Request, body []byte) (string, error) {
	auth := r.Header.Get("Authorization")
	fields := map[string]string{}
	for _, f := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(f), "="); ok {
			fields[k] = v
		}
	}
	cred := strings.Split(fields["Credential"], "/")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || len(cred) != 5 || cred[3] != "sts" {
		return "", fmt.Errorf("not signed with SigV4 for sts")
	}
	key, ok := s.lookup(cred[0])
	if !ok {
		return "", fmt.Errorf("the security token included in the request is invalid: %s", cred[0])
	}
	if key.sessionToken != "" && r.Header.Get("X-Amz-Security-Token") != key.sessionToken {
		return "", fmt.Errorf("wrong session token for %s", cred[0])
	}
	header := func(name string) string {
		switch name {
		case "host":
			return r.Host
		case "content-length":
			return strconv.Itoa(len(body))
		}
		return r.Header.Get(name)
	}
	payload := hashHex(body)
	want := sigV4(r.Method, "/", r.URL.Query(), strings.Split(fields["SignedHeaders"], ";"), header, payload,
		r.Header.Get("X-Amz-Date"), strings.Join(cred[1:], "/"), key.secret)
	if fields["Signature"] != want {
		return "", fmt.Errorf("signature of %s does not match", cred[0])
	}
	return key.arn, nil
}

func stsError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error>`+
		`<RequestId>e2e-eks-error</RequestId></ErrorResponse>`, code, msg)
}

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
		"HTTPS_PROXY=" + s.proxy.URL, "https_proxy=" + s.proxy.URL, "NO_PROXY=", "no_proxy="}
}
