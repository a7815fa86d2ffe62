package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// connectResult is the line argocd-cluster-check prints: whether Argo CD's
// own client code (util/db.SecretToCluster, Cluster.RESTConfig, a discovery
// client) connects with a cluster Secret.
type connectResult struct {
	OK      bool   `json:"ok"`
	Version string `json:"version"`
	Kind    string `json:"kind"` // x509, unauthorized, forbidden, timeout, network or other
	Error   string `json:"error"`
	// Output is all the tool wrote, stdout and stderr, for checks that no
	// credential leaks.
	Output string `json:"-"`
}

// argocdConnect runs argocd-cluster-check (built by `make testbin` from
// .ci/argocd-cluster-check) on s with its default timeout.
func argocdConnect(t *testing.T, s *corev1.Secret) connectResult {
	t.Helper()
	return argocdConnectWith(t, s, 0)
}

// argocdConnectWith runs argocd-cluster-check on s with a timeout (0: the
// tool's default, 10 s) and extra environment variables. A missing binary
// or a run that does not end with one result line (exit 0 if ok, 1 if not)
// fails the test.
func argocdConnectWith(t *testing.T, s *corev1.Secret, timeout time.Duration, env ...string) connectResult {
	t.Helper()
	// where TestMain finds the other binaries
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(e.root, "bin", "testbin")
	}
	bin := filepath.Join(assets, "argocd-cluster-check")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("argocd-cluster-check not found in %s (%v): run `make testbin` or `.ci/testbin argocd`, which build it offline "+
			"with Argo CD's ApplicationSet controller", assets, err)
	}
	in, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{}
	if timeout > 0 {
		args = append(args, "-timeout", timeout.String())
	}
	wait := 10*time.Second + 30*time.Second
	if timeout > 0 {
		wait = timeout + 30*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(toolEnviron(), env...)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var r connectResult
	line := strings.TrimSpace(stdout.String())
	if err := json.Unmarshal([]byte(line), &r); err != nil || strings.Contains(line, "\n") {
		t.Fatalf("argocd-cluster-check: %v: want one JSON line, got %q (decode: %v)\nstderr: %s", runErr, line, err, &stderr)
	}
	var exit *exec.ExitError
	switch {
	case r.OK && runErr != nil, !r.OK && !(errors.As(runErr, &exit) && exit.ExitCode() == 1):
		t.Fatalf("argocd-cluster-check printed %s and ended with %v: want exit 0 if ok, 1 if not\nstderr: %s", line, runErr, &stderr)
	}
	t.Logf("argocd-cluster-check: %s", line)
	r.Output = stdout.String() + stderr.String()
	return r
}

// toolEnviron is this process's environment without what would change how
// Argo CD's code and argocd-k8s-auth reach a cluster or a cloud: AWS,
// Azure and kubelogin settings, proxies, CA bundles. A test gives what it
// means to.
func toolEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		u := strings.ToUpper(k)
		if strings.HasPrefix(u, "AWS_") || strings.HasPrefix(u, "AZURE_") || strings.HasPrefix(u, "AAD_") ||
			strings.HasPrefix(u, "KUBELOGIN_") || strings.HasSuffix(u, "_PROXY") || strings.HasPrefix(u, "SSL_CERT_") ||
			u == "KUBECONFIG" || u == "IDENTITY_ENDPOINT" || u == "IDENTITY_HEADER" || u == "MSI_ENDPOINT" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// clusterSecret is a cluster Secret as Argo CD reads it, with config
// marshalled to JSON.
func clusterSecret(name, server string, config map[string]any) *corev1.Secret {
	raw, err := json.Marshal(config)
	if err != nil {
		panic(err)
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: argoNS, Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster"}},
		Data:       map[string][]byte{"name": []byte(name), "server": []byte(server), "config": raw},
	}
}

