package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// What the fake STS expects and hands out to argocd-k8s-auth aws.
const (
	k8sAuthKeyID        = "AKIAEXAMPLE"
	k8sAuthSecret       = "e2eK8sAuthSecretAccessKeyEXAMPLE0123456"
	k8sAuthRegion       = "eu-west-1"
	k8sAuthRoleARN      = "arn:aws:iam::111111111111:role/argocd"
	k8sAuthAssumedKeyID = "ASIAE2EK8SAUTHEXAMPLE"
	k8sAuthAssumedToken = "e2e-k8s-auth-session-token-7c1f"
)

// fakeSTS answers AssumeRole over TLS for the hosts of AWS STS, reached
// through an HTTPS proxy (HTTPS_PROXY) that tunnels every CONNECT to it:
// aws-sdk-go v1, which argocd-k8s-auth uses, has no endpoint override in
// its environment, but it trusts AWS_CA_BUNDLE. Nothing leaves the machine.
type fakeSTS struct {
	sts    *httptest.Server
	proxy  *connectProxy
	caFile string

	mu    sync.Mutex
	calls []string // what STS was asked: Action and RoleArn, or why it was refused
}

func newFakeSTS(t *testing.T) *fakeSTS {
	t.Helper()
	f := &fakeSTS{}
	hosts := []string{"sts.amazonaws.com", "sts." + k8sAuthRegion + ".amazonaws.com"}
	f.sts, _, f.caFile = startHostTLS(t, "e2e-fake-sts-ca", hosts, http.HandlerFunc(f.serveSTS))
	f.proxy = newSTSProxy(t, f.sts)
	return f
}

// newSTSProxy is a connectProxy that tunnels the STS hosts to sts.
func newSTSProxy(t *testing.T, sts *httptest.Server) *connectProxy {
	t.Helper()
	addr := sts.Listener.Addr().String()
	return newConnectProxy(t, proxyRoute{"sts.amazonaws.com", addr}, proxyRoute{"sts.*.amazonaws.com", addr})
}

// serveSTS answers an AssumeRole signed with the static key, as STS's
// query API does (form-encoded POST, XML answer).
func (f *fakeSTS) serveSTS(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	action, role := r.PostForm.Get("Action"), r.PostForm.Get("RoleArn")
	f.mu.Lock()
	defer f.mu.Unlock()
	if !strings.Contains(r.Header.Get("Authorization"), "Credential="+k8sAuthKeyID+"/") {
		f.calls = append(f.calls, "unsigned "+action)
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `<ErrorResponse><Error><Type>Sender</Type><Code>InvalidClientTokenId</Code>`+
			`<Message>The security token included in the request is invalid.</Message></Error></ErrorResponse>`)
		return
	}
	f.calls = append(f.calls, action+" "+role+" on "+r.Host)
	if r.Method != http.MethodPost || action != "AssumeRole" || role != k8sAuthRoleARN {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>InvalidAction</Code>`+
			`<Message>fake STS: unexpected %s %s</Message></Error></ErrorResponse>`, action, role)
		return
	}
	session := r.PostForm.Get("RoleSessionName")
	w.Header().Set("Content-Type", "text/xml")
	_, _ = fmt.Fprintf(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::111111111111:assumed-role/argocd/%[1]s</Arn>
      <AssumedRoleId>AROAE2EK8SAUTHEXAMPLE:%[1]s</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>%[2]s</AccessKeyId>
      <SecretAccessKey>e2eAssumedSecretAccessKeyEXAMPLE012345</SecretAccessKey>
      <SessionToken>%[3]s</SessionToken>
      <Expiration>%[4]s</Expiration>
    </Credentials>
  </AssumeRoleResult>
  <ResponseMetadata><RequestId>e2e-k8s-auth-1</RequestId></ResponseMetadata>
</AssumeRoleResponse>`, session, k8sAuthAssumedKeyID, k8sAuthAssumedToken, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
}

func (f *fakeSTS) seen() (connects, calls []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.proxy.seen(), append([]string(nil), f.calls...)
}

// k8sAuthBinary is argocd-k8s-auth from bin/testbin; the test fails
// without it.
func k8sAuthBinary(t *testing.T) string {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(e.root, "bin", "testbin")
	}
	bin := filepath.Join(assets, "argocd-k8s-auth")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("argocd-k8s-auth not found in %s (%v): run `make testbin` or `.ci/testbin argocd`, which build it offline "+
			"from the Go module proxy", assets, err)
	}
	return bin
}

