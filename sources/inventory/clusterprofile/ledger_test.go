package clusterprofile

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

func TestLedgerContract(t *testing.T) {
	var mu sync.Mutex
	namespaces := map[string]*cluster{}
	ledgertest.Run(t, func(t *testing.T, key string) ledgertest.Ledger {
		mu.Lock()
		defer mu.Unlock()
		if namespaces[key] == nil {
			namespaces[key] = newCluster(t)
		}
		return namespaces[key].ledger(t, "owner-1")
	})
}

// TestSteadyStateWritesNothing: saving the same book again, from this
// process or from a new one, writes nothing and lists nothing.
func TestSteadyStateWritesNothing(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	book := ledgertest.Fleet(20)
	l := c.ledger(t, "owner-1")
	require.NoError(t, l.Save(ctx, book))
	require.Positive(t, c.counter.writes.Load())

	c.counter.writes.Store(0)
	for range 5 {
		require.NoError(t, l.Save(ctx, book))
	}
	assert.Zero(t, c.counter.writes.Load(), "five saves of an unchanged book")

	next := c.ledger(t, "owner-1") // a new leader
	_, err := next.Load(ctx)
	require.NoError(t, err)
	c.counter.lists.Store(0)
	require.NoError(t, next.Save(ctx, book))
	assert.Zero(t, c.counter.writes.Load(), "a new leader rewrites nothing that is as it would write it")
	assert.Zero(t, c.counter.lists.Load())
}

// TestObjectsFollowTheClusterInventoryAPI reads back what a ClusterProfile
// consumer reads: the cluster manager, display name, version, access
// provider and conditions.
func TestObjectsFollowTheClusterInventoryAPI(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	book := ledgertest.Fleet(2)
	book.Clusters[1].Missed, book.Clusters[1].Held = 1, true // the served rancher cluster, departing in a held drop
	book.Clusters[2].Contest = &inventory.Contest{Conflict: &inventory.Conflict{Name: "prod-01",
		Sources: []string{"eks", "rancher"}, KeptSource: "eks"}} // a newcomer under a name the eks source holds
	require.NoError(t, c.ledger(t, "owner-1").Save(ctx, book))
	list, err := c.adminDy.Resource(Resource).Namespace(c.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 3)
	for _, obj := range list.Items {
		assert.Equal(t, Manager, obj.GetLabels()[LabelManager])
		assert.Equal(t, "owner-1", obj.GetLabels()[LabelOwner])
		mgr, _, _ := unstructuredString(obj.Object, "spec", "clusterManager", "name")
		assert.Equal(t, Manager, mgr)
		conds := conditionStatuses(t, &obj)
		name, _, _ := unstructuredString(obj.Object, "spec", "displayName")
		switch name {
		case "prod-00":
			v, _, _ := unstructuredString(obj.Object, "status", "version", "kubernetes")
			assert.Equal(t, "v1.31.4", v)
			providers, _, _ := unstructuredSlice(obj.Object, "status", "accessProviders")
			require.Len(t, providers, 1)
			cl := providers[0].(map[string]any)["cluster"].(map[string]any)
			assert.Equal(t, "https://rancher.example.com/k8s/clusters/c-prod-00", cl["server"])
			assert.Equal(t, "dGVzdA==", cl["certificate-authority-data"])
			assert.Equal(t, "True", conds["Served"])
			assert.Equal(t, "True", conds["ControlPlaneHealthy"])
			assert.Equal(t, "True", conds["Departing"])
			assert.Equal(t, "True", conds["Held"])
			assert.Equal(t, "False", conds["Conflict"])
			assert.Equal(t, "rancher", obj.GetLabels()[LabelSource])
			assert.Equal(t, "acme", obj.GetLabels()[LabelTenant])
			props, _, _ := unstructuredSlice(obj.Object, "status", "properties")
			assert.Contains(t, props, map[string]any{"name": "metadata.labels.env", "value": "prod"})
			assert.Contains(t, props, map[string]any{"name": "metadata.annotations.team", "value": "payments"})
		case "prod-01":
			assert.Equal(t, "False", conds["Served"], "not in the answer")
			assert.Equal(t, "True", conds["Conflict"])
		case "new":
			assert.Equal(t, "False", conds["Served"])
			assert.Equal(t, "pending", obj.GetLabels()[LabelPhase])
		default:
			t.Fatalf("unexpected clusterprofile %q", name)
		}
		assert.NotContains(t, string(mustJSON(t, obj.Object)), "/var/run/token\"", "a token reference is in the record, never a token")
	}
}

