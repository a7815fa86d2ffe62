package clusterprofile

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

// What others do to the ledger's objects: the leader puts the ledger back
// as its book says, and no reader serves what others left in between.

// TestDeletedProfileIsWrittenAgain: a ClusterProfile of a record the
// leader holds, deleted by someone else (kubectl delete, a deposed
// leader's late delete), makes the objects not add up: no reader serves a
// book without it, and the leader's next save creates it again, so that
// every replica gets new books again. Before, the leader took the object
// for written, and every replica kept its last book for as long as the
// process led.
func TestDeletedProfileIsWrittenAgain(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	l, b, books := savedAndWatched(t, c)
	names := c.profileNames(t) // the rancher ones
	require.Len(t, names, 3)
	require.NoError(t, c.adminDy.Resource(Resource).Namespace(c.ns).Delete(ctx, names[1], metav1.DeleteOptions{}))
	everyBookHas(t, books, 4, 2*time.Second)
	require.NoError(t, l.Save(ctx, b), "the leader's next save")
	assert.ElementsMatch(t, names, c.profileNames(t), "the deleted object created again")
	have, err := recordOf(c.profile(t, names[1]))
	require.NoError(t, err)
	assert.Equal(t, "rancher", have.Source)
	obj, err := c.adminDy.Resource(Resource).Namespace(c.ns).Get(ctx, names[1], metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, conditionStatuses(t, obj), "its status written too")
	// a book follows once the objects add up again (a new one: the leader's
	// record of the object is the same, its digest too, so the feed must
	// tell the deletion and the creation apart to deliver it)
	l2 := c.ledger(t, "owner-1")
	got, err := l2.Load(ctx)
	require.NoError(t, err)
	assert.Len(t, got.Clusters, 4, "a new leader loads every record")
	assert.Len(t, nextBookAfterSave(t, l, books, b).Clusters, 4)
}

// nextBookAfterSave saves b again with a changed source record, so that a
// new book is due, and returns it: a feed that has stopped delivering
// fails here.
func nextBookAfterSave(t *testing.T, l *Ledger, books <-chan inventory.Book, b inventory.Book) inventory.Book {
	t.Helper()
	b.Sources = append([]inventory.SourceRecord(nil), b.Sources...)
	b.Sources[0].LastError = "list clusters: throttled"
	b.Sources[0].Stale = true
	require.NoError(t, l.Save(context.Background(), b))
	return nextBook(t, books, func(got inventory.Book) bool {
		return len(got.Sources) > 0 && got.Sources[0].LastError == "list clusters: throttled"
	})
}

// TestConfigMapDeletedOrEditedIsWrittenAgain: the ConfigMap of the source
// records and counts, deleted or edited by someone else, is written again
// by the leader's next save, as its book says, though the book did not
// change. Before, the leader took it for written, and every replica kept
// its last book for as long as the process led.
func TestConfigMapDeletedOrEditedIsWrittenAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, c *cluster, l *Ledger)
	}{
		{name: "deleted", do: func(t *testing.T, c *cluster, l *Ledger) {
			require.NoError(t, c.admin.CoreV1().ConfigMaps(c.ns).Delete(context.Background(), l.opts.ConfigMap, metav1.DeleteOptions{}))
		}},
		{name: "its counts edited", do: editCounts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := newCluster(t)
			l, b, books := savedAndWatched(t, c)
			want := c.configMapData(t, l)
			tc.do(t, c, l)
			everyBookHas(t, books, 4, 2*time.Second)
			require.NoError(t, l.Save(ctx, b), "the leader's next save")
			assert.Equal(t, want, c.configMapData(t, l), "the ConfigMap written again")
			assert.Len(t, nextBookAfterSave(t, l, books, b).Clusters, 4, "the feed delivers again")
		})
	}
}

// editCounts edits the counts the ConfigMap of l holds, as someone else
// would.
func editCounts(t *testing.T, c *cluster, l *Ledger) {
	t.Helper()
	patch := mustJSON(t, map[string]any{"data": map[string]string{CountsKey: `{"eks":1,"rancher":2}`}})
	_, err := c.admin.CoreV1().ConfigMaps(c.ns).Patch(context.Background(), l.opts.ConfigMap, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// everyBookHas checks that every book delivered within d has n records:
// no book that does not add up is served.
func everyBookHas(t *testing.T, books <-chan inventory.Book, n int, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case got := <-books:
			require.Len(t, got.Clusters, n, "a book that does not add up was served")
		case <-deadline:
			return
		}
	}
}

