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
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

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

func TestToCluster(t *testing.T) {
	caData := testCAData(t)
	fileRef := &sources.SecretRef{File: "/var/run/secrets/prod-token"}
	envRef := &sources.SecretRef{Env: "PROD_TOKEN"}
	secretRef := &sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "prod-creds", Key: "token"}}
	aws := &sources.AWSAuth{ClusterName: "prod", RoleARN: "arn:aws:iam::111111111111:role/deployer", Region: "eu-west-1"}
	exec := &sources.ExecProvider{Command: "argocd-k8s-auth", Args: []string{"azure"}, Env: map[string]string{"AAD_LOGIN_METHOD": "workloadidentity"}}

	base := func(mutate func(*Cluster)) Cluster {
		sc := Cluster{Name: "prod", Server: "https://prod.example.com"}
		mutate(&sc)
		return sc
	}
	want := func(mutate func(*sources.Cluster)) sources.Cluster {
		c := sources.Cluster{Provider: sources.ProviderStatic, Name: "prod", Server: "https://prod.example.com", Ready: true}
		mutate(&c)
		return c
	}
	none := func(*sources.Cluster) {}

	tests := []struct {
		name    string
		in      Cluster
		want    sources.Cluster
		wantErr string
	}{
		{name: "no auth", in: base(func(*Cluster) {}), want: want(none)},
		{
			name: "bearer token from file",
			in:   base(func(c *Cluster) { c.Auth.BearerToken = fileRef }),
			want: want(func(c *sources.Cluster) { c.Auth = sources.Auth{Kind: sources.AuthBearerToken, TokenRef: fileRef} }),
		},
		{
			name: "bearer token from env",
			in:   base(func(c *Cluster) { c.Auth.BearerToken = envRef }),
			want: want(func(c *sources.Cluster) { c.Auth = sources.Auth{Kind: sources.AuthBearerToken, TokenRef: envRef} }),
		},
		{
			name: "bearer token from secret",
			in:   base(func(c *Cluster) { c.Auth.BearerToken = secretRef }),
			want: want(func(c *sources.Cluster) { c.Auth = sources.Auth{Kind: sources.AuthBearerToken, TokenRef: secretRef} }),
		},
		{
			name: "aws",
			in:   base(func(c *Cluster) { c.Auth.AWS = aws }),
			want: want(func(c *sources.Cluster) { c.Auth = sources.Auth{Kind: sources.AuthAWS, AWS: aws} }),
		},
		{
			name: "exec",
			in:   base(func(c *Cluster) { c.Auth.Exec = exec }),
			want: want(func(c *sources.Cluster) { c.Auth = sources.Auth{Kind: sources.AuthExec, Exec: exec} }),
		},
		{
			name: "every field mapped",
			in: base(func(c *Cluster) {
				c.Server = "https://Prod.Example.com:6443/"
				c.CAData = caData
				c.Auth.AWS = aws
				c.Labels = map[string]string{"env": "prod"}
				c.Annotations = map[string]string{"owner": "team@example.com"}
				c.Region, c.Account, c.Tenant, c.Project = "eu-west-1", "111111111111", "acme", "acme-project"
				c.Namespaces = []string{"apps", "jobs"}
				c.ClusterResources = true
				c.KubernetesVersion, c.State = "v1.31.4", "ACTIVE"
			}),
			want: sources.Cluster{
				Provider: sources.ProviderStatic, Name: "prod", Server: "https://Prod.Example.com:6443", CA: sources.CAFromData(caData),
				Auth:   sources.Auth{Kind: sources.AuthAWS, AWS: aws},
				Labels: map[string]string{"env": "prod"}, Annotations: map[string]string{"owner": "team@example.com"},
				Region: "eu-west-1", Account: "111111111111", Tenant: "acme", Project: "acme-project",
				Namespaces: []string{"apps", "jobs"}, ClusterResources: true,
				KubernetesVersion: "v1.31.4", State: "ACTIVE", Ready: true,
			},
		},
		{name: "server trailing slash trimmed", in: base(func(c *Cluster) { c.Server = "https://prod.example.com/" }), want: want(none)},
		{name: "ready unset means ready", in: base(func(c *Cluster) { c.Ready = nil }), want: want(none)},
		{name: "ready true", in: base(func(c *Cluster) { c.Ready = boolPtr(true) }), want: want(none)},
		{
			name: "ready true drops a stale reason",
			in:   base(func(c *Cluster) { c.Ready, c.NotReadyReason = boolPtr(true), "old reason" }),
			want: want(none),
		},
		{
			name: "ready false with reason",
			in:   base(func(c *Cluster) { c.Ready, c.NotReadyReason = boolPtr(false), "waiting for the CA" }),
			want: want(func(c *sources.Cluster) { c.Ready, c.NotReadyReason = false, "waiting for the CA" }),
		},
		{
			name: "ready false without reason",
			in:   base(func(c *Cluster) { c.Ready = boolPtr(false) }),
			want: want(func(c *sources.Cluster) { c.Ready = false }),
		},

		{name: "missing name", in: base(func(c *Cluster) { c.Name = "" }), wantErr: "name: required"},
		{name: "unknown phase", in: base(func(c *Cluster) { c.Phase = "rebooting" }), wantErr: `phase: "rebooting" is not one of`},
		{name: "absent is the inventory's", in: base(func(c *Cluster) { c.Phase = sources.PhaseAbsent }), wantErr: "phase:"},
		{name: "degraded with an id", in: base(func(c *Cluster) { c.Phase, c.ID = sources.PhaseDegraded, "c-42" }),
			want: func() sources.Cluster { w := want(none); w.Phase, w.ID = sources.PhaseDegraded, "c-42"; return w }()},
		{name: "missing server", in: base(func(c *Cluster) { c.Server = "" }), wantErr: "server: server url"},
		{name: "server without scheme", in: base(func(c *Cluster) { c.Server = "prod.example.com" }), wantErr: "server: server url scheme must be https or http"},
		{name: "server with user info", in: base(func(c *Cluster) { c.Server = "https://u:p@prod.example.com" }), wantErr: "server: server url must not carry user info"},
		{name: "server with query", in: base(func(c *Cluster) { c.Server = "https://prod.example.com/?x=1" }), wantErr: "server: server url"},
		{name: "bearer token and aws", in: base(func(c *Cluster) { c.Auth.BearerToken, c.Auth.AWS = fileRef, aws }), wantErr: "auth: set at most one of bearerToken, aws and exec"},
		{name: "bearer token and exec", in: base(func(c *Cluster) { c.Auth.BearerToken, c.Auth.Exec = envRef, exec }), wantErr: "auth: set at most one of bearerToken, aws and exec"},
		{name: "aws and exec", in: base(func(c *Cluster) { c.Auth.AWS, c.Auth.Exec = aws, exec }), wantErr: "auth: set at most one of bearerToken, aws and exec"},
		{name: "all three auth forms", in: base(func(c *Cluster) { c.Auth = Auth{BearerToken: fileRef, AWS: aws, Exec: exec} }), wantErr: "auth: set at most one of bearerToken, aws and exec"},
		{name: "empty bearer token reference", in: base(func(c *Cluster) { c.Auth.BearerToken = &sources.SecretRef{} }), wantErr: "auth: token reference: set exactly one of file, env or secret"},
		{name: "bearer token with file and env", in: base(func(c *Cluster) { c.Auth.BearerToken = &sources.SecretRef{File: "/t", Env: "T"} }), wantErr: "auth: token reference: set exactly one"},
		{name: "aws without cluster name", in: base(func(c *Cluster) { c.Auth.AWS = &sources.AWSAuth{Region: "eu-west-1"} }), wantErr: "auth: aws auth needs a cluster name"},
		{name: "exec without command", in: base(func(c *Cluster) { c.Auth.Exec = &sources.ExecProvider{Args: []string{"x"}} }), wantErr: "auth: exec auth needs a command"},
		{name: "caData not base64", in: base(func(c *Cluster) { c.CAData = "-----BEGIN CERTIFICATE-----" }), wantErr: "caData: not base64"},
		{name: "caData base64 of non PEM", in: base(func(c *Cluster) { c.CAData = base64.StdEncoding.EncodeToString([]byte("hello")) }), wantErr: "caData: no PEM certificate found"},
		{
			name: "caData corrupt certificate",
			in: base(func(c *Cluster) {
				c.CAData = base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n"))
			}),
			wantErr: "caData: pem block 1:",
		},
		{name: "invalid caData on a not ready cluster", in: base(func(c *Cluster) { c.Ready, c.CAData = boolPtr(false), "!!" }), wantErr: "caData: not base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := toCluster(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Equal(t, sources.Cluster{}, got, "no partial cluster on error")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.NoError(t, got.Validate(), "the mapping must produce a valid cluster")
			assert.Empty(t, got.Source, "the source name is set by the inventory, not here")
		})
	}
}

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

