package sources_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestNormalizeServer(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string // substring of the error; empty means success
	}{
		// Accepted, returned without trailing slashes and otherwise verbatim.
		{name: "plain https", in: "https://k8s.example.com", want: "https://k8s.example.com"},
		{name: "plain http", in: "http://10.0.0.1:8080", want: "http://10.0.0.1:8080"},
		{name: "one trailing slash", in: "https://k8s.example.com/", want: "https://k8s.example.com"},
		{name: "several trailing slashes", in: "https://k8s.example.com///", want: "https://k8s.example.com"},
		{name: "host case preserved", in: "https://ACMEPRODEU.gr7.eu-west-1.eks.Example.com", want: "https://ACMEPRODEU.gr7.eu-west-1.eks.Example.com"},
		{name: "scheme case preserved", in: "HTTPS://k8s.example.com/", want: "HTTPS://k8s.example.com"},
		{name: "port preserved", in: "https://k8s.example.com:443/", want: "https://k8s.example.com:443"},
		{name: "non default port preserved", in: "https://k8s.example.com:6443", want: "https://k8s.example.com:6443"},
		{name: "path kept, trailing slash trimmed", in: "https://rancher.example.com/k8s/clusters/c-m-ab12cd/", want: "https://rancher.example.com/k8s/clusters/c-m-ab12cd"},
		{name: "path case preserved", in: "https://rancher.example.com/K8S/Clusters/C-1", want: "https://rancher.example.com/K8S/Clusters/C-1"},
		{name: "ipv6 host with port", in: "https://[2001:db8::1]:6443/", want: "https://[2001:db8::1]:6443"},
		{name: "surrounding whitespace trimmed", in: "  https://k8s.example.com/ \n", want: "https://k8s.example.com"},

		// Rejected.
		{name: "space before a trailing slash", in: "https://k8s.example.com/ /", wantErr: "must not contain whitespace"},
		{name: "space in the path", in: "https://rancher.example.com/k8s/clusters/c 1", wantErr: "must not contain whitespace"},
		{name: "empty", in: "", wantErr: "scheme must be https or http"},
		{name: "only whitespace", in: "   ", wantErr: "scheme must be https or http"},
		{name: "no scheme", in: "k8s.example.com", wantErr: "scheme must be https or http"},
		{name: "no scheme with port", in: "k8s.example.com:6443", wantErr: "scheme must be https or http"},
		{name: "scheme relative", in: "//k8s.example.com", wantErr: "scheme must be https or http"},
		{name: "ftp scheme", in: "ftp://k8s.example.com", wantErr: "scheme must be https or http"},
		{name: "websocket scheme", in: "wss://k8s.example.com", wantErr: "scheme must be https or http"},
		{name: "file scheme", in: "file:///etc/kubernetes/admin.conf", wantErr: "scheme must be https or http"},
		{name: "mailto scheme", in: "mailto:ops@example.com", wantErr: "scheme must be https or http"},
		{name: "scheme only", in: "https://", wantErr: "no host"},
		{name: "scheme only with slashes", in: "https:///", wantErr: "no host"},
		{name: "path without host", in: "https:///k8s/clusters/c-1", wantErr: "no host"},
		{name: "opaque https", in: "https:k8s.example.com", wantErr: "no host"},
		{name: "user only", in: "https://admin@k8s.example.com", wantErr: "user info"},
		{name: "user and password", in: "https://admin:hunter2@k8s.example.com", wantErr: "user info"},
		{name: "empty user info", in: "https://@k8s.example.com", wantErr: "user info"},
		{name: "query", in: "https://k8s.example.com?timeout=5s", wantErr: "must not have a query or fragment"},
		{name: "query after path", in: "https://k8s.example.com/api?x=1", wantErr: "must not have a query or fragment"},
		{name: "fragment", in: "https://k8s.example.com/#frag", wantErr: "must not have a query or fragment"},
		{name: "invalid port", in: "https://k8s.example.com:port", wantErr: "invalid server url"},
		{name: "space in host", in: "https://k8s example.com", wantErr: "invalid server url"},
		{name: "bad escape", in: "https://k8s.example.com/%zz", wantErr: "invalid server url"},
		{name: "control character", in: "https://k8s.example.com/\x7f", wantErr: "invalid server url"},
		{name: "garbage", in: ":::://???", wantErr: "invalid server url"},

		// The doc promises "an absolute http(s) URL with a host" and "no
		// query or fragment". These three are accepted today (see report).
		{name: "port without host name", in: "https://:6443", wantErr: "no host"},
		{name: "empty query marker", in: "https://k8s.example.com?", wantErr: "must not have a query or fragment"},
		{name: "empty fragment marker", in: "https://k8s.example.com#", wantErr: "must not have a query or fragment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sources.NormalizeServer(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err, "accepted as %q", got)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)

			again, err := sources.NormalizeServer(got)
			require.NoError(t, err, "normalized form must be accepted again")
			assert.Equal(t, got, again, "normalization must be idempotent")
		})
	}
}

