package static

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// testCAData returns standard base64 of a freshly generated PEM CA
// certificate, the form caData takes.
func testCAData(t testing.TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(42),
		Subject:               pkix.Name{CommonName: "static-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func boolPtr(b bool) *bool { return &b }

// writeFile writes content to path, replacing it.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

// names lists the names of cs, in order.
func names(cs []sources.Cluster) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// clustersYAML renders a clusters file with one valid cluster per name.
func clustersYAML(clusterNames ...string) string {
	var b strings.Builder
	b.WriteString("clusters:\n")
	for _, n := range clusterNames {
		fmt.Fprintf(&b, "  - name: %s\n    server: https://%s.example.com/\n", n, n)
	}
	return b.String()
}

func TestNewInline(t *testing.T) {
	src, err := New(Config{Clusters: []Cluster{
		{Name: "b", Server: "https://b.example.com", Tenant: "acme"},
		{Name: "a", Server: "https://a.example.com/", Auth: Auth{BearerToken: &sources.SecretRef{Env: "A_TOKEN"}}},
	}}, "/nonexistent")
	require.NoError(t, err)

	cs, err := src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 2)
	assert.Equal(t, []string{"b", "a"}, names(cs), "inline order is kept")
	assert.Equal(t, "https://a.example.com", cs[1].Server)
	assert.Equal(t, sources.AuthBearerToken, cs[1].Auth.Kind)
	assert.Equal(t, "acme", cs[0].Tenant)
	for _, c := range cs {
		assert.Equal(t, sources.ProviderStatic, c.Provider)
		assert.True(t, c.Ready)
	}

	// The caller owns the returned slice.
	cs[0].Name = "mutated"
	again, err := src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "a"}, names(again))
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bad-yaml.yaml"), "clusters: [\n  - name: a\n")
	writeFile(t, filepath.Join(dir, "unknown-field.yaml"), "clusters:\n  - name: a\n    server: https://a.example.com\n    sever: typo\n")
	writeFile(t, filepath.Join(dir, "unknown-top.yaml"), "clusterz:\n  - name: a\n")
	writeFile(t, filepath.Join(dir, "bad-server.yaml"), clustersYAML("a")+"  - name: b\n    server: ftp://b.example.com\n")
	writeFile(t, filepath.Join(dir, "dup.yaml"), clustersYAML("a", "b", "a"))
	writeFile(t, filepath.Join(dir, "no-name.yaml"), "clusters:\n  - server: https://a.example.com\n")
	writeFile(t, filepath.Join(dir, "two-auth.yaml"), "clusters:\n  - name: a\n    server: https://a.example.com\n    auth:\n      bearerToken: {env: T}\n      aws: {clusterName: a}\n")
	writeFile(t, filepath.Join(dir, "clash.yaml"), clustersYAML("x", "inline"))
	writeFile(t, filepath.Join(dir, "dup-server.yaml"), clustersYAML("a", "b")+"  - name: c\n    server: HTTPS://A.example.com:443/\n")
	writeFile(t, filepath.Join(dir, "inline-server.yaml"), "clusters:\n  - name: other\n    server: https://inline.example.com\n")

	inline := []Cluster{{Name: "inline", Server: "https://inline.example.com"}}
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string
	}{
		{name: "nothing configured", cfg: Config{}, wantErr: []string{"set file or clusters"}},
		{name: "inline missing name", cfg: Config{Clusters: []Cluster{{Server: "https://a.example.com"}}}, wantErr: []string{"clusters[0]: name: required"}},
		{name: "inline bad server", cfg: Config{Clusters: []Cluster{{Name: "a", Server: "https://a.example.com"}, {Name: "b", Server: "b.example.com"}}}, wantErr: []string{"clusters[1]: server:"}},
		{
			name:    "inline duplicate name",
			cfg:     Config{Clusters: []Cluster{{Name: "a", Server: "https://a.example.com"}, {Name: "a", Server: "https://a2.example.com"}}},
			wantErr: []string{`clusters[1].name: "a" is already used by clusters[0]`},
		},
		{name: "missing file", cfg: Config{File: "missing.yaml"}, wantErr: []string{"read clusters file", filepath.Join(dir, "missing.yaml")}},
		{name: "broken yaml", cfg: Config{File: "bad-yaml.yaml"}, wantErr: []string{"parse clusters file " + filepath.Join(dir, "bad-yaml.yaml")}},
		{name: "unknown cluster field", cfg: Config{File: "unknown-field.yaml"}, wantErr: []string{"parse clusters file", `unknown field "sever"`}},
		{name: "unknown top level field", cfg: Config{File: "unknown-top.yaml"}, wantErr: []string{"parse clusters file", `unknown field "clusterz"`}},
		{name: "invalid cluster in file", cfg: Config{File: "bad-server.yaml"}, wantErr: []string{filepath.Join(dir, "bad-server.yaml") + ": clusters[1]: server:"}},
		{name: "duplicate name in file", cfg: Config{File: "dup.yaml"}, wantErr: []string{filepath.Join(dir, "dup.yaml") + `: clusters[2].name: "a" is already used by `, "clusters[0]"}},
		{name: "missing name in file", cfg: Config{File: "no-name.yaml"}, wantErr: []string{"clusters[0]: name: required"}},
		{name: "two auth forms in file", cfg: Config{File: "two-auth.yaml"}, wantErr: []string{"clusters[0]: auth: set at most one of bearerToken, aws and exec"}},
		{name: "inline and file share a name", cfg: Config{File: "clash.yaml", Clusters: inline}, wantErr: []string{"cluster inline is listed both inline and in " + filepath.Join(dir, "clash.yaml")}},
		{
			name:    "inline duplicate server",
			cfg:     Config{Clusters: []Cluster{{Name: "a", Server: "https://a.example.com"}, {Name: "b", Server: "https://a.example.com/"}}},
			wantErr: []string{"clusters[1].server: https://a.example.com is already the server of clusters[0]"},
		},
		{name: "duplicate server in file", cfg: Config{File: "dup-server.yaml"}, wantErr: []string{filepath.Join(dir, "dup-server.yaml") + ": clusters[2].server: ", "is already the server of clusters[0]"}},
		{name: "inline and file share a server", cfg: Config{File: "inline-server.yaml", Clusters: inline}, wantErr: []string{"cluster other of " + filepath.Join(dir, "inline-server.yaml") + ": its server https://inline.example.com is also an inline cluster's"}},
		{name: "invalid inline with valid file", cfg: Config{File: "clash.yaml", Clusters: []Cluster{{Name: "y"}}}, wantErr: []string{"clusters[0]: server:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := New(tt.cfg, dir)
			require.Error(t, err)
			assert.Nil(t, src)
			for _, w := range tt.wantErr {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestInlineAndFileTogether(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "clusters.yaml"), clustersYAML("f1"))
	src, err := New(Config{File: "clusters.yaml", Clusters: []Cluster{{Name: "i1", Server: "https://i1.example.com"}}}, dir)
	require.NoError(t, err)
	cs, err := src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"i1", "f1"}, names(cs), "inline clusters first, then the file's")
}