func TestFileRelativeAndAbsolute(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	writeFile(t, filepath.Join(dir, "sub", "clusters.yaml"), clustersYAML("f1", "f2"))

	tests := []struct {
		name    string
		file    string
		baseDir string
	}{
		{name: "relative to baseDir", file: filepath.Join("sub", "clusters.yaml"), baseDir: dir},
		{name: "relative with dot", file: "./clusters.yaml", baseDir: filepath.Join(dir, "sub")},
		{name: "absolute ignores baseDir", file: filepath.Join(dir, "sub", "clusters.yaml"), baseDir: "/nonexistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := New(Config{File: tt.file}, tt.baseDir)
			require.NoError(t, err)
			cs, err := src.Clusters(context.Background())
			require.NoError(t, err)
			assert.Equal(t, []string{"f1", "f2"}, names(cs))
			assert.Equal(t, "https://f1.example.com", cs[0].Server)
		})
	}

	t.Run("not taken from the working directory", func(t *testing.T) {
		_, err := New(Config{File: filepath.Join("sub", "clusters.yaml")}, t.TempDir())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "read clusters file")
	})
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

func TestFileReload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "clusters.yaml")
	writeFile(t, path, clustersYAML("aa", "bb"))
	src, err := New(Config{File: "clusters.yaml", Clusters: []Cluster{{Name: "inline", Server: "https://inline.example.com"}}}, dir)
	require.NoError(t, err)

	list := func(t *testing.T) []string {
		t.Helper()
		cs, err := src.Clusters(ctx)
		require.NoError(t, err)
		return names(cs)
	}
	fails := func(t *testing.T, wantErr string) {
		t.Helper()
		cs, err := src.Clusters(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), wantErr)
		assert.Nil(t, cs, "an error must never come with a partial result")
	}

	steps := []struct {
		name    string
		action  func(t *testing.T)
		want    []string
		wantErr string
	}{
		{name: "initial", action: func(*testing.T) {}, want: []string{"inline", "aa", "bb"}},
		{name: "unchanged file is served again", action: func(*testing.T) {}, want: []string{"inline", "aa", "bb"}},
		{name: "cluster added", action: func(t *testing.T) { writeFile(t, path, clustersYAML("aa", "bb", "cc")) }, want: []string{"inline", "aa", "bb", "cc"}},
		// Same size as the previous content, so only a content compare sees it.
		{name: "same size rewrite", action: func(t *testing.T) { writeFile(t, path, clustersYAML("aa", "bb", "dd")) }, want: []string{"inline", "aa", "bb", "dd"}},
		{name: "cluster removed", action: func(t *testing.T) { writeFile(t, path, clustersYAML("dd")) }, want: []string{"inline", "dd"}},
		{name: "broken yaml", action: func(t *testing.T) { writeFile(t, path, "clusters: [") }, wantErr: "parse clusters file"},
		{name: "still broken", action: func(*testing.T) {}, wantErr: "parse clusters file"},
		{name: "valid again", action: func(t *testing.T) { writeFile(t, path, clustersYAML("ee", "ff")) }, want: []string{"inline", "ee", "ff"}},
		{
			name: "one invalid cluster among valid ones",
			action: func(t *testing.T) {
				writeFile(t, path, clustersYAML("ee", "ff")+"  - name: gg\n    server: gg.example.com\n")
			},
			wantErr: "clusters[2]: server:",
		},
		{name: "duplicate names", action: func(t *testing.T) { writeFile(t, path, clustersYAML("ee", "ee")) }, wantErr: `clusters[1].name: "ee" is already used`},
		{name: "clash with inline", action: func(t *testing.T) { writeFile(t, path, clustersYAML("ee", "inline")) }, wantErr: "cluster inline is listed both inline and in " + path},
		// Back to the last content that was valid: must not be served from a
		// cache that the failed reads left behind in a wrong state.
		{name: "back to the last valid content", action: func(t *testing.T) { writeFile(t, path, clustersYAML("ee", "ff")) }, want: []string{"inline", "ee", "ff"}},
		{name: "deleted", action: func(t *testing.T) { require.NoError(t, os.Remove(path)) }, wantErr: "read clusters file"},
		{name: "recreated", action: func(t *testing.T) { writeFile(t, path, clustersYAML("hh")) }, want: []string{"inline", "hh"}},
		{name: "replaced by a directory", action: func(t *testing.T) {
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Mkdir(path, 0o755))
		}, wantErr: "read clusters file"},
	}
	// Steps depend on each other: run in order, stop at the first failure.
	for _, st := range steps {
		ok := t.Run(st.name, func(t *testing.T) {
			st.action(t)
			if st.wantErr != "" {
				fails(t, st.wantErr)
				return
			}
			assert.Equal(t, st.want, list(t))
		})
		if !ok {
			return
		}
	}
}

func TestFileReloadKeepsContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "clusters.yaml")
	writeFile(t, path, "clusters:\n  - name: a\n    server: https://a.example.com\n    tenant: acme\n    ready: false\n    notReadyReason: pending\n")
	src, err := New(Config{File: path}, "")
	require.NoError(t, err)
	cs, err := src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.False(t, cs[0].Ready)
	assert.Equal(t, "pending", cs[0].NotReadyReason)

	// Only fields change, not the names.
	writeFile(t, path, "clusters:\n  - name: a\n    server: https://a2.example.com\n    tenant: globex\n")
	cs, err = src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.Equal(t, "https://a2.example.com", cs[0].Server)
	assert.Equal(t, "globex", cs[0].Tenant)
	assert.True(t, cs[0].Ready)
	assert.Empty(t, cs[0].NotReadyReason)
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
			assert.True(t, errors.Is(err, context.Canceled), "got %v", err)
			assert.Nil(t, cs)

			ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			defer cancel()
			cs, err = src.Clusters(ctx)
			require.Error(t, err)
			assert.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
			assert.Nil(t, cs)
		})
	}
}

// replaceFile swaps content in atomically, as a ConfigMap volume or a careful
// writer does (write a temporary file, rename it over the old one).
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// Concurrent listings while the file is replaced: every answer is one
// complete version of the file, never a mix. Run with -race.
func TestClustersConcurrentWithRewrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "clusters.yaml")
	versions := [][]string{{"v1-a", "v1-b"}, {"v2-a", "v2-b", "v2-c"}}
	writeFile(t, path, clustersYAML(versions[0]...))
	src, err := New(Config{File: path}, "")
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				cs, err := src.Clusters(context.Background())
				if err != nil {
					errs <- err
					continue
				}
				got := strings.Join(names(cs), ",")
				if got != strings.Join(versions[0], ",") && got != strings.Join(versions[1], ",") {
					errs <- fmt.Errorf("mixed listing %q", got)
				}
			}
		}()
	}
	for i := 0; i < 20; i++ {
		replaceFile(t, path, clustersYAML(versions[i%2]...))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestDemoFiles(t *testing.T) {
	const demoDir = "../../testdata/demo"
	tests := []struct {
		file     string
		authKind sources.AuthKind
		tenants  []string
	}{
		{file: "clusters-aws.yaml", authKind: sources.AuthAWS, tenants: []string{"acme", "globex", "initech"}},
		{file: "clusters-azure.yaml", authKind: sources.AuthExec, tenants: []string{"acme", "globex", "initech"}},
	}
	all := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			src, err := New(Config{File: tt.file}, demoDir)
			require.NoError(t, err)
			cs, err := src.Clusters(context.Background())
			require.NoError(t, err)
			require.Len(t, cs, 6)

			tenants := map[string]bool{}
			for _, c := range cs {
				assert.NoError(t, c.Validate(), c.Name)
				assert.True(t, c.Ready, "%s must be ready", c.Name)
				assert.Empty(t, c.NotReadyReason, c.Name)
				assert.NotEmpty(t, c.Tenant, "%s has no tenant", c.Name)
				assert.Equal(t, c.Tenant, c.Labels["tenant"], "%s: tenant label", c.Name)
				assert.Equal(t, c.Tenant, c.Project, c.Name)
				assert.True(t, strings.HasPrefix(c.Name, c.Tenant+"-"), "%s: name starts with its tenant", c.Name)
				assert.Equal(t, sources.ProviderStatic, c.Provider, c.Name)
				assert.Equal(t, tt.authKind, c.Auth.Kind, c.Name)
				assert.NoError(t, sources.ValidateCAData(c.CA.Data()), c.Name)
				assert.True(t, strings.HasPrefix(c.Server, "https://"), c.Name)
				assert.False(t, strings.HasSuffix(c.Server, "/"), c.Name)
				assert.NotEmpty(t, c.Region, c.Name)
				assert.NotEmpty(t, c.Account, c.Name)
				tenants[c.Tenant] = true
				if prev, dup := all[c.Name]; dup {
					t.Errorf("cluster %s is in both %s and %s", c.Name, prev, tt.file)
				}
				all[c.Name] = tt.file
			}
			var gotTenants []string
			for _, tn := range tt.tenants {
				if tenants[tn] {
					gotTenants = append(gotTenants, tn)
				}
			}
			assert.Equal(t, tt.tenants, gotTenants)
			assert.Len(t, tenants, len(tt.tenants))
		})
	}
	assert.Len(t, all, 12, "the two demo sources list 12 distinct clusters")
}