// TestLateCreateIsTakenAsARestartWouldLoadIt: a ClusterProfile of ours
// the leader neither loaded nor wrote (a deposed leader's late create,
// with its counts) is found by the leader's next save and taken as a
// restart would load it: served, then through the departure rule since
// the source does not list it, and the ledger adds up again at once.
// Before, the leader's counts left it out, and no reader took a book
// again until someone deleted the object.
func TestLateCreateIsTakenAsARestartWouldLoadIt(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	var all []sources.Cluster
	for i := range 8 {
		all = append(all, ready(fmt.Sprintf("c%02d", i)))
	}
	src := &listing{}
	src.set(all...)
	own := c.ledger(t, "owner-1")
	leader := newInventory(t, src, own)
	require.NoError(t, leader.RefreshAll(ctx))
	watchOn(t, own) // the leader's own feed notes what others write

	deposed := c.ledger(t, "owner-1")
	b, err := deposed.Load(ctx)
	require.NoError(t, err)
	late := b.Clusters[0]
	rendering := *late.Rendering
	rendering.Name, rendering.ID, rendering.Server = "late", "id-late", "https://late.example.com/"
	late.ID, late.Rendering, late.Holds = rendering.ID, &rendering, "late"
	b.Clusters = append(b.Clusters, late)
	b.Sort()
	require.NoError(t, deposed.Save(ctx, b))
	require.Eventually(t, func() bool {
		own.written.mu.Lock()
		defer own.written.mu.Unlock()
		return len(own.written.stale) > 0
	}, 10*time.Second, 10*time.Millisecond, "the leader's feed saw the late create")

	served := func() []string {
		var out []string
		for _, cl := range leader.Snapshot().Clusters {
			out = append(out, cl.Name)
		}
		return out
	}
	require.NoError(t, leader.RefreshAll(ctx)) // a listing without "late"
	assert.Contains(t, served(), "late", "taken, as a restart would load it")
	assert.JSONEq(t, `{"s1":9}`, c.configMapData(t, own)[CountsKey])
	nextBook(t, c.watch(t), func(got inventory.Book) bool { return len(got.Clusters) == 9 })

	for range 2 { // its departure, confirmed after two listings
		require.NoError(t, leader.RefreshAll(ctx))
	}
	assert.NotContains(t, served(), "late")
	assert.Len(t, served(), 8)
	assert.JSONEq(t, `{"s1":8}`, c.configMapData(t, own)[CountsKey])
	nextBook(t, c.watch(t), func(got inventory.Book) bool { return len(got.Clusters) == 8 })
}

// TestSecondObjectOfAnIdentityIsDeleted: an object of ours holding the
// record of an identity another object holds (restored from a backup
// under the name of a former display name) would never add up: the
// leader that meets it, running (its feed notes it) or loading, deletes
// it, and the ledger adds up again.
func TestSecondObjectOfAnIdentityIsDeleted(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	l, b, books := savedAndWatched(t, c)
	ours := map[string]string{LabelManager: Manager, LabelOwner: "owner-1", LabelSource: "rancher"}
	gone := func(name string) bool {
		_, err := c.adminDy.Resource(Resource).Namespace(c.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}

	// the running leader
	c.createProfile(t, "restored-1", ours, &b.Clusters[1])
	require.Eventually(t, func() bool {
		l.written.mu.Lock()
		defer l.written.mu.Unlock()
		return len(l.written.stale) > 0
	}, 10*time.Second, 10*time.Millisecond, "the leader's feed saw it")
	require.NoError(t, l.Save(ctx, b))
	assert.True(t, gone("restored-1"), "deleted by the leader's save")
	assert.Len(t, nextBookAfterSave(t, l, books, b).Clusters, 4)

	// a new leader
	c.createProfile(t, "restored-2", ours, &b.Clusters[2])
	next := c.ledger(t, "owner-1")
	got, err := next.Load(ctx)
	require.NoError(t, err)
	assert.Len(t, got.Clusters, 4, "one record per identity")
	require.NoError(t, next.Save(ctx, got))
	assert.True(t, gone("restored-2"), "deleted by the new leader's first save")
}

// savedAndWatched saves Fleet(3) with a leader's ledger of owner-1 in c,
// starts its own feed, and returns them once the feed has delivered the
// book.
func savedAndWatched(t *testing.T, c *cluster) (*Ledger, inventory.Book, <-chan inventory.Book) {
	t.Helper()
	l := c.ledger(t, "owner-1")
	b := ledgertest.Fleet(3)
	require.NoError(t, l.Save(context.Background(), b))
	books := watchOn(t, l)
	nextBook(t, books, func(got inventory.Book) bool { return len(got.Clusters) == 4 })
	return l, b, books
}

// handover is a ledger of Fleet(3) saved by a leader since deposed, and
// the new leader that loaded it: the deposed leader's book, the new
// leader's, and the index in both of the cluster c-prod-01.
type handover struct {
	deposed, leader *Ledger
	b, nb           inventory.Book
	i               int
}

func newHandover(t *testing.T, c *cluster) *handover {
	t.Helper()
	ctx := context.Background()
	h := &handover{deposed: c.ledger(t, "owner-1"), leader: c.ledger(t, "owner-1"), b: ledgertest.Fleet(3)}
	require.NoError(t, h.deposed.Save(ctx, h.b))
	var err error
	h.nb, err = h.leader.Load(ctx)
	require.NoError(t, err)
	h.i = slices.IndexFunc(h.b.Clusters, func(r inventory.Record) bool { return r.ID == "c-prod-01" })
	require.GreaterOrEqual(t, h.i, 0)
	require.Equal(t, h.b.Clusters[h.i].ID, h.nb.Clusters[h.i].ID)
	return h
}

// leaderRewrites has the new leader write c-prod-01's record anew.
func (h *handover) leaderRewrites(t *testing.T) {
	h.nb.Clusters[h.i].Established = h.nb.Clusters[h.i].Established.Add(time.Hour)
	require.NoError(t, h.leader.Save(context.Background(), h.nb))
}

// departed is the deposed leader's book without c-prod-01.
func (h *handover) departed() inventory.Book {
	out := h.b
	out.Clusters = append(append([]inventory.Record(nil), h.b.Clusters[:h.i]...), h.b.Clusters[h.i+1:]...)
	return out
}

// whileOnItsWay runs f once, before the first write that match selects is
// sent, and not for f's own writes.
func whileOnItsWay(c *cluster, match func(*http.Request) bool, f func()) {
	var once sync.Once
	hook := func(r *http.Request) {
		if match(r) {
			once.Do(func() { c.counter.beforeWrite.Store(nil); f() })
		}
	}
	c.counter.beforeWrite.Store(&hook)
}

// TestLateDeleteOfADeposedLeader: a deposed leader's late save deletes no
// object the new leader has written since: a departure it counted on its
// own, undone by the new leader (the cluster listed again), stays. A
// leader whose object someone edited by hand deletes it at its next save.
// Before, the delete took whatever object had the name, and the answer
// lost a cluster the leader serves.
func TestLateDeleteOfADeposedLeader(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	h := newHandover(t, c)
	names := c.profileNames(t) // the rancher ones
	require.Len(t, names, 3)
	h.leaderRewrites(t)

	err := h.deposed.Save(ctx, h.departed())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "holds a record this process did not write (another leader's, or an edit): not deleted")
	assert.ElementsMatch(t, names, c.profileNames(t), "nothing deleted")

	// the same save again: the record it found is taken as known (an
	// edit by hand must not block a departure for ever)
	require.NoError(t, h.deposed.Save(ctx, h.departed()))
	assert.Len(t, c.profileNames(t), 2)
}

