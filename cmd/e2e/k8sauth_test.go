package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
)

// TestArgoCDK8sAuthBinary runs Argo CD's argocd-k8s-auth aws as Argo CD
// runs it for a cluster Secret's awsAuthConfig with a roleARN: with static
// keys in its environment it assumes the role at STS (the issuing fake,
// through the proxy) and prints an ExecCredential whose token is the
// presigned GetCallerIdentity URL, signed with the assumed role's
// credentials: STS answers it with the assumed role.
func TestArgoCDK8sAuthBinary(t *testing.T) {
	bin := K8sAuthBinary(t)
	f := NewIssuingSTS(t)
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "aws", "--cluster-name", "demo", "--role-arn", EKSDeployerRole)
	// a clean environment: no profile, shared files, proxy exceptions or
	// instance metadata of the machine
	cmd.Env = []string{"HOME=" + home,
		"AWS_ACCESS_KEY_ID=" + EKSControllerKeyID, "AWS_SECRET_ACCESS_KEY=" + EKSControllerSecret, "AWS_REGION=" + K8sAuthRegion,
		"AWS_CONFIG_FILE=" + filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none"),
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CA_BUNDLE=" + f.CAFile, "HTTPS_PROXY=" + f.Proxy.URL()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	connects, calls := f.Proxy.Seen(), f.Seen()
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
	u := checkPresigned(t, cred.Status.Token)
	// one AssumeRole by the static key's user; GetCallerIdentity is
	// presigned, never sent by argocd-k8s-auth
	if want := "AssumeRole " + EKSDeployerRole + " by " + EKSControllerARN; len(calls) != 1 || calls[0] != want {
		t.Errorf("STS was asked %q, want %q", calls, want)
	}
	// what the apiserver's webhook does with the token: STS answers the
	// presigned call with the assumed role
	arn, err := f.CallerIdentity(u, "demo")
	if want := "arn:aws:sts::" + EKSAccount + ":assumed-role/e2e-eks-deployer/"; err != nil || !strings.HasPrefix(arn, want) {
		t.Errorf("GetCallerIdentity with the token: %q, %v; want %s…", arn, err, want)
	}
}

// checkPresigned checks an EKS token: k8s-aws-v1. and a presigned STS
// GetCallerIdentity URL signed with credentials the issuing STS handed
// out. It returns the URL.
func checkPresigned(t *testing.T, token string) *url.URL {
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
	for k, want := range map[string]string{"Action": "GetCallerIdentity", "Version": "2011-06-15", "X-Amz-Algorithm": "AWS4-HMAC-SHA256"} {
		if got := q.Get(k); got != want {
			t.Errorf("presigned URL: %s=%q, want %q", k, got, want)
		}
	}
	if tok := q.Get("X-Amz-Security-Token"); !strings.HasPrefix(tok, EKSIssuedSessionPrefix) {
		t.Errorf("presigned URL: X-Amz-Security-Token=%q, want a session token STS issued", tok)
	}
	// Argo CD presigns with 60 (nanoseconds: X-Amz-Expires=0); STS ignores
	// it and aws-iam-authenticator accepts 0 to 60
	if x, err := strconv.Atoi(q.Get("X-Amz-Expires")); err != nil || x < 0 || x > 60 {
		t.Errorf("presigned URL: X-Amz-Expires=%q, want 0 to 60", q.Get("X-Amz-Expires"))
	}
	// signed with an assumed role's key, for STS, with the cluster's name
	if c := q.Get("X-Amz-Credential"); !strings.HasPrefix(c, "ASIAE2EEKS") || !strings.HasSuffix(c, "/sts/aws4_request") {
		t.Errorf("presigned URL: X-Amz-Credential=%q, want an assumed key for sts", c)
	}
	if h := q.Get("X-Amz-SignedHeaders"); !strings.Contains(";"+h+";", ";x-k8s-aws-id;") {
		t.Errorf("presigned URL: X-Amz-SignedHeaders=%q, want x-k8s-aws-id among them", h)
	}
	if q.Get("X-Amz-Signature") == "" {
		t.Error("presigned URL has no X-Amz-Signature")
	}
	return u
}
