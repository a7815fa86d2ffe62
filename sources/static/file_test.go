package static

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestItemByItem checks which layouts are read item by item, and that
// those give exactly the clusters and digest of the whole document; the
// others are decoded whole. Items are decoded itemsBytes at a time, so an
// anchor may serve a few items on.
func TestItemByItem(t *testing.T) {
	ca := testCAData(t)
	tests := []struct {
		name     string
		content  string
		byItem   bool
		clusters int
	}{
		{name: "indented items", content: clustersYAML("a", "b", "c"), byItem: true, clusters: 3},
		{name: "the fleet cmd/loadgen writes, over several documents", content: fleetYAML(100, ca), byItem: true, clusters: 100},
		{name: "items at the key's column", content: "clusters:\n- name: a\n  server: https://a.example.com\n- name: b\n  server: https://b.example.com\n", byItem: true, clusters: 2},
		{name: "comments, blank lines and a document marker", content: "# fleet\n---\n\nclusters: # all of them\n  # first\n  - name: a\n    server: https://a.example.com # eu\n\n# second\n  - name: b\n    server: https://b.example.com\n# end\n", byItem: true, clusters: 2},
		{name: "no newline at the end", content: "clusters:\n  - name: a\n    server: https://a.example.com", byItem: true, clusters: 1},
		{name: "dash alone on its line", content: "clusters:\n  -\n    name: a\n    server: https://a.example.com\n", byItem: true, clusters: 1},
		{name: "flow items", content: "clusters:\n  - {name: a, server: https://a.example.com, labels: {env: prod}}\n  - {name: b,\n     server: https://b.example.com}\n", byItem: true, clusters: 2},
		{name: "nested sequences and block scalars", content: "clusters:\n  - name: a\n    server: https://a.example.com\n    namespaces:\n    - x\n    - w\n    notReadyReason: |\n      two\n      lines\n\n    ready: false\n  - name: b\n    server: https://b.example.com\n    caData: >-\n      " + ca + "\n", byItem: true, clusters: 2},
		{name: "anchor within an item", content: "clusters:\n  - name: a\n    server: https://a.example.com\n    labels: &l {env: prod}\n    annotations: *l\n", byItem: true, clusters: 1},
		{name: "anchor used by another item", content: "clusters:\n  - name: a\n    server: https://a.example.com\n    labels: &l {env: prod}\n  - name: b\n    server: https://b.example.com\n    labels: *l\n", byItem: true, clusters: 2},
		{name: "anchor used by an item decoded apart", content: "clusters:\n  - name: a\n    server: https://a.example.com\n    labels: &l {env: prod}\n    notReadyReason: " + strings.Repeat("x", itemsBytes) + "\n  - name: b\n    server: https://b.example.com\n    labels: *l\n", clusters: 2},
		{name: "unquoted scalars read as written", content: "clusters:\n  - name: a\n    server: https://a.example.com\n    labels: {tier: 1, canary: true, env: prod}\n    clusterResources: yes\n    ready: off\n    notReadyReason: 2 nodes down\n", byItem: true, clusters: 1},
		{name: "flow sequence", content: "clusters: [{name: a, server: https://a.example.com}]\n", clusters: 1},
		{name: "empty list", content: "clusters: []\n", clusters: 0},
		{name: "quoted key", content: "\"clusters\":\n  - name: a\n    server: https://a.example.com\n", clusters: 1},
		{name: "CRLF line ends", content: "clusters:\r\n  - name: a\r\n    server: https://a.example.com\r\n", clusters: 1},
		{name: "marker after the first line", content: "# fleet\n---\n---\nclusters:\n  - name: a\n    server: https://a.example.com\n"},
		{name: "second document", content: "clusters:\n  - name: a\n    server: https://a.example.com\n---\nclusters: []\n", clusters: 1},
		{name: "quoted scalar across an item's dash", content: "clusters:\n  - name: a\n    server: https://a.example.com\n    state: \"x\n  - y\"\n", clusters: 1},
		{name: "other top-level key", content: "clusters:\n  - name: a\n    server: https://a.example.com\nextra: 1\n"},
		{name: "invalid item", content: "clusters:\n  - name: a\n    server: https://a.example.com\n  - name: b\n    sever: https://b.example.com\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Source{path: "clusters.yaml"}
			whole, wholeErr := s.decodeFile([]byte(tt.content))
			items, sum, ok := decodeItems(strings.NewReader(tt.content), 0, "")
			assert.Equal(t, tt.byItem, ok, "read item by item")
			if ok {
				require.NoError(t, wholeErr)
				assert.Equal(t, whole, items)
				assert.Equal(t, sha256.Sum256([]byte(tt.content)), sum)
			}
			if wholeErr == nil {
				assert.Len(t, whole, tt.clusters)
			}
		})
	}
}