func TestClustersCancelledContext(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "clusters.yaml"), clustersYAML("f1"))
	inline := []Cluster{{Name: "i1", Server: "https://i1.example.com"}}
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "inline only", cfg: Config{Clusters: inline}},
		{name: "file", cfg: Config{File: "clusters.yaml"}},
		{name: "inline and file", cfg: Config{File: "clusters.yaml", Clusters: inline}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := New(tt.cfg, dir)
			require.NoError(t, err)

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			cs, err := src.Clusters(ctx)
			require.Error(t, err)
			assert.ErrorIs(t, err, context.Canceled, "got %v", err)
			assert.Nil(t, cs)

			ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			defer cancel()
			cs, err = src.Clusters(ctx)
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded, "got %v", err)
			assert.Nil(t, cs)
		})
	}
}

// TestRelativeTokenFiles: a relative bearerToken.file is taken from the
// directory of what names it: the configuration's for an inline cluster,
// the clusters file's for the file's. Before, both were taken from the
// process's working directory.
func TestRelativeTokenFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "fleet"), 0o700))
	writeFile(t, filepath.Join(dir, "inline.token"), "inline-token")
	writeFile(t, filepath.Join(dir, "fleet", "a.token"), "a-token")
	abs := filepath.Join(dir, "abs.token")
	writeFile(t, abs, "abs-token")
	writeFile(t, filepath.Join(dir, "fleet", "clusters.yaml"), clustersYAML("a", "b")+
		"  - name: c\n    server: https://c.example.com\n    auth:\n      bearerToken: {env: C_TOKEN}\n")
	// a and b get their auth by editing the YAML: a relative, b absolute
	raw, err := os.ReadFile(filepath.Join(dir, "fleet", "clusters.yaml"))
	require.NoError(t, err)
	withAuth := strings.Replace(string(raw), "server: https://a.example.com/\n", "server: https://a.example.com/\n    auth:\n      bearerToken: {file: a.token}\n", 1)
	withAuth = strings.Replace(withAuth, "server: https://b.example.com/\n", "server: https://b.example.com/\n    auth:\n      bearerToken: {file: "+abs+"}\n", 1)
	writeFile(t, filepath.Join(dir, "fleet", "clusters.yaml"), withAuth)

	inline := []Cluster{{Name: "inline", Server: "https://inline.example.com", Auth: Auth{BearerToken: &sources.SecretRef{File: "inline.token"}}}}
	src, err := New(Config{File: "fleet/clusters.yaml", Clusters: inline}, dir)
	require.NoError(t, err)
	assert.Equal(t, "inline.token", inline[0].Auth.BearerToken.File, "the configuration given is left as it is")
	cs, err := src.Clusters(context.Background())
	require.NoError(t, err)
	want := map[string]string{"inline": "inline-token", "a": "a-token", "b": "abs-token"}
	for _, c := range cs {
		if c.Auth.TokenRef == nil || c.Auth.TokenRef.File == "" {
			continue
		}
		tok, err := c.Auth.TokenRef.ReadLocal()
		require.NoError(t, err, c.Name)
		assert.Equal(t, want[c.Name], tok, c.Name)
		delete(want, c.Name)
	}
	assert.Empty(t, want, "every file reference read")
}