// TestOtherInstallationsAreLeftAlone: a second owner in the namespace
// sees none of the first's records, and saving an empty book deletes only
// its own.
func TestOtherInstallationsAreLeftAlone(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	require.NoError(t, c.ledger(t, "owner-1").Save(ctx, ledgertest.Fleet(3)))
	other := c.ledger(t, "owner-2")
	b, err := other.Load(ctx)
	require.NoError(t, err)
	assert.Empty(t, b.Clusters)
	require.NoError(t, other.Save(ctx, ledgertest.Fleet(2)))
	require.NoError(t, c.ledger(t, "owner-2").Save(ctx, ledgertest.Fleet(0)))
	mine, err := c.ledger(t, "owner-1").Load(ctx)
	require.NoError(t, err)
	assert.Len(t, mine.Clusters, 4, "owner-1's three clusters and its pending one are untouched")
}

// TestAcknowledgementLivesOnlyThroughItsDrop: an operator's
// acknowledgement of a held departure is read by a new leader and by the
// feed, survives the leader's writes while the cluster departs, and is
// reset once the cluster is back, so it never acknowledges a later drop.
func TestAcknowledgementLivesOnlyThroughItsDrop(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	book := ledgertest.Fleet(1)
	held := &book.Clusters[1] // the served rancher cluster
	held.Missed, held.Held = 1, true
	l := c.ledger(t, "owner-1")
	require.NoError(t, l.Save(ctx, book))
	ack := func() (string, bool) {
		list, err := c.adminDy.Resource(Resource).Namespace(c.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelSource + "=rancher"})
		require.NoError(t, err)
		require.Len(t, list.Items, 1)
		v, ok := list.Items[0].GetAnnotations()[AnnotationAcknowledge]
		return v, ok
	}
	_, set := ack()
	require.False(t, set, "no acknowledgement is declared for a departing cluster")

	// kubectl annotate clusterprofiles -l argocd-cluster-discovery.io/source=rancher argocd-cluster-discovery.io/acknowledge-departure=true
	list, err := c.adminDy.Resource(Resource).Namespace(c.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelSource + "=rancher"})
	require.NoError(t, err)
	patch := []byte(`{"metadata":{"annotations":{"` + AnnotationAcknowledge + `":"true"}}}`)
	_, err = c.adminDy.Resource(Resource).Namespace(c.ns).Patch(ctx, list.Items[0].GetName(), types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "kubectl-annotate"})
	require.NoError(t, err)

	loaded, err := c.ledger(t, "owner-1").Load(ctx)
	require.NoError(t, err)
	assert.True(t, loaded.Clusters[1].Acknowledged, "a new leader reads the acknowledgement")
	books := make(chan bool, 10)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Watch(wctx, func(b inventory.Book) { books <- b.Clusters[1].Acknowledged })
	}()
	assert.True(t, <-books, "the feed carries the acknowledgement")
	cancel()
	<-done

	held.Missed = 2
	require.NoError(t, l.Save(ctx, book))
	v, _ := ack()
	assert.Equal(t, "true", v, "the leader's writes while the cluster departs keep it")

	held.Missed, held.Held, held.MissingSince = 0, false, time.Time{} // back before it was confirmed
	require.NoError(t, l.Save(ctx, book))
	v, _ = ack()
	assert.Empty(t, v, "reset once the cluster is back: it acknowledged that drop only")
}