// fleetYAML is a clusters file of n clusters in the shape cmd/loadgen
// writes: flow mappings for labels, annotations and auth.
func fleetYAML(n int, caData string) string {
	var b strings.Builder
	b.WriteString("clusters:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: c%d\n    server: https://c%d.example.com\n    caData: %s\n    tenant: t%d\n    account: \"111111111111\"\n", i, i, caData, i%3)
		fmt.Fprintf(&b, "    labels: {tenant: t%d, env: prod}\n    annotations: {owner: team-t%d@example.com}\n", i%3, i%3)
		fmt.Fprintf(&b, "    auth: {aws: {clusterName: c%d, roleARN: \"arn:aws:iam::111111111111:role/argocd\", region: eu-west-1}}\n", i)
	}
	return b.String()
}

// TestFileErrorsAsWhole checks that a file that fails item by item fails
// with the error, line included, that decoding the whole document gives.
func TestFileErrorsAsWhole(t *testing.T) {
	valid := "  - name: a\n    server: https://a.example.com\n"
	tests := []struct {
		name    string
		content string
		wantErr string
	}{
		{name: "duplicate key", content: "clusters:\n" + valid + "  - name: b\n    server: https://b.example.com\n    name: c\n", wantErr: `line 6: key "name" already set in map`},
		{name: "syntax", content: "clusters:\n" + valid + valid + "  - name: [b\n", wantErr: "line 6: did not find expected ',' or ']'"},
		{name: "unknown field", content: "clusters:\n" + valid + "  - name: b\n    sever: https://b.example.com\n", wantErr: `unknown field "sever"`},
		{name: "wrong type", content: "clusters:\n" + valid + "  - name: b\n    labels: [x]\n", wantErr: "cannot unmarshal array into Go struct field Cluster.clusters.labels"},
		{name: "syntax after an invalid item", content: "clusters:\n" + valid + "  - name: b\n    server: b.example.com\n  - name: [c\n", wantErr: "line 6: did not find expected ',' or ']'"},
		{name: "invalid cluster", content: "clusters:\n" + valid + "  - name: b\n    server: b.example.com\n", wantErr: "clusters[1]: server: server url scheme must be https or http"},
		{name: "duplicate name", content: "clusters:\n" + valid + valid, wantErr: `clusters[1].name: "a" is already used by clusters[0]`},
		{name: "two documents", content: "---\nclusters:\n" + valid + "---\nclusters:\n  - name: b\n    server: https://b.example.com\n", wantErr: "2 YAML documents (separated by ---)"},
		{name: "a document on the marker's line", content: "clusters:\n" + valid + "--- {clusters: []}\n", wantErr: "2 YAML documents"},
		{name: "a YAML 1.1 boolean in a label", content: "clusters:\n" + valid + "  - name: b\n    server: https://b.example.com\n    labels: {env: yes}\n", wantErr: `line 6: clusters[1].labels.env: the unquoted value yes is read as "true" (YAML 1.1): quote it`},
		{name: "a version read as a float", content: "clusters:\n" + valid + "  - name: b\n    server: https://b.example.com\n    kubernetesVersion: 1.30\n", wantErr: `line 6: clusters[1].kubernetesVersion: the unquoted value 1.30 is read as "1.3"`},
		{name: "an account read as a number", content: "clusters:\n" + valid + "  - name: b\n    server: https://b.example.com\n    account: 012345678901\n", wantErr: `clusters[1].account: the unquoted value 012345678901 is read as "1.2345679e+10"`},
		{name: "a key read as a boolean", content: "clusters:\n" + valid + "  - name: b\n    server: https://b.example.com\n    annotations:\n      on: call\n", wantErr: `line 7: clusters[1].annotations: the unquoted key on is read as "true"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "clusters.yaml")
			writeFile(t, path, tt.content)
			_, err := New(Config{File: path}, "")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			_, want := (&Source{path: path}).decodeFile([]byte(tt.content))
			assert.Equal(t, want.Error(), err.Error(), "the whole document's error")
		})
	}
}

// TestLongLines checks lines longer than the reader's buffer.
func TestLongLines(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	content := fmt.Sprintf("clusters:\n  - name: a\n    server: https://a.example.com\n    notReadyReason: %s\n    ready: false\n", long)
	cs, _, ok := decodeItems(strings.NewReader(content), 0, "")
	require.True(t, ok)
	require.Len(t, cs, 1)
	assert.Equal(t, long, cs[0].NotReadyReason)
}

// TestFileReadOnceWhenUnchanged checks that an unchanged file is not
// decoded again and that its clusters are handed out as they are.
func TestFileReadOnceWhenUnchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clusters.yaml")
	writeFile(t, path, clustersYAML("a", "b"))
	src, err := New(Config{File: path}, "")
	require.NoError(t, err)
	first, err := src.Clusters(context.Background())
	require.NoError(t, err)
	again, err := src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Same(t, &first[0], &again[0], "the same clusters, not decoded again")
	assert.Equal(t, len(again), cap(again), "an append by the caller copies")

	require.NoError(t, os.WriteFile(path, []byte(clustersYAML("a", "c")), 0o600))
	changed, err := src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "c"}, names(changed))
	assert.True(t, reflect.DeepEqual(names(first), []string{"a", "b"}), "earlier listings are not modified")

	writeFile(t, path, "clusters:\n  - name: a\n")
	_, err = src.Clusters(context.Background())
	require.Error(t, err)
	_, again2 := src.Clusters(context.Background())
	assert.True(t, err == again2, "the same error value, not decoded again") //nolint:errorlint,testifylint // identity is the point
}

// TestNewHoldsNoClusters: New checks the file, then lets go of what it
// decoded (a replica that never leads never lists); the first listing
// reads it again.
func TestNewHoldsNoClusters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clusters.yaml")
	writeFile(t, path, clustersYAML("a", "b"))
	src, err := New(Config{File: path}, "")
	require.NoError(t, err)
	assert.Nil(t, src.fromFile, "nothing decoded is held after the check")
	cs, err := src.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, names(cs))
}

// TestFileReadOnceWhenNotRegular: a clusters file that can be read only
// once (a FIFO) is read once by New's check, in both layouts: a second
// open would wait for a writer that never comes.
func TestFileReadOnceWhenNotRegular(t *testing.T) {
	for name, content := range map[string]string{
		"item by item": clustersYAML("a", "b"),
		"whole (flow)": `{"clusters": [{"name": "a", "server": "https://a.example.com"}, {"name": "b", "server": "https://b.example.com"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "clusters.yaml")
			require.NoError(t, syscall.Mkfifo(path, 0o600))
			fed := make(chan error, 1)
			go func() { // one writer, once
				w, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err != nil {
					fed <- err
					return
				}
				_, err = w.WriteString(content)
				fed <- errors.Join(err, w.Close())
			}()
			checked := make(chan error, 1)
			go func() {
				_, err := New(Config{File: path}, "")
				checked <- err
			}()
			select {
			case err := <-checked:
				assert.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("the FIFO was opened again: nobody writes it a second time")
			}
			require.NoError(t, <-fed)
		})
	}
}

// BenchmarkReadFile reports the allocations of decoding a file of 1,000
// clusters the way cmd/loadgen writes them, item by item and whole.
func BenchmarkReadFile(b *testing.B) {
	content := []byte(fleetYAML(1000, testCAData(b)))
	b.Run("item-by-item", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := decodeItems(bytes.NewReader(content), 0, ""); !ok {
				b.Fatal("not read item by item")
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		s := &Source{path: "clusters.yaml"}
		for b.Loop() {
			if _, err := s.decodeFile(content); err != nil {
				b.Fatal(err)
			}
		}
	})
}