func TestNormalizeServerDoesNotLeakPassword(t *testing.T) {
	_, err := sources.NormalizeServer("https://admin:hunter2@k8s.example.com")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
}

func TestAuthValidate(t *testing.T) {
	fileRef := &sources.SecretRef{File: "/var/run/secrets/token"}
	envRef := &sources.SecretRef{Env: "CLUSTER_TOKEN"}
	secretRef := &sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "creds", Key: "token"}}
	aws := &sources.AWSAuth{ClusterName: "prod", RoleARN: "arn:aws:iam::111111111111:role/deployer", Region: "eu-west-1"}
	exec := &sources.ExecProvider{Command: "argocd-k8s-auth", Args: []string{"azure"}}

	tests := []struct {
		name    string
		auth    sources.Auth
		wantErr string
	}{
		{name: "none", auth: sources.Auth{}},
		{name: "bearer token from file", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: fileRef}},
		{name: "bearer token from env", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: envRef}},
		{name: "bearer token from secret", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: secretRef}},
		{name: "aws", auth: sources.Auth{Kind: sources.AuthAWS, AWS: aws}},
		{name: "aws with cluster name only", auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: "prod"}}},
		{name: "exec", auth: sources.Auth{Kind: sources.AuthExec, Exec: exec}},

		{name: "none kind with token", auth: sources.Auth{TokenRef: fileRef}, wantErr: "auth kind is empty but credentials are set"},
		{name: "none kind with aws", auth: sources.Auth{AWS: aws}, wantErr: "auth kind is empty but credentials are set"},
		{name: "none kind with exec", auth: sources.Auth{Exec: exec}, wantErr: "auth kind is empty but credentials are set"},
		{name: "bearer without reference", auth: sources.Auth{Kind: sources.AuthBearerToken}, wantErr: "bearer token auth needs a token reference"},
		{name: "bearer with empty reference", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{}}, wantErr: "token reference: set exactly one of file, env or secret (got 0)"},
		{name: "bearer with file and env", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{File: "/t", Env: "T"}}, wantErr: "token reference: set exactly one of file, env or secret (got 2)"},
		{name: "bearer with secret missing key", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "creds"}}}, wantErr: "token reference: secret reference needs both name and key"},
		{name: "aws without section", auth: sources.Auth{Kind: sources.AuthAWS}, wantErr: "aws auth needs a cluster name"},
		{name: "aws without cluster name", auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{RoleARN: "arn:aws:iam::1:role/x"}}, wantErr: "aws auth needs a cluster name"},
		{name: "exec without section", auth: sources.Auth{Kind: sources.AuthExec}, wantErr: "exec auth needs a command"},
		{name: "exec without command", auth: sources.Auth{Kind: sources.AuthExec, Exec: &sources.ExecProvider{Args: []string{"azure"}}}, wantErr: "exec auth needs a command"},

		{name: "kind aws but token set", auth: sources.Auth{Kind: sources.AuthAWS, TokenRef: fileRef}, wantErr: "aws auth needs a cluster name"},
		{name: "kind exec but aws set", auth: sources.Auth{Kind: sources.AuthExec, AWS: aws}, wantErr: "exec auth needs a command"},
		{name: "kind bearer but exec set", auth: sources.Auth{Kind: sources.AuthBearerToken, Exec: exec}, wantErr: "bearer token auth needs a token reference"},

		{name: "token and aws", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: fileRef, AWS: aws}, wantErr: "set at most one of bearer token, aws and exec"},
		{name: "token and exec", auth: sources.Auth{Kind: sources.AuthExec, TokenRef: fileRef, Exec: exec}, wantErr: "set at most one of bearer token, aws and exec"},
		{name: "aws and exec", auth: sources.Auth{Kind: sources.AuthAWS, AWS: aws, Exec: exec}, wantErr: "set at most one of bearer token, aws and exec"},
		{name: "all three", auth: sources.Auth{Kind: sources.AuthAWS, TokenRef: fileRef, AWS: aws, Exec: exec}, wantErr: "set at most one of bearer token, aws and exec"},
		{name: "two forms and no kind", auth: sources.Auth{TokenRef: fileRef, Exec: exec}, wantErr: "set at most one of bearer token, aws and exec"},

		{name: "unknown kind", auth: sources.Auth{Kind: "oidc"}, wantErr: `unknown auth kind "oidc"`},
		{name: "kind with wrong case", auth: sources.Auth{Kind: "BearerToken", TokenRef: fileRef}, wantErr: `unknown auth kind "BearerToken"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.auth.Validate()
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestSecretRefValidate(t *testing.T) {
	tests := []struct {
		name    string
		ref     sources.SecretRef
		wantErr string
	}{
		{name: "file", ref: sources.SecretRef{File: "/var/run/secrets/token"}},
		{name: "relative file", ref: sources.SecretRef{File: "token"}},
		{name: "env", ref: sources.SecretRef{Env: "CLUSTER_TOKEN"}},
		{name: "secret", ref: sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "creds", Key: "token"}}},

		{name: "empty", ref: sources.SecretRef{}, wantErr: "set exactly one of file, env or secret (got 0)"},
		{name: "file and env", ref: sources.SecretRef{File: "/t", Env: "T"}, wantErr: "(got 2)"},
		{name: "file and secret", ref: sources.SecretRef{File: "/t", Secret: &sources.SecretKeyRef{Name: "n", Key: "k"}}, wantErr: "(got 2)"},
		{name: "env and secret", ref: sources.SecretRef{Env: "T", Secret: &sources.SecretKeyRef{Name: "n", Key: "k"}}, wantErr: "(got 2)"},
		{name: "all three", ref: sources.SecretRef{File: "/t", Env: "T", Secret: &sources.SecretKeyRef{Name: "n", Key: "k"}}, wantErr: "(got 3)"},
		{name: "secret without name", ref: sources.SecretRef{Secret: &sources.SecretKeyRef{Key: "token"}}, wantErr: "secret reference needs both name and key"},
		{name: "secret without key", ref: sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "creds"}}, wantErr: "secret reference needs both name and key"},
		{name: "secret empty", ref: sources.SecretRef{Secret: &sources.SecretKeyRef{}}, wantErr: "secret reference needs both name and key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.ref.Validate()
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestSecretRefString(t *testing.T) {
	tests := []struct {
		name string
		ref  *sources.SecretRef
		want string
	}{
		{name: "nil", ref: nil, want: "<none>"},
		{name: "empty", ref: &sources.SecretRef{}, want: "<empty>"},
		{name: "file", ref: &sources.SecretRef{File: "/var/run/secrets/token"}, want: "file:/var/run/secrets/token"},
		{name: "env", ref: &sources.SecretRef{Env: "CLUSTER_TOKEN"}, want: "env:CLUSTER_TOKEN"},
		{name: "secret", ref: &sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "creds", Key: "token"}}, want: "secret:creds/token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.ref.String())
			assert.Equal(t, tt.want, fmt.Sprint(tt.ref), "fmt must use String")
		})
	}
}

// The values behind the references exist (a file and an environment
// variable); neither String nor the JSON form of a cluster may show them.
func TestSecretRefNeverShowsValue(t *testing.T) {
	const fileValue = "file-token-value-4b1d"
	const envValue = "env-token-value-9c3e"
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(fileValue), 0o600))
	t.Setenv("SOURCES_TEST_TOKEN", envValue)

	tests := []struct {
		name string
		ref  *sources.SecretRef
		want string
	}{
		{name: "file", ref: &sources.SecretRef{File: path}, want: "file:" + path},
		{name: "env", ref: &sources.SecretRef{Env: "SOURCES_TEST_TOKEN"}, want: "env:SOURCES_TEST_TOKEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.ref.Validate())
			for _, s := range []string{tt.ref.String(), fmt.Sprintf("%v", tt.ref), fmt.Sprintf("%+v", *tt.ref)} {
				assert.NotContains(t, s, fileValue)
				assert.NotContains(t, s, envValue)
			}
			assert.Equal(t, tt.want, tt.ref.String())

			c := sources.Cluster{Name: "c", Server: "https://c.example.com", Auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: tt.ref}}
			b, err := json.Marshal(c)
			require.NoError(t, err)
			assert.NotContains(t, string(b), fileValue)
			assert.NotContains(t, string(b), envValue)
		})
	}
}

// newCert returns a fresh self-signed ECDSA CA certificate as PEM and DER,
// and its key.
func newCert(t *testing.T, cn string) (pemData, der []byte, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), der, key
}

func TestValidatePEMAndCAData(t *testing.T) {
	cert1, der1, key1 := newCert(t, "ca-one")
	cert2, _, _ := newCert(t, "ca-two")
	ecKey, err := x509.MarshalECPrivateKey(key1)
	require.NoError(t, err)
	pkcs8Key, err := x509.MarshalPKCS8PrivateKey(key1)
	require.NoError(t, err)
	ecKeyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecKey})
	pkcs8PEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8Key})
	corruptPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("definitely not DER")})
	truncatedPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der1[:len(der1)/2]})
	join := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}

	tests := []struct {
		name    string
		pem     []byte
		wantErr string
	}{
		{name: "one certificate", pem: cert1},
		{name: "two certificates", pem: join(cert1, cert2)},
		{name: "same certificate twice", pem: join(cert1, cert1)},

		{name: "empty", pem: nil, wantErr: "no PEM certificate found"},
		{name: "not PEM", pem: []byte("hello, world\n"), wantErr: "no PEM certificate found"},
		{name: "DER without PEM armour", pem: der1, wantErr: "no PEM certificate found"},
		{name: "EC private key", pem: ecKeyPEM, wantErr: `pem block 1 is "EC PRIVATE KEY", not CERTIFICATE`},
		{name: "PKCS8 private key", pem: pkcs8PEM, wantErr: `pem block 1 is "PRIVATE KEY", not CERTIFICATE`},
		{name: "certificate then private key", pem: join(cert1, ecKeyPEM), wantErr: `pem block 2 is "EC PRIVATE KEY"`},
		{name: "corrupt certificate", pem: corruptPEM, wantErr: "pem block 1:"},
		{name: "truncated certificate", pem: truncatedPEM, wantErr: "pem block 1:"},
		{name: "good then corrupt certificate", pem: join(cert1, cert2, corruptPEM), wantErr: "pem block 3:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pemErr := sources.ValidatePEM(tt.pem)
			caErr := sources.ValidateCAData(base64.StdEncoding.EncodeToString(tt.pem))
			if tt.wantErr == "" {
				assert.NoError(t, pemErr)
				assert.NoError(t, caErr)
				return
			}
			require.Error(t, pemErr)
			assert.Contains(t, pemErr.Error(), tt.wantErr)
			require.Error(t, caErr, "caData must fail the same way")
			assert.Contains(t, caErr.Error(), tt.wantErr)
		})
	}
}

func TestValidateCADataEncoding(t *testing.T) {
	cert, _, _ := newCert(t, "ca")
	tests := []struct {
		name    string
		caData  string
		wantErr string
	}{
		{name: "standard base64 of PEM", caData: base64.StdEncoding.EncodeToString(cert)},
		{name: "empty", caData: "", wantErr: "no PEM certificate found"},
		{name: "raw PEM, not base64", caData: string(cert), wantErr: "not base64"},
		{name: "garbage", caData: "not base64 at all!", wantErr: "not base64"},
		{name: "truncated base64", caData: base64.StdEncoding.EncodeToString(cert)[:21], wantErr: "not base64"},
		{name: "base64 of text", caData: base64.StdEncoding.EncodeToString([]byte("just some text")), wantErr: "no PEM certificate found"},
		{name: "double base64", caData: base64.StdEncoding.EncodeToString([]byte(base64.StdEncoding.EncodeToString(cert))), wantErr: "no PEM certificate found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sources.ValidateCAData(tt.caData)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestClusterValidate(t *testing.T) {
	valid := func() sources.Cluster {
		return sources.Cluster{Source: "demo", Provider: sources.ProviderStatic, Name: "prod", Server: "https://prod.example.com", Ready: true}
	}
	tests := []struct {
		name    string
		mutate  func(c *sources.Cluster)
		wantErr string
	}{
		{name: "minimal", mutate: func(*sources.Cluster) {}},
		{name: "bearer token", mutate: func(c *sources.Cluster) {
			c.Auth = sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{Env: "T"}}
		}},
		{name: "aws", mutate: func(c *sources.Cluster) {
			c.Auth = sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: "prod"}}
		}},
		{name: "not ready is still valid", mutate: func(c *sources.Cluster) { c.Ready, c.NotReadyReason = false, "CA not fetched yet" }},
		{name: "server with trailing slash", mutate: func(c *sources.Cluster) { c.Server = "https://prod.example.com/" }},

		{name: "no name", mutate: func(c *sources.Cluster) { c.Name = "" }, wantErr: "cluster has no name"},
		{name: "no server", mutate: func(c *sources.Cluster) { c.Server = "" }, wantErr: "cluster prod: server url"},
		{name: "bad scheme", mutate: func(c *sources.Cluster) { c.Server = "ftp://prod.example.com" }, wantErr: "cluster prod: server url scheme must be https or http"},
		{name: "server with query", mutate: func(c *sources.Cluster) { c.Server = "https://prod.example.com?a=b" }, wantErr: "cluster prod: server url"},
		{name: "bad auth", mutate: func(c *sources.Cluster) { c.Auth = sources.Auth{Kind: sources.AuthExec} }, wantErr: "cluster prod: auth: exec auth needs a command"},
		{name: "auth kind mismatch", mutate: func(c *sources.Cluster) {
			c.Auth = sources.Auth{Kind: sources.AuthAWS, Exec: &sources.ExecProvider{Command: "x"}}
		}, wantErr: "cluster prod: auth: aws auth needs a cluster name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mutate(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestSortByName(t *testing.T) {
	type key struct{ name, source string }
	tests := []struct {
		name string
		in   []key
		want []key
	}{
		{name: "nil", in: nil, want: nil},
		{name: "one", in: []key{{"a", "s"}}, want: []key{{"a", "s"}}},
		{name: "by name", in: []key{{"c", "s"}, {"a", "s"}, {"b", "s"}}, want: []key{{"a", "s"}, {"b", "s"}, {"c", "s"}}},
		{name: "already sorted", in: []key{{"a", "s"}, {"b", "s"}}, want: []key{{"a", "s"}, {"b", "s"}}},
		{name: "reversed", in: []key{{"d", ""}, {"c", ""}, {"b", ""}, {"a", ""}}, want: []key{{"a", ""}, {"b", ""}, {"c", ""}, {"d", ""}}},
		{name: "ties broken by source", in: []key{{"x", "rancher"}, {"x", "aws"}, {"a", "zzz"}, {"x", "azure"}}, want: []key{{"a", "zzz"}, {"x", "aws"}, {"x", "azure"}, {"x", "rancher"}}},
		{name: "name before source", in: []key{{"b", "a"}, {"a", "b"}}, want: []key{{"a", "b"}, {"b", "a"}}},
		{name: "byte order, upper case first", in: []key{{"b", ""}, {"B", ""}, {"a", ""}, {"A", ""}}, want: []key{{"A", ""}, {"B", ""}, {"a", ""}, {"b", ""}}},
		{name: "prefix sorts first", in: []key{{"prod-eu", ""}, {"prod", ""}}, want: []key{{"prod", ""}, {"prod-eu", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs []sources.Cluster
			for _, k := range tt.in {
				cs = append(cs, sources.Cluster{Name: k.name, Source: k.source, Server: "https://" + k.name + "." + k.source})
			}
			sources.SortByName(cs)
			var got []key
			for _, c := range cs {
				got = append(got, key{c.Name, c.Source})
				assert.Equal(t, "https://"+c.Name+"."+c.Source, c.Server, "whole clusters must move, not just keys")
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestProviderValid(t *testing.T) {
	tests := []struct {
		p    sources.Provider
		want bool
	}{
		{sources.ProviderStatic, true},
		{sources.ProviderRancher, true},
		{sources.ProviderEKS, true},
		{sources.ProviderAKS, true},
		{"static", true},
		{"", false},
		{"Static", false},
		{"EKS", false},
		{"gke", false},
		{" static", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", string(tt.p)), func(t *testing.T) {
			assert.Equal(t, tt.want, tt.p.Valid())
		})
	}
}

func TestProviders(t *testing.T) {
	got := sources.Providers()
	assert.Equal(t, []sources.Provider{"static", "rancher", "eks", "aks"}, got)
	for _, p := range got {
		assert.True(t, p.Valid(), "%s", p)
	}
	got[0] = "mutated"
	assert.Equal(t, sources.ProviderStatic, sources.Providers()[0], "Providers must return a fresh slice")
}

func TestNormalizeServerErrorsNeverQuoteTheURL(t *testing.T) {
	for _, in := range []string{
		"https://u:pa ss@h.example.com", // parse error
		"ftp://u:secret-pw@h.example.com",
		"https://h.example.com?token=secret-pw",
		"https://h.example.com/secret-pw#x",
	} {
		_, err := sources.NormalizeServer(in)
		require.Error(t, err, in)
		assert.NotContains(t, err.Error(), "secret-pw", in)
		assert.NotContains(t, err.Error(), "pa ss", in)
	}
}

func TestParseNamespaces(t *testing.T) {
	for in, want := range map[string][]string{"a,b": {"a", "b"}, " a  b,a ": {"a", "b"}, "team-x": {"team-x"}} {
		got, err := sources.ParseNamespaces(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", " , ", "Upper", "a,b_c", "-a"} {
		_, err := sources.ParseNamespaces(bad)
		assert.Error(t, err, "%q must not widen access to every namespace", bad)
	}
}
