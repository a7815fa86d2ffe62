package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
)

// clusterSecret is a cluster Secret as Argo CD reads it, with config
// marshalled to JSON.
func clusterSecret(name, server string, config map[string]any) *corev1.Secret {
	raw, err := json.Marshal(config)
	if err != nil {
		panic(err)
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ArgoNS, Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster"}},
		Data:       map[string][]byte{"name": []byte(name), "server": []byte(server), "config": raw},
	}
}

// TestArgoCDConnectCheck proves argocd-cluster-check against the suite's
// kube-apiserver: it says ok only for a Secret Argo CD connects with, and
// names why it does not otherwise; no credential shows in what it writes.
func TestArgoCDConnectCheck(t *testing.T) {
	f := e.NewConnectFixture(t)
	for _, c := range append(connecting(t, f), failing(t, f)...) {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			var r ConnectResult
			if c.timeout == 0 && c.env == nil {
				r = ArgoCDConnect(t, c.secret) // as other scenarios call it
			} else {
				r = ArgoCDConnectWith(t, c.secret, c.timeout, c.env...)
			}
			switch {
			case len(c.kinds) == 0 && (!r.OK || r.Version != f.Version):
				t.Errorf("got %+v, want ok and version %s", r, f.Version)
			case len(c.kinds) > 0 && (r.OK || !slices.Contains(c.kinds, r.Kind) || r.Error == ""):
				t.Errorf("got %+v, want not ok, kind %s, with an error", r, strings.Join(c.kinds, " or "))
			}
			for _, s := range append(c.secrets, f.Token) {
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

// connecting are the Secrets Argo CD connects with.
func connecting(t *testing.T, f ConnectFixture) []connectCase {
	credential := `'{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"%s"}}'`
	stringData := clusterSecret("ok-stringdata", f.Server, f.Config(map[string]any{"bearerToken": f.Token}))
	stringData.StringData = map[string]string{"server": f.Server + "/", "config": string(stringData.Data["config"])}
	delete(stringData.Data, "server")
	delete(stringData.Data, "config")
	// argocd-k8s-auth, which Argo CD runs for awsAuthConfig, first on the PATH
	awsBin := t.TempDir()
	writeScriptAt(t, filepath.Join(awsBin, "argocd-k8s-auth"), fmt.Sprintf(
		`[ "$*" = "aws --cluster-name prod-eu --role-arn arn:aws:iam::123456789012:role/argocd" ] || { echo "args: $*" >&2; exit 1; }
printf %s %q`, credential, f.Token))
	return []connectCase{
		{name: "server, CA and a ServiceAccount token: ok",
			secret: clusterSecret("ok", f.Server, f.Config(map[string]any{"bearerToken": f.Token}))},
		{name: "the same in stringData, server with a trailing slash: ok", secret: stringData},
		{name: "an exec plugin returning the token: ok",
			secret: clusterSecret("exec", f.Server, f.Config(f.Exec(writeScript(t, "token-plugin", "printf "+credential+` "$E2E_TOKEN"`))))},
		{name: "awsAuthConfig, as argocd-k8s-auth aws: ok",
			secret: clusterSecret("aws", f.Server, f.Config(map[string]any{"awsAuthConfig": map[string]any{
				"clusterName": "prod-eu", "roleARN": "arn:aws:iam::123456789012:role/argocd"}})),
			env: []string{"PATH=" + awsBin + string(os.PathListSeparator) + os.Getenv("PATH")}},
	}
}

// failing are the Secrets Argo CD does not connect with, and why.
func failing(t *testing.T, f ConnectFixture) []connectCase {
	wrong := "e2e-wrong-token-" + strings.Repeat("x", 32)
	// connections complete in the listen backlog; nothing reads them
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	closed, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	unlabelled := clusterSecret("unlabelled", f.Server, f.Config(map[string]any{"bearerToken": f.Token}))
	unlabelled.Labels = nil
	token := map[string]any{"bearerToken": f.Token}
	return []connectCase{
		{name: "another CA: x509", kinds: []string{"x509"}, secret: clusterSecret("wrong-ca", f.Server,
			map[string]any{"bearerToken": f.Token, "tlsClientConfig": map[string]any{"caData": OtherCA(t)}})},
		{name: "no CA: x509", kinds: []string{"x509"}, secret: clusterSecret("no-ca", f.Server, token)},
		{name: "a wrong token: unauthorized", kinds: []string{"unauthorized"}, secrets: []string{wrong},
			secret: clusterSecret("wrong-token", f.Server, f.Config(map[string]any{"bearerToken": wrong}))},
		{name: "no credentials: forbidden (/version answers anonymous clients, /api does not)", kinds: []string{"forbidden"},
			secret: clusterSecret("anonymous", f.Server, f.Config(nil))},
		// 100::/64 is discard-only (RFC 6666): no answer, or no route
		{name: "an unroutable server: timeout or network", kinds: []string{"timeout", "network"}, timeout: time.Second,
			secret: clusterSecret("unroutable", "https://[100::1]:6443", token)},
		{name: "a server that never answers: timeout", kinds: []string{"timeout"}, timeout: time.Second,
			secret: clusterSecret("silent", "https://"+silent.Addr().String(), token)},
		{name: "a closed port: network", kinds: []string{"network"},
			secret: clusterSecret("closed", fmt.Sprintf("https://127.0.0.1:%d", closed), token)},
		{name: "a failing exec plugin: other, its stderr passed on redacted", kinds: []string{"other"}, output: "cannot use <redacted>",
			secret: clusterSecret("exec-fails", f.Server, f.Config(f.Exec(writeScript(t, "failing-plugin", `echo "cannot use $E2E_TOKEN" >&2; exit 1`))))},
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