// TestArgoCDK8sAuthBinary runs Argo CD's argocd-k8s-auth aws as Argo CD
// runs it for a cluster Secret's awsAuthConfig with a roleARN: with static
// keys in its environment it assumes the role at STS (the fake, through
// the proxy) and prints an ExecCredential whose token is the presigned
// GetCallerIdentity URL, signed with the assumed role's credentials.
func TestArgoCDK8sAuthBinary(t *testing.T) {
	bin := k8sAuthBinary(t)
	f := newFakeSTS(t)
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "aws", "--cluster-name", "demo", "--role-arn", k8sAuthRoleARN)
	// a clean environment: no profile, shared files, proxy exceptions or
	// instance metadata of the machine
	cmd.Env = []string{"HOME=" + home,
		"AWS_ACCESS_KEY_ID=" + k8sAuthKeyID, "AWS_SECRET_ACCESS_KEY=" + k8sAuthSecret, "AWS_REGION=" + k8sAuthRegion,
		"AWS_CONFIG_FILE=" + filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none"),
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CA_BUNDLE=" + f.caFile, "HTTPS_PROXY=" + f.proxy.URL()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	connects, calls := f.seen()
	if err != nil {
		t.Fatalf("argocd-k8s-auth aws: %v after %v\nstdout: %s\nstderr: %s\nproxy: %q\nSTS: %q",
			err, time.Since(start).Round(time.Millisecond), &stdout, &stderr, connects, calls)
	}
	t.Logf("argocd-k8s-auth aws took %v; proxy: %q; STS: %q", time.Since(start).Round(time.Millisecond), connects, calls)

	var cred struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Status     struct {
			Token               string    `json:"token"`
			ExpirationTimestamp time.Time `json:"expirationTimestamp"`
		} `json:"status"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &cred); err != nil {
		t.Fatalf("stdout is not an ExecCredential: %v\n%s", err, &stdout)
	}
	if cred.APIVersion != "client.authentication.k8s.io/v1beta1" || cred.Kind != "ExecCredential" {
		t.Errorf("printed %s/%s, want client.authentication.k8s.io/v1beta1 ExecCredential", cred.APIVersion, cred.Kind)
	}
	if left := time.Until(cred.Status.ExpirationTimestamp); left < 13*time.Minute || left > 14*time.Minute+time.Second {
		t.Errorf("token expires in %v, want 14 minutes (the presigned URL's 15 minus one)", left)
	}
	checkPresigned(t, cred.Status.Token)
	// one AssumeRole; GetCallerIdentity is presigned, never sent
	if len(calls) != 1 || !strings.HasPrefix(calls[0], "AssumeRole "+k8sAuthRoleARN+" on ") {
		t.Errorf("STS was asked %q, want one AssumeRole of %s", calls, k8sAuthRoleARN)
	}
}

// checkPresigned checks an EKS token: k8s-aws-v1. and a presigned STS
// GetCallerIdentity URL signed with the assumed role's credentials.
func checkPresigned(t *testing.T, token string) {
	t.Helper()
	const prefix = "k8s-aws-v1."
	if !strings.HasPrefix(token, prefix) {
		t.Fatalf("token %q does not start with %s", token, prefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, prefix))
	if err != nil {
		t.Fatalf("token after %s is not unpadded base64url: %v", prefix, err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatalf("token is not a URL: %v: %q", err, raw)
	}
	q := u.Query()
	t.Logf("presigned: https://%s%s?Action=%s&X-Amz-Credential=%s&X-Amz-SignedHeaders=%s", u.Host, u.Path,
		q.Get("Action"), q.Get("X-Amz-Credential"), q.Get("X-Amz-SignedHeaders"))
	if u.Scheme != "https" || !strings.HasPrefix(u.Host, "sts.") || !strings.HasSuffix(u.Host, ".amazonaws.com") {
		t.Errorf("presigned URL %s://%s, want https to an STS host", u.Scheme, u.Host)
	}
	for k, want := range map[string]string{"Action": "GetCallerIdentity", "Version": "2011-06-15",
		"X-Amz-Algorithm": "AWS4-HMAC-SHA256", "X-Amz-Security-Token": k8sAuthAssumedToken} {
		if got := q.Get(k); got != want {
			t.Errorf("presigned URL: %s=%q, want %q", k, got, want)
		}
	}
	// Argo CD presigns with 60 (nanoseconds: X-Amz-Expires=0); STS ignores
	// it and aws-iam-authenticator accepts 0 to 60
	if x, err := strconv.Atoi(q.Get("X-Amz-Expires")); err != nil || x < 0 || x > 60 {
		t.Errorf("presigned URL: X-Amz-Expires=%q, want 0 to 60", q.Get("X-Amz-Expires"))
	}
	// signed with the assumed role's key, for STS, with the cluster's name
	if c := q.Get("X-Amz-Credential"); !strings.HasPrefix(c, k8sAuthAssumedKeyID+"/") || !strings.HasSuffix(c, "/sts/aws4_request") {
		t.Errorf("presigned URL: X-Amz-Credential=%q, want the assumed key %s for sts", c, k8sAuthAssumedKeyID)
	}
	if h := q.Get("X-Amz-SignedHeaders"); !strings.Contains(";"+h+";", ";x-k8s-aws-id;") {
		t.Errorf("presigned URL: X-Amz-SignedHeaders=%q, want x-k8s-aws-id among them", h)
	}
	if q.Get("X-Amz-Signature") == "" {
		t.Error("presigned URL has no X-Amz-Signature")
	}
}
