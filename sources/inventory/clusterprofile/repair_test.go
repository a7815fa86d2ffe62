package clusterprofile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Someone else's write to the ledger asks the leader for a repair; the
// leader's own writes do not.

// TestOthersWritesAskForARepair: an object deleted or edited by hand, or
// the ConfigMap edited, is told on Repairs within the watch latency; the
// leader's own saves (a source record changed, a record deleted as its
// cluster departed) are not, or each save would be followed by another.
func TestOthersWritesAskForARepair(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, c *cluster, l *Ledger)
	}{
		{name: "a clusterprofile deleted", do: func(t *testing.T, c *cluster, _ *Ledger) {
			require.NoError(t, c.adminDy.Resource(Resource).Namespace(c.ns).Delete(context.Background(), c.profileNames(t)[0], metav1.DeleteOptions{}))
		}},
		{name: "a record edited", do: func(t *testing.T, c *cluster, _ *Ledger) {
			c.setRecord(t, c.profileNames(t)[0], `{"source":"rancher","id":"edited"}`)
		}},
		{name: "the configmap edited", do: editCounts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := newCluster(t)
			l, b, books := savedAndWatched(t, c)
			repairs := l.Repairs()

			nextBookAfterSave(t, l, books, b) // the ConfigMap written again
			departed := b
			departed.Clusters = b.Clusters[1:]
			require.NoError(t, l.Save(ctx, departed)) // its object deleted by the save
			nextBook(t, books, func(got inventory.Book) bool { return len(got.Clusters) == len(departed.Clusters) })
			noRepair(t, repairs, "after the leader's own saves")

			tc.do(t, c, l)
			select {
			case <-repairs:
			case <-time.After(5 * time.Second):
				t.Fatal("no repair asked for after someone else's write")
			}
		})
	}
}

// noRepair checks that no repair is asked for within a second.
func noRepair(t *testing.T, repairs <-chan struct{}, when string) {
	t.Helper()
	select {
	case <-repairs:
		t.Fatalf("a repair asked for %s", when)
	case <-time.After(time.Second):
	}
}

// TestLeaderRepairsWithoutAListing: a ClusterProfile deleted by hand and
// the ConfigMap deleted by hand are written again by the running leader
// within seconds, with no listing in between (the source lists once an
// hour), so that its readers have a book again. Before, they were written
// at the next listing, and every replica answered 503 until then.
func TestLeaderRepairsWithoutAListing(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	src := &listing{}
	var all []sources.Cluster
	for i := range 3 {
		all = append(all, ready(fmt.Sprintf("c%02d", i)))
	}
	src.set(all...)
	l := c.ledger(t, "owner-1")
	inv := newInventory(t, src, l)
	books := watchOn(t, l)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); inv.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	nextBook(t, books, func(got inventory.Book) bool { return len(got.Clusters) == 3 })
	want := c.configMapData(t, l)
	list, err := c.adminDy.Resource(Resource).Namespace(c.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 3)
	name := list.Items[0].GetName()

	require.NoError(t, c.adminDy.Resource(Resource).Namespace(c.ns).Delete(ctx, name, metav1.DeleteOptions{}))
	require.NoError(t, c.admin.CoreV1().ConfigMaps(c.ns).Delete(ctx, l.opts.ConfigMap, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := c.adminDy.Resource(Resource).Namespace(c.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the deleted ClusterProfile written again")
	require.Eventually(t, func() bool {
		_, err := c.admin.CoreV1().ConfigMaps(c.ns).Get(ctx, l.opts.ConfigMap, metav1.GetOptions{})
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the deleted ConfigMap written again")
	assert.Equal(t, want, c.configMapData(t, l))
	assert.Equal(t, 1, src.listings(), "no listing in between")
}