// TestArgoCDConnectCheck proves argocd-cluster-check against the suite's
// kube-apiserver: it says ok only for a Secret Argo CD connects with, and
// names why it does not otherwise; no credential shows in what it writes.
func TestArgoCDConnectCheck(t *testing.T) {
	f := newConnectFixture(t)
	for _, c := range append(f.connecting(t), f.failing(t)...) {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			var r connectResult
			if c.timeout == 0 && c.env == nil {
				r = argocdConnect(t, c.secret) // as other scenarios call it
			} else {
				r = argocdConnectWith(t, c.secret, c.timeout, c.env...)
			}
			switch {
			case len(c.kinds) == 0 && (!r.OK || r.Version != f.version):
				t.Errorf("got %+v, want ok and version %s", r, f.version)
			case len(c.kinds) > 0 && (r.OK || !slices.Contains(c.kinds, r.Kind) || r.Error == ""):
				t.Errorf("got %+v, want not ok, kind %s, with an error", r, strings.Join(c.kinds, " or "))
			}
			for _, s := range append(c.secrets, f.token) {
				if strings.Contains(r.Output, s) {
					t.Errorf("the tool's output holds a credential:\n%s", r.Output)
				}
			}
			if c.output != "" && !strings.Contains(r.Output, c.output) {
				t.Errorf("the tool's output lacks %q:\n%s", c.output, r.Output)
			}
			if c.timeout > 0 && time.Since(start) > c.timeout+9*time.Second {
				t.Errorf("took %s with a timeout of %s", time.Since(start), c.timeout)
			}
		})
	}
}

// connectCase is a Secret and what argocd-cluster-check must say of it.
type connectCase struct {
	name    string
	secret  *corev1.Secret
	timeout time.Duration // 0: the tool's default
	env     []string
	kinds   []string // the kinds of failure accepted; none: ok
	secrets []string // beside the token, must not show in the output
	output  string   // must show in the output
}

// connectFixture is how to reach the suite's kube-apiserver as Argo CD
// would: its URL, its CA (base64 PEM) and a token it accepts.
type connectFixture struct {
	server, ca, token, version string
}

// newConnectFixture gets a ServiceAccount's token from the TokenRequest API
// (envtest's kube-apiserver has a service-account signing key): the
// credential a real Argo CD cluster Secret carries.
func newConnectFixture(t *testing.T) connectFixture {
	ctx := context.Background()
	base, _, err := rest.DefaultServerUrlFor(e.rest)
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "e2e-connect-check", Namespace: argoNS}}
	if _, err := e.kube.CoreV1().ServiceAccounts(argoNS).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.kube.CoreV1().ServiceAccounts(argoNS).Delete(context.Background(), sa.Name, metav1.DeleteOptions{})
	})
	expiry := int64(600) // the API's minimum
	tr, err := e.kube.CoreV1().ServiceAccounts(argoNS).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	return connectFixture{server: strings.TrimRight(base.String(), "/"), ca: base64.StdEncoding.EncodeToString(e.rest.CAData),
		token: tr.Status.Token, version: v.GitVersion}
}

// config is a cluster Secret's config with the server's CA and auth.
func (f connectFixture) config(auth map[string]any) map[string]any {
	c := map[string]any{"tlsClientConfig": map[string]any{"caData": f.ca}}
	maps.Copy(c, auth)
	return c
}

// exec is an execProviderConfig: Argo CD runs the plugin with the env of
// the Secret's config, here the token.
func (f connectFixture) exec(command string) map[string]any {
	return map[string]any{"execProviderConfig": map[string]any{"command": command,
		"apiVersion": "client.authentication.k8s.io/v1beta1", "env": map[string]string{"E2E_TOKEN": f.token}}}
}

