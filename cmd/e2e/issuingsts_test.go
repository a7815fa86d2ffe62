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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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
	eksIssuedSessionPrefix = "e2e-eks-session-"
)

// issuingSTS is a fake STS that issues temporary credentials and
// remembers them (access key id → secret, session token, ARN), so that it
// can verify signatures made with them: of AssumeRole, and of the
// presigned GetCallerIdentity the apiserver's webhook sends it, as
// aws-iam-authenticator does. argocd-k8s-auth reaches it through a CONNECT
// proxy (HTTPS_PROXY; its own, or the cloud proof's connectProxy) and
// trusts its CA through AWS_CA_BUNDLE.
type issuingSTS struct {
	sts    *httptest.Server
	proxy  *connectProxy
	caFile string
	// client reaches sts at its STS hosts, trusting its CA: the
	// webhook's, as aws-iam-authenticator's
	client *http.Client

	mu sync.Mutex
	// pod is the OIDC provider of the controller's cluster (IRSA); nil:
	// none trusted
	pod  *podIdentity
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
	var caPEM []byte
	s.sts, caPEM, s.caFile = startHostTLS(t, "e2e-fake-sts-ca", []string{"sts.amazonaws.com", stsHost(k8sAuthRegion)}, http.HandlerFunc(s.serve))
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
func (s *issuingSTS) allow(roles ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range roles {
		s.roles[r] = true
	}
}

// issue remembers a key as issued (for tests that sign with keys of their
// own).
func (s *issuingSTS) issue(id string, key issuedKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[id] = key
}

// secrets are the secret access keys and session tokens it issued: none
// may show in what a client writes.
func (s *issuingSTS) secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range s.keys {
		out = append(out, k.secret)
		if k.sessionToken != "" {
			out = append(out, k.sessionToken)
		}
	}
	return out
}

// lookup finds a key it issued (and remembered).
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