// TestAcknowledgementWithoutADropIsReset: an acknowledgement set on a
// cluster that is not departing (a selector wider than the drop's) is
// reset by the leader's next save, so that a later drop is not taken as
// acknowledged before anyone looked at it.
func TestAcknowledgementWithoutADropIsReset(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	book := ledgertest.Fleet(1)
	l := c.ledger(t, "owner-1")
	require.NoError(t, l.Save(ctx, book))
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Watch(wctx, func(inventory.Book) {})
	}()
	defer func() { cancel(); <-done }()
	repairs := l.Repairs()

	list, err := c.adminDy.Resource(Resource).Namespace(c.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelSource + "=rancher"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	name := list.Items[0].GetName()
	patch := []byte(`{"metadata":{"annotations":{"` + AnnotationAcknowledge + `":"true"}}}`)
	_, err = c.adminDy.Resource(Resource).Namespace(c.ns).Patch(ctx, name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "kubectl-annotate"})
	require.NoError(t, err)
	select {
	case <-repairs:
	case <-time.After(30 * time.Second):
		t.Fatal("the feed did not ask for a repair of the acknowledgement")
	}

	require.NoError(t, l.Save(ctx, book)) // the same book: only the acknowledgement is off
	obj, err := c.adminDy.Resource(Resource).Namespace(c.ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, obj.GetAnnotations()[AnnotationAcknowledge], "reset: nothing departs, there is nothing to acknowledge")
}

// TestLeaderKilledMidSave: the leader dies between two writes of one save
// (its connection cut after a few writes). The next leader loads a book in
// which every record is whole, each with the count it had before or after
// that save, never reset: the countdowns resume where they were, counted
// in listings.
func TestLeaderKilledMidSave(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	book := ledgertest.Fleet(6)
	require.NoError(t, c.ledger(t, "owner-1").Save(ctx, book))

	for i := range book.Clusters {
		if r := &book.Clusters[i]; r.Served {
			r.Missed, r.Held, r.MissingSince = 2, true, time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
		}
	}
	dying := c.ledger(t, "owner-1")
	_, err := dying.Load(ctx)
	require.NoError(t, err)
	c.counter.failAfter.Store(c.counter.writes.Load() + 3) // the process dies after three more writes
	require.Error(t, dying.Save(ctx, book))
	c.counter.failAfter.Store(0)

	next, err := c.ledger(t, "owner-1").Load(ctx)
	require.NoError(t, err)
	require.Len(t, next.Clusters, len(book.Clusters), "no record lost")
	counts := map[int]int{}
	for _, r := range next.Clusters {
		if r.Served {
			require.NotNil(t, r.Rendering, "%s: a record is whole", r.ID)
			counts[r.Missed]++
		}
	}
	assert.Positive(t, counts[2], "the writes before the cut are there")
	assert.Positive(t, counts[0], "the cut came before the last write")
	assert.Len(t, counts, 2, "every count is the one before or after the save: %v", counts)

	require.NoError(t, c.ledger(t, "owner-1").Save(ctx, book), "the next leader's save completes the rest")
	final, err := c.ledger(t, "owner-1").Load(ctx)
	require.NoError(t, err)
	for _, r := range final.Clusters {
		if r.Served {
			assert.Equal(t, 2, r.Missed, r.ID)
		}
	}
}

