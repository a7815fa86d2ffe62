package e2e

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
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

	mu    sync.Mutex
	keys  map[string]issuedKey
	calls []string
	n     int
}

func newIssuingSTS(t *testing.T) *issuingSTS {
	t.Helper()
	s := &issuingSTS{keys: map[string]issuedKey{
		eksControllerKeyID: {secret: eksControllerSecret, arn: eksControllerARN}}}
	cert, caPEM, err := newServingCA("e2e-fake-sts-ca", []string{"sts.amazonaws.com", stsHost(k8sAuthRegion)})
	if err != nil {
		t.Fatal(err)
	}
	s.caFile = filepath.Join(t.TempDir(), "sts-ca.pem")
	if err := os.WriteFile(s.caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	s.sts = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.sts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s.sts.StartTLS()
	tunnel := &fakeSTS{sts: s.sts} // its CONNECT proxy, to this STS
	s.proxy = httptest.NewServer(http.HandlerFunc(tunnel.serveConnect))
	t.Cleanup(func() {
		s.proxy.Close()
		s.sts.Close()
	})
	return s
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
// with a key it issued, in STS's query API shapes.
func (s *issuingSTS) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	form, ferr := url.ParseQuery(string(body))
	if err != nil || ferr != nil || r.Method != http.MethodPost {
		stsError(w, http.StatusBadRequest, "InvalidAction", "fake STS: POST a form")
		return
	}
	action, role := form.Get("Action"), form.Get("RoleArn")
	caller, err := s.verifyRequest(r, body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.calls = append(s.calls, "unverified "+action+": "+err.Error())
		stsError(w, http.StatusForbidden, "SignatureDoesNotMatch", err.Error())
		return
	}
	s.calls = append(s.calls, action+" "+role+" by "+caller)
	if action != "AssumeRole" || (role != eksDeployerRole && role != eksForgottenRole) {
		stsError(w, http.StatusForbidden, "AccessDenied",
			fmt.Sprintf("User: %s is not authorized to perform: sts:%s on resource: %s", caller, action, role))
		return
	}
	s.n++
	id := fmt.Sprintf("ASIAE2EEKS%010d", s.n)
	key := issuedKey{secret: randomHex(20), sessionToken: "e2e-eks-session-" + randomHex(16)}
	session := form.Get("RoleSessionName")
	key.arn = fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", eksAccount, role[strings.LastIndex(role, "/")+1:], session)
	if role == eksDeployerRole {
		s.keys[id] = key
	}
	w.Header().Set("Content-Type", "text/xml")
	_, _ = fmt.Fprintf(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <AssumedRoleUser><Arn>%s</Arn><AssumedRoleId>AROAE2EEKS:%s</AssumedRoleId></AssumedRoleUser>
    <Credentials>
      <AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey>
      <SessionToken>%s</SessionToken><Expiration>%s</Expiration>
    </Credentials>
  </AssumeRoleResult>
  <ResponseMetadata><RequestId>e2e-eks-%d</RequestId></ResponseMetadata>
</AssumeRoleResponse>`, key.arn, session, id, key.secret, key.sessionToken,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339), s.n)
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
