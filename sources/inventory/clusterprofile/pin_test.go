package clusterprofile

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

// TestPinIsReadAndLeftAlone: an operator's pin label on a ClusterProfile
// is read by a new leader and by the feed (what the leader's lifecycle
// asks), the leader's writes leave it on the object, and a departure the
// pin keeps says so in the Departing condition. A second label does not
// make the object someone else's: no repair is asked for.
func TestPinIsReadAndLeftAlone(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	book := ledgertest.Fleet(1)
	l := c.ledger(t, "owner-1")
	require.NoError(t, l.Save(ctx, book))
	get := func() *unstructured.Unstructured {
		list, err := c.adminDy.Resource(Resource).Namespace(c.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelSource + "=rancher"})
		require.NoError(t, err)
		require.Len(t, list.Items, 1)
		return &list.Items[0]
	}
	books := make(chan inventory.Book, 10)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Watch(wctx, func(b inventory.Book) { books <- b })
	}()
	defer func() { cancel(); <-done }()
	repairs := l.Repairs()
	require.False(t, (<-books).Clusters[1].Pin, "nothing is pinned yet")

	// kubectl label clusterprofile NAME argocd-cluster-discovery.io/pin=true
	patch := []byte(`{"metadata":{"labels":{"` + LabelPin + `":"true"}}}`)
	_, err := c.adminDy.Resource(Resource).Namespace(c.ns).Patch(ctx, get().GetName(), types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "kubectl-label"})
	require.NoError(t, err)
	select {
	case b := <-books:
		assert.True(t, b.Clusters[1].Pin, "the feed carries the pin")
	case <-time.After(30 * time.Second):
		t.Fatal("the feed delivered no book after the pin")
	}
	loaded, err := c.ledger(t, "owner-1").Load(ctx)
	require.NoError(t, err)
	assert.True(t, loaded.Clusters[1].Pin, "a new leader reads the pin")
	assert.False(t, loaded.Clusters[0].Pin)

	kept := &book.Clusters[1]
	kept.Missed, kept.Pinned, kept.MissingSince = 3, true, time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	require.NoError(t, l.Save(ctx, book))
	obj := get()
	assert.Equal(t, "true", obj.GetLabels()[LabelPin], "the leader's writes leave the pin")
	var departing string
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, cd := range conds {
		if m := cd.(map[string]any); m["type"] == "Departing" {
			departing, _ = m["message"].(string)
		}
	}
	assert.Contains(t, departing, "kept served by the "+LabelPin+" label")
	select {
	case <-repairs:
		t.Fatal("a pin is not someone else's write to repair")
	default:
	}
}