// TestFeedServesOnlyCompleteSaves: a reader never delivers part of a save.
// A save cut short (the leader died after a few writes) leaves objects
// that do not add up to the counts written after the last complete save:
// the reader keeps that save until the next one completes.
func TestFeedServesOnlyCompleteSaves(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	l := c.ledger(t, "owner-1")
	require.NoError(t, l.Save(ctx, ledgertest.Fleet(2)))
	reader := c.ledger(t, "owner-1")
	books := make(chan inventory.Book, 100)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); reader.Watch(wctx, func(b inventory.Book) { books <- b }) }()
	t.Cleanup(func() { cancel(); <-done })
	first := <-books
	require.Len(t, first.Clusters, 3, "the complete save: two clusters and the pending one")

	c.counter.failAfter.Store(c.counter.writes.Load() + 3) // cut after three writes
	require.Error(t, l.Save(ctx, ledgertest.Fleet(6)))
	c.counter.failAfter.Store(0)
	select {
	case b := <-books:
		t.Fatalf("a part of a save was delivered: %d records", len(b.Clusters))
	case <-time.After(2 * time.Second):
	}
	require.NoError(t, c.ledger(t, "owner-1").Save(ctx, ledgertest.Fleet(6)), "the next leader completes it")
	select {
	case b := <-books:
		assert.Len(t, b.Clusters, 7)
	case <-time.After(10 * time.Second):
		t.Fatal("the completed save was never delivered")
	}

	// status writes change no record: no new book (at 10,000 clusters each
	// book is a restore of every record on every replica)
	list, err := c.adminDy.Resource(Resource).Namespace(c.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelSource + "=rancher"})
	require.NoError(t, err)
	require.NotEmpty(t, list.Items)
	name := list.Items[0].GetName()
	status := []byte(`{"status":{"version":{"kubernetes":"v9.9.9"}}}`)
	_, err = c.adminDy.Resource(Resource).Namespace(c.ns).Patch(ctx, name, types.MergePatchType, status, metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	select {
	case b := <-books:
		t.Fatalf("a status change delivered a book of %d records", len(b.Clusters))
	case <-time.After(2 * time.Second):
	}
	// an acknowledgement is in the record's digest: a new book
	ackPatch := []byte(`{"metadata":{"annotations":{"` + AnnotationAcknowledge + `":"true"}}}`)
	_, err = c.adminDy.Resource(Resource).Namespace(c.ns).Patch(ctx, name, types.MergePatchType, ackPatch, metav1.PatchOptions{})
	require.NoError(t, err)
	select {
	case b := <-books:
		acked := 0
		for _, r := range b.Clusters {
			if r.Acknowledged {
				acked++
			}
		}
		assert.Equal(t, 1, acked)
	case <-time.After(10 * time.Second):
		t.Fatal("the acknowledgement was never delivered")
	}
}

// TestFeedReadsMetadataOnly: every replica's feed lists and watches the
// ClusterProfiles' metadata only (the record is an annotation), so that
// the status writes of a cold start (one per cluster) are not decoded, as
// whole objects, by every replica.
func TestFeedReadsMetadataOnly(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	require.NoError(t, c.ledger(t, "owner-1").Save(ctx, ledgertest.Fleet(2)))
	before := len(c.counter.profileReads())
	reader := c.ledger(t, "owner-1")
	books := make(chan inventory.Book, 10)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); reader.Watch(wctx, func(b inventory.Book) { books <- b }) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case b := <-books:
		require.Len(t, b.Clusters, 3)
	case <-time.After(10 * time.Second):
		t.Fatal("no book")
	}
	reads := c.counter.profileReads()[before:]
	require.NotEmpty(t, reads, "the feed's list")
	for _, accept := range reads {
		assert.Contains(t, accept, "as=PartialObjectMetadata", "a read of whole objects")
	}
}

// TestCreateThatTimedOutIsAdopted: a create the apiserver made but whose
// answer the leader never got (a timeout under load) leaves our object
// under the name the next save creates: the save adopts it instead of
// failing at every listing, and a complete book follows.
func TestCreateThatTimedOutIsAdopted(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	unaware := c.ledger(t, "owner-1")
	_, err := unaware.Load(ctx) // knows of no object
	require.NoError(t, err)
	book := ledgertest.Fleet(2)
	require.NoError(t, c.ledger(t, "owner-1").Save(ctx, book), "the creates were made")
	book.Clusters[0].Missed = 1
	require.NoError(t, unaware.Save(ctx, book), "the objects are adopted, and updated")
	loaded, err := c.ledger(t, "owner-1").Load(ctx)
	require.NoError(t, err)
	require.Len(t, loaded.Clusters, len(book.Clusters))
	assert.Equal(t, 1, loaded.Clusters[0].Missed)
}
