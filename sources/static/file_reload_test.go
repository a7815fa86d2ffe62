package static

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// rewrittenInPlace reads as first until it is rewound, then as then: a
// file written in place between the two reads of a listing.
type rewrittenInPlace struct {
	*strings.Reader
	then string
}

func (r *rewrittenInPlace) Seek(offset int64, whence int) (int64, error) {
	if r.then != "" {
		r.Reader, r.then = strings.NewReader(r.then), ""
	}
	return r.Reader.Seek(offset, whence)
}

// TestFileWrittenWhileRead: a file that changes between the read that
// tells whether it changed and the read that decodes it gives nothing of
// either read (one may be a half-written file that still parses, with
// clusters missing or a server cut short); the next listing reads it
// again. Both ways of decoding are covered: item by item, and whole.
func TestFileWrittenWhileRead(t *testing.T) {
	full := clustersYAML("a", "b", "c")
	half, _, found := strings.Cut(full, "  - name: c") // a cluster missing, still valid YAML
	require.True(t, found)
	flow := "clusters: [{name: a, server: 'https://a.example.com'}]\n"
	for _, tt := range []struct{ name, first, then string }{
		{"item by item, the second read half-written", full, half},
		{"item by item, the first read half-written", half, full},
		{"whole", flow, "clusters: [{name: a, server: 'https://a.exam'}]\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &Source{path: "clusters.yaml"}
			_, err := s.readFrom(&rewrittenInPlace{Reader: strings.NewReader(tt.first), then: tt.then}, true)
			require.ErrorIs(t, err, errChangedWhileRead)
			assert.Nil(t, s.fromFile, "nothing kept of either read")
			cs, err := s.readFrom(strings.NewReader(tt.then), true)
			require.NoError(t, err, "read again: what is there now")
			assert.NotEmpty(t, cs)
		})
	}
}