// TestDeleteOnItsWayWhenTheNewLeaderWrites: the object a deposed leader
// read before its delete, written by the new leader while the delete is
// on its way, is not deleted: the delete holds the uid and resource
// version it read.
func TestDeleteOnItsWayWhenTheNewLeaderWrites(t *testing.T) {
	c := newCluster(t)
	h := newHandover(t, c)
	names := c.profileNames(t) // the rancher ones
	whileOnItsWay(c, func(r *http.Request) bool { return r.Method == http.MethodDelete }, func() { h.leaderRewrites(t) })
	err := h.deposed.Save(context.Background(), h.departed())
	c.counter.beforeWrite.Store(nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "was written while it was deleted: not deleted")
	assert.ElementsMatch(t, names, c.profileNames(t), "nothing deleted")
}

// TestSourceRecordsOnTheirWayWhenTheNewLeaderWrites: the source records
// of a deposed leader, on their way while the new leader writes its own,
// do not replace them: the patch holds the resource version it read.
func TestSourceRecordsOnTheirWayWhenTheNewLeaderWrites(t *testing.T) {
	c := newCluster(t)
	h := newHandover(t, c)
	whileOnItsWay(c, func(r *http.Request) bool {
		return r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/configmaps/")
	}, func() {
		h.nb.Sources[0].LastError = "the new leader's"
		require.NoError(t, h.leader.Save(context.Background(), h.nb))
	})
	late := h.b
	late.Sources = append([]inventory.SourceRecord(nil), h.b.Sources...)
	late.Sources[0].LastError = "the deposed leader's"
	err := h.deposed.Save(context.Background(), late)
	c.counter.beforeWrite.Store(nil)
	require.Error(t, err)
	assert.True(t, apierrors.IsConflict(errors.Unwrap(err)) || strings.Contains(err.Error(), "the object has been modified"), "%v", err)
	assert.Contains(t, c.configMapData(t, h.leader)[SourcesKey], "the new leader's")
	assert.NotContains(t, c.configMapData(t, h.leader)[SourcesKey], "the deposed leader's")
}

// TestDepartureLeavesAnObjectNotOurs: an object of another owner that took
// the name of a departed cluster's ClusterProfile (ours deleted by hand,
// then the name reused) is not deleted by the departure.
func TestDepartureLeavesAnObjectNotOurs(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	h := newHandover(t, c)
	name := objectName("owner-1", &h.b.Clusters[h.i])
	require.NoError(t, c.adminDy.Resource(Resource).Namespace(c.ns).Delete(ctx, name, metav1.DeleteOptions{}))
	c.createRaw(t, name, map[string]string{LabelManager: Manager, LabelOwner: "owner-2", LabelSource: "rancher"}, nil)
	for range 2 { // nor by a later save
		require.NoError(t, h.deposed.Save(ctx, h.departed()))
	}
	_, err := c.adminDy.Resource(Resource).Namespace(c.ns).Get(ctx, name, metav1.GetOptions{})
	assert.NoError(t, err, "another owner's object is kept")
}