// TestFileWithoutClustersKeyIsAnError: an empty file (for example caught
// half-written) must not read as "no clusters", which would make every
// cluster look gone. An empty fleet is written explicitly.
func TestFileWithoutClustersKeyIsAnError(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "clusters.yaml")
	for _, content := range []string{"", "\n", "# only a comment\n"} {
		writeFile(t, p, content)
		_, err := New(Config{File: "clusters.yaml"}, dir)
		require.Error(t, err, "%q", content)
		assert.Contains(t, err.Error(), "no clusters key")
	}
	writeFile(t, p, "clusters: []\n")
	src, err := New(Config{File: "clusters.yaml"}, dir)
	require.NoError(t, err)
	cs, err := src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Empty(t, cs)

	writeFile(t, p, "")
	cs, err = src.Clusters(context.Background())
	require.Error(t, err, "truncated file fails the listing")
	assert.Nil(t, cs)
}

// TestSharedStringsHeldOnce checks that the CAs and strings clusters have
// in common (tenant, label keys and values, ...) are held once: the
// decoder gives each cluster its own copy, ~0.75 KiB for the CA alone
// (an RSA CA held as DER), which at 10,000 clusters is ~7.5 MiB held for
// nothing.
func TestSharedStringsHeldOnce(t *testing.T) {
	ca, other := testCAData(t), testCAData(t)
	path := filepath.Join(t.TempDir(), "clusters.yaml")
	writeFile(t, path, fmt.Sprintf("clusters:\n"+
		"  - {name: a, server: https://a.example.com, caData: %s, tenant: acme, labels: {env: prod}}\n"+
		"  - {name: b, server: https://b.example.com, caData: %s, tenant: acme, labels: {env: prod}}\n"+
		"  - {name: c, server: https://c.example.com, caData: %s, tenant: globex, labels: {env: dev}}\n", ca, ca, other))
	src, err := New(Config{File: path}, "")
	require.NoError(t, err)
	cs, err := src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, cs, 3)
	assert.Equal(t, []string{ca, ca, other}, []string{cs[0].CA.Data(), cs[1].CA.Data(), cs[2].CA.Data()})
	assert.Equal(t, []string{"acme", "acme", "globex"}, []string{cs[0].Tenant, cs[1].Tenant, cs[2].Tenant})
	assert.Equal(t, []map[string]string{{"env": "prod"}, {"env": "prod"}, {"env": "dev"}}, []map[string]string{cs[0].Labels, cs[1].Labels, cs[2].Labels})
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	// A CA is a struct of one string, the bundle in its compact form.
	caBytes := func(ca *sources.CA) string { return *(*string)(unsafe.Pointer(ca)) }
	assert.True(t, same(caBytes(&cs[0].CA), caBytes(&cs[1].CA)), "one copy of a shared CA")
	assert.False(t, same(caBytes(&cs[0].CA), caBytes(&cs[2].CA)))
	assert.True(t, same(cs[0].Tenant, cs[1].Tenant), "one copy of a shared tenant")
	assert.True(t, same(cs[0].Labels["env"], cs[1].Labels["env"]), "one copy of a shared label value")
	sameMap := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	assert.True(t, sameMap(cs[0].Labels, cs[1].Labels), "one map for equal label sets")
	assert.False(t, sameMap(cs[0].Labels, cs[2].Labels))
}