// connecting are the Secrets Argo CD connects with.
func (f connectFixture) connecting(t *testing.T) []connectCase {
	credential := `'{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"%s"}}'`
	stringData := clusterSecret("ok-stringdata", f.server, f.config(map[string]any{"bearerToken": f.token}))
	stringData.StringData = map[string]string{"server": f.server + "/", "config": string(stringData.Data["config"])}
	delete(stringData.Data, "server")
	delete(stringData.Data, "config")
	// argocd-k8s-auth, which Argo CD runs for awsAuthConfig, first on the PATH
	awsBin := t.TempDir()
	writeScriptAt(t, filepath.Join(awsBin, "argocd-k8s-auth"), fmt.Sprintf(
		`[ "$*" = "aws --cluster-name prod-eu --role-arn arn:aws:iam::123456789012:role/argocd" ] || { echo "args: $*" >&2; exit 1; }
printf %s %q`, credential, f.token))
	return []connectCase{
		{name: "server, CA and a ServiceAccount token: ok",
			secret: clusterSecret("ok", f.server, f.config(map[string]any{"bearerToken": f.token}))},
		{name: "the same in stringData, server with a trailing slash: ok", secret: stringData},
		{name: "an exec plugin returning the token: ok",
			secret: clusterSecret("exec", f.server, f.config(f.exec(writeScript(t, "token-plugin", "printf "+credential+` "$E2E_TOKEN"`))))},
		{name: "awsAuthConfig, as argocd-k8s-auth aws: ok",
			secret: clusterSecret("aws", f.server, f.config(map[string]any{"awsAuthConfig": map[string]any{
				"clusterName": "prod-eu", "roleARN": "arn:aws:iam::123456789012:role/argocd"}})),
			env: []string{"PATH=" + awsBin + string(os.PathListSeparator) + os.Getenv("PATH")}},
	}
}

// failing are the Secrets Argo CD does not connect with, and why.
func (f connectFixture) failing(t *testing.T) []connectCase {
	wrong := "e2e-wrong-token-" + strings.Repeat("x", 32)
	// connections complete in the listen backlog; nothing reads them
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	closed, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	unlabelled := clusterSecret("unlabelled", f.server, f.config(map[string]any{"bearerToken": f.token}))
	unlabelled.Labels = nil
	token := map[string]any{"bearerToken": f.token}
	return []connectCase{
		{name: "another CA: x509", kinds: []string{"x509"}, secret: clusterSecret("wrong-ca", f.server,
			map[string]any{"bearerToken": f.token, "tlsClientConfig": map[string]any{"caData": otherCA(t)}})},
		{name: "no CA: x509", kinds: []string{"x509"}, secret: clusterSecret("no-ca", f.server, token)},
		{name: "a wrong token: unauthorized", kinds: []string{"unauthorized"}, secrets: []string{wrong},
			secret: clusterSecret("wrong-token", f.server, f.config(map[string]any{"bearerToken": wrong}))},
		{name: "no credentials: forbidden (/version answers anonymous clients, /api does not)", kinds: []string{"forbidden"},
			secret: clusterSecret("anonymous", f.server, f.config(nil))},
		// 100::/64 is discard-only (RFC 6666): no answer, or no route
		{name: "an unroutable server: timeout or network", kinds: []string{"timeout", "network"}, timeout: time.Second,
			secret: clusterSecret("unroutable", "https://[100::1]:6443", token)},
		{name: "a server that never answers: timeout", kinds: []string{"timeout"}, timeout: time.Second,
			secret: clusterSecret("silent", "https://"+silent.Addr().String(), token)},
		{name: "a closed port: network", kinds: []string{"network"},
			secret: clusterSecret("closed", fmt.Sprintf("https://127.0.0.1:%d", closed), token)},
		{name: "a failing exec plugin: other, its stderr passed on redacted", kinds: []string{"other"}, output: "cannot use <redacted>",
			secret: clusterSecret("exec-fails", f.server, f.config(f.exec(writeScript(t, "failing-plugin", `echo "cannot use $E2E_TOKEN" >&2; exit 1`))))},
		{name: "not labelled as a cluster Secret: other", kinds: []string{"other"}, secret: unlabelled},
	}
}

// writeScript writes an executable shell script into a temporary directory.
func writeScript(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	writeScriptAt(t, p, body)
	return p
}

func writeScriptAt(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
}

// otherCA returns a self-signed CA certificate (base64 PEM) that signed
// nothing the API server serves.
func otherCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e-other-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
