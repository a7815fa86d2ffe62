package static

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/fuzzseed"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// FuzzClustersFile writes any content to a clusters file and lists it:
//   - it never panics; a failed listing returns no clusters (never a
//     partial list);
//   - every listed cluster is a valid, static, uniquely and non-emptily
//     named cluster whose server is already in normal form, whose caData
//     (if any) is base64 PEM, and whose auth holds at most a reference to a
//     token, never a value (the model has no field for one);
//   - a ready cluster has no not-ready reason;
//   - listing the unchanged file again gives the same clusters;
//   - when the file is read item by item, the whole document gives the
//     same clusters.
//
// Run it with: go test ./sources/static -run '^$' -fuzz '^FuzzClustersFile$' -fuzztime 1m
func FuzzClustersFile(f *testing.F) {
	fuzzseed.Add(f, "testdata/demo/clusters-aws.yaml", "testdata/demo/clusters-azure.yaml")
	// Layouts at the edge of reading item by item (see file.go).
	for _, seed := range []string{
		"clusters:\n- name: a\n  server: https://a.example.com\n- name: b\n  server: https://b.example.com\n",
		"---\nclusters: # c\n  - name: a\n    server: https://a.example.com\n    state: \"x\n  - y\"\n",
		"clusters:\n  - name: a\n    server: https://a.example.com\n    notReadyReason: |+\n      x\n\n# c\n  - name: b\n    server: https://b.example.com\n    labels: &l {a: b}\n    annotations: *l\n",
	} {
		f.Add([]byte(seed))
	}
	path := filepath.Join(f.TempDir(), "clusters.yaml")
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, content []byte) {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		src := &Source{path: path}
		cs, err := src.Clusters(ctx)
		if items, _, ok := decodeItems(bytes.NewReader(content), 0, ""); ok {
			whole, err := src.decodeFile(content)
			if err != nil || !reflect.DeepEqual(items, whole) {
				t.Fatalf("item by item gives %d clusters, the whole document %d (error %v)", len(items), len(whole), err)
			}
		}
		if err != nil {
			if cs != nil {
				t.Fatalf("failed listing returned %d clusters", len(cs))
			}
			return
		}
		seen := map[string]bool{}
		for _, c := range cs {
			checkListed(t, &c)
			if seen[c.Name] {
				t.Fatalf("cluster %q listed twice", c.Name)
			}
			seen[c.Name] = true
		}
		again, err := src.Clusters(ctx)
		if err != nil || !reflect.DeepEqual(cs, again) {
			t.Fatalf("second listing of the same file differs (error %v)", err)
		}
	})
}

func checkListed(t *testing.T, c *sources.Cluster) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("listed cluster is invalid: %v", err)
	}
	if c.Provider != sources.ProviderStatic {
		t.Fatalf("cluster %s: provider %q", c.Name, c.Provider)
	}
	if srv, err := sources.NormalizeServer(c.Server); err != nil || srv != c.Server {
		t.Fatalf("cluster %s: server %q is not in normal form (%q, %v)", c.Name, c.Server, srv, err)
	}
	if c.CA.Data() != "" {
		if err := sources.ValidateCAData(c.CA.Data()); err != nil {
			t.Fatalf("cluster %s: caData accepted but invalid: %v", c.Name, err)
		}
	}
	if c.Auth.TokenRef != nil {
		if err := c.Auth.TokenRef.Validate(); err != nil {
			t.Fatalf("cluster %s: token reference accepted but invalid: %v", c.Name, err)
		}
	}
	if c.Ready && c.NotReadyReason != "" {
		t.Fatalf("cluster %s is ready with a not-ready reason", c.Name)
	}
}