// TestInternMaps checks that equal maps are shared, that a map is never
// shared with one that differs from it, even where joining keys and
// values would make them look alike, and that nil stays nil and empty
// stays empty.
func TestInternMaps(t *testing.T) {
	in := newInterner()
	tests := []struct {
		name string
		m    map[string]string
		// like is the index of the earlier map it must be shared with, -1
		// for none.
		like int
	}{
		{name: "first", m: map[string]string{"env": "prod", "tier": "gold"}, like: -1},
		{name: "equal", m: map[string]string{"tier": "gold", "env": "prod"}, like: 0},
		{name: "other value", m: map[string]string{"env": "prod", "tier": "silver"}, like: -1},
		{name: "subset", m: map[string]string{"env": "prod"}, like: -1},
		{name: "key and value joined differently", m: map[string]string{"envp": "rod", "tier": "gold"}, like: -1},
		{name: "empty", m: map[string]string{}, like: -1},
		{name: "empty again", m: map[string]string{}, like: 5},
		{name: "empty key and value", m: map[string]string{"": ""}, like: -1},
	}
	var got []map[string]string
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := in.strMap(tt.m)
			got = append(got, m)
			assert.Equal(t, tt.m, m)
			assert.NotNil(t, m)
			for j := range i {
				same := reflect.ValueOf(m).UnsafePointer() == reflect.ValueOf(got[j]).UnsafePointer()
				assert.Equal(t, j == tt.like, same, "shared with map %d", j)
			}
		})
	}
	assert.Nil(t, in.strMap(nil))
}