// serve answers, in STS's query API shapes, AssumeRole signed (SigV4, in
// the Authorization header) with a key it issued,
// AssumeRoleWithWebIdentity (unsigned) with a ServiceAccount token of the
// controller's cluster, and a presigned GetCallerIdentity (GET).
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
	var fault *stsFault
	if action == "AssumeRoleWithWebIdentity" {
		caller, fault = s.verifyWebIdentity(form.Get("WebIdentityToken"), role)
	} else {
		caller, fault = s.verifyRequest(r, body)
	}
	key, id, fault := s.assume(action, role, form.Get("RoleSessionName"), caller, fault)
	if fault != nil {
		stsError(w, fault.status, fault.code, fault.msg)
		return
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
  <ResponseMetadata><RequestId>e2e-eks-%[8]s</RequestId></ResponseMetadata>
</%[1]sResponse>`, action, key.arn, form.Get("RoleSessionName"), id, key.secret, key.sessionToken,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339), id)
}

// stsFault is an STS error answer: its HTTP status, code and message.
type stsFault struct {
	status    int
	code, msg string
}

func (f *stsFault) Error() string { return f.code + ": " + f.msg }

func faultf(status int, code, format string, args ...any) *stsFault {
	return &stsFault{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// assume records the call and issues credentials for role to caller, the
// identity verified (or why not: verr), or says why not.
func (s *issuingSTS) assume(action, role, session, caller string, verr *stsFault) (issuedKey, string, *stsFault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if verr != nil {
		s.calls = append(s.calls, "unverified "+action+": "+verr.Error())
		return issuedKey{}, "", verr
	}
	s.calls = append(s.calls, action+" "+role+" by "+caller)
	remember, ok := s.roles[role]
	if action != "AssumeRole" && action != "AssumeRoleWithWebIdentity" || !ok {
		return issuedKey{}, "", faultf(http.StatusForbidden, "AccessDenied",
			"User: %s is not authorized to perform: sts:%s on resource: %s", caller, action, role)
	}
	s.n++
	id := fmt.Sprintf("ASIAE2EEKS%010d", s.n)
	key := issuedKey{secret: randomHex(20), sessionToken: eksIssuedSessionPrefix + randomHex(16)}
	key.arn = fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", strings.Split(role, ":")[4], role[strings.LastIndex(role, "/")+1:], session)
	if remember {
		s.keys[id] = key
	}
	return key, id, nil
}

// serveCallerIdentity answers a presigned GetCallerIdentity, as STS does
// for aws-iam-authenticator: with the identity of the key it was signed
// with, when that key is one STS issued and the signature holds for the
// request's host and x-k8s-aws-id header.
func (s *issuingSTS) serveCallerIdentity(w http.ResponseWriter, r *http.Request) {
	cluster := r.Header.Get("x-k8s-aws-id")
	arn, fault := verifyPresigned(r.URL, r.Host, cluster, s.lookup)
	s.mu.Lock()
	if fault != nil {
		s.calls = append(s.calls, "GetCallerIdentity at "+r.Host+" for "+cluster+" refused: "+fault.Error())
	} else {
		s.calls = append(s.calls, "GetCallerIdentity at "+r.Host+" for "+cluster+": "+arn)
	}
	s.mu.Unlock()
	if fault != nil {
		stsError(w, fault.status, fault.code, fault.msg)
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
// identity for role: from the IAM OIDC provider (the controller's
// cluster), for STS's audience, and role trusts it (only the
// controller's IRSA role does).
func (s *issuingSTS) verifyWebIdentity(token, role string) (string, *stsFault) {
	s.mu.Lock()
	pod := s.pod
	s.mu.Unlock()
	if err := pod.verify(token, eksOIDCAudience); err != nil {
		return "", faultf(http.StatusBadRequest, "InvalidIdentityToken", "%v", err)
	}
	if role != eksIRSARole {
		return "", faultf(http.StatusForbidden, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity on %s", role)
	}
	return "web identity " + controllerSASubject, nil
}

// irsaEnv is what EKS's pod identity webhook gives the Argo CD
// controller's pod under IRSA (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE,
// AWS_STS_REGIONAL_ENDPOINTS=regional), with env's other settings and no
// static keys: this STS trusts pod's issuer from now on.
func (s *issuingSTS) irsaEnv(t *testing.T, pod *podIdentity) []string {
	t.Helper()
	s.mu.Lock()
	s.pod = pod
	s.mu.Unlock()
	return append(s.env(t), "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_STS_REGIONAL_ENDPOINTS=regional",
		"AWS_ROLE_ARN="+eksIRSARole, "AWS_WEB_IDENTITY_TOKEN_FILE="+pod.tokenFile(t, eksOIDCAudience))
}

// verifyRequest checks the SigV4 Authorization of r with a key this STS
// issued and returns the caller's ARN.
func (s *issuingSTS) verifyRequest(r *http.Request, body []byte) (string, *stsFault) {
	auth := r.Header.Get("Authorization")
	fields := map[string]string{}
	for _, f := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(f), "="); ok {
			fields[k] = v
		}
	}
	cred := strings.Split(fields["Credential"], "/")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || len(cred) != 5 || cred[3] != "sts" {
		return "", faultf(http.StatusForbidden, "IncompleteSignature", "not signed with SigV4 for sts")
	}
	key, ok := s.lookup(cred[0])
	if !ok {
		return "", faultf(http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid: %s", cred[0])
	}
	if key.sessionToken != "" && r.Header.Get("X-Amz-Security-Token") != key.sessionToken {
		return "", faultf(http.StatusForbidden, "InvalidClientTokenId", "wrong session token for %s", cred[0])
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
		return "", faultf(http.StatusForbidden, "SignatureDoesNotMatch", "signature of %s does not match", cred[0])
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
		"HTTPS_PROXY=" + s.proxy.URL(), "https_proxy=" + s.proxy.URL(), "NO_PROXY=", "no_proxy="}
}
