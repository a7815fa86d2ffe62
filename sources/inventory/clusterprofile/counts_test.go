package clusterprofile

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

// The counts (CountsKey): written by the leader once every object of a
// save is, checked by every reader against the objects it holds.

// TestCountsWaitForEveryObject holds the order of a save: the counts are
// written only once every object is. A save that fails on one object (a
// create refused, an apply or a delete that fails) fails, and leaves the
// ConfigMap as the last complete save wrote it, so that readers keep
// serving that save.
func TestCountsWaitForEveryObject(t *testing.T) {
	ctx := context.Background()
	departing := ledgertest.Fleet(3) // prod-02 is new, prod-00 departing
	departing.Clusters[1].Missed, departing.Clusters[1].MissingSince = 1, time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	prod00 := objectName("owner-1", &departing.Clusters[1])
	for _, tc := range []struct {
		name   string
		save   inventory.Book
		refuse func(*http.Request) bool
		before func(t *testing.T, c *cluster) // nil: nothing
	}{
		{name: "a create refused: the name is another owner's", save: ledgertest.Fleet(3), refuse: never,
			before: func(t *testing.T, c *cluster) {
				prod02 := ledgertest.Fleet(3).Clusters[3]
				c.createProfile(t, objectName("owner-1", &prod02), map[string]string{LabelManager: Manager, LabelOwner: "owner-2"}, &prod02)
			}},
		{name: "the apply of a changed record fails", save: departing, refuse: func(r *http.Request) bool {
			return r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/"+Resource.Resource+"/"+prod00)
		}},
		{name: "the delete of a departure fails", save: ledgertest.Fleet(1), refuse: func(r *http.Request) bool {
			return r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/"+Resource.Resource+"/")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			first := c.ledger(t, "owner-1")
			require.NoError(t, first.Save(ctx, ledgertest.Fleet(2)))
			saved := c.configMapData(t, first)
			require.JSONEq(t, `{"eks":1,"rancher":2}`, saved[CountsKey])
			if tc.before != nil {
				tc.before(t, c)
			}
			assert.Error(t, c.refusing(t, "owner-1", tc.refuse).Save(ctx, tc.save), "a save with an object not written")
			assert.Equal(t, saved, c.configMapData(t, first), "the last complete save's counts")
		})
	}
}

func never(*http.Request) bool { return false }

// TestFeedServesNoHole holds the reader's completeness checks (bookOf): a
// book is delivered only when the objects, by their source labels, and the
// records read from them, by source, both add up to the counts, and their
// records to the sums. Neither a save cut after its deletes (objects below
// the counts), nor one of changed records only cut among its applies
// (records of two saves, the counts unchanged), nor a counted
// object whose record cannot be read, nor an object of ours that the
// counts do not hold and whose record cannot be read, is delivered: the
// reader keeps the last complete book until the ledger adds up again.
func TestFeedServesNoHole(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// disturb leaves the ledger not adding up; the repair it returns
		// undoes that and returns how many records the next complete book
		// holds
		disturb func(t *testing.T, c *cluster, l *Ledger) (repair func() int)
	}{
		{name: "a save cut after its deletes", disturb: func(t *testing.T, c *cluster, l *Ledger) func() int {
			c.counter.failAfter.Store(c.counter.writes.Load() + 4) // the four deletes, not the counts
			require.Error(t, l.Save(ctx, ledgertest.Fleet(2)))
			c.counter.failAfter.Store(0)
			require.Len(t, c.profileNames(t), 2, "the deletes were made")
			return func() int {
				require.NoError(t, l.Save(ctx, ledgertest.Fleet(2)), "the leader's next save completes it")
				return 3
			}
		}},
		{name: "a save of changed records only, cut among its applies", disturb: func(t *testing.T, c *cluster, l *Ledger) func() int {
			departing := ledgertest.Fleet(6) // the same objects: the counts add up all along
			for i := range departing.Clusters[1:] {
				r := &departing.Clusters[1+i]
				r.Missed, r.MissingSince = 1, time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
			}
			c.counter.failAfter.Store(c.counter.writes.Load() + 2) // two of the six applies
			require.Error(t, l.Save(ctx, departing))
			c.counter.failAfter.Store(0)
			return func() int {
				require.NoError(t, l.Save(ctx, departing), "the leader's next save completes it")
				return 7
			}
		}},
		{name: "a counted object whose record cannot be read", disturb: func(t *testing.T, c *cluster, l *Ledger) func() int {
			name := c.profileNames(t)[0]
			restore := c.setRecord(t, name, `{"source":`)
			return func() int {
				c.setRecord(t, name, restore)
				require.NoError(t, l.Save(ctx, ledgertest.Fleet(7)))
				return 8
			}
		}},
		{name: "an uncounted object of ours whose record cannot be read", disturb: func(t *testing.T, c *cluster, l *Ledger) func() int {
			c.createRaw(t, "rancher-stray", map[string]string{LabelManager: Manager, LabelOwner: "owner-1", LabelSource: "rancher"},
				map[string]string{AnnotationRecord: "not a record"})
			return func() int {
				require.NoError(t, c.adminDy.Resource(Resource).Namespace(c.ns).Delete(ctx, "rancher-stray", metav1.DeleteOptions{}))
				require.NoError(t, l.Save(ctx, ledgertest.Fleet(7)))
				return 8
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			l := c.ledger(t, "owner-1")
			require.NoError(t, l.Save(ctx, ledgertest.Fleet(6)))
			books := c.watch(t)
			require.Len(t, (<-books).Clusters, 7, "the complete save")

			repair := tc.disturb(t, c, l)
			select {
			case b := <-books:
				t.Fatalf("a book of a ledger that does not add up was delivered: %d records", len(b.Clusters))
			case <-time.After(2 * time.Second):
			}
			want := repair()
			select {
			case b := <-books:
				assert.Len(t, b.Clusters, want, "the next complete book")
			case <-time.After(10 * time.Second):
				t.Fatal("the ledger adds up again, and no book was delivered")
			}
		})
	}
}

// watch starts the feed of a new reader of owner-1's ledger and returns
// the books it delivers; it stops when the test ends.
func (c *cluster) watch(t *testing.T) <-chan inventory.Book {
	t.Helper()
	reader := c.ledger(t, "owner-1")
	books := make(chan inventory.Book, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); reader.Watch(ctx, func(b inventory.Book) { books <- b }) }()
	t.Cleanup(func() { cancel(); <-done })
	return books
}

// profileNames returns the names of the rancher ClusterProfiles of the
// cluster's namespace.
func (c *cluster) profileNames(t *testing.T) []string {
	t.Helper()
	list, err := c.adminDy.Resource(Resource).Namespace(c.ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelSource + "=rancher"})
	require.NoError(t, err)
	var out []string
	for _, p := range list.Items {
		out = append(out, p.GetName())
	}
	return out
}

// setRecord sets the record annotation of the ClusterProfile name to raw,
// as an operator's edit would, and returns the one it replaced.
func (c *cluster) setRecord(t *testing.T, name, raw string) string {
	t.Helper()
	ctx := context.Background()
	obj, err := c.adminDy.Resource(Resource).Namespace(c.ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	patch := mustJSON(t, map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationRecord: raw}}})
	_, err = c.adminDy.Resource(Resource).Namespace(c.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	return obj.GetAnnotations()[AnnotationRecord]
}
