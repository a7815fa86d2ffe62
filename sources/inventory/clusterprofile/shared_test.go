package clusterprofile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

// The leader's feed shares the records it wrote instead of decoding a
// second copy of each; a follower, and an object edited by someone else,
// are decoded.

// watchOn starts l's own feed and returns the books it delivers.
func watchOn(t *testing.T, l *Ledger) <-chan inventory.Book {
	t.Helper()
	books := make(chan inventory.Book, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Watch(ctx, func(b inventory.Book) { books <- b }) }()
	t.Cleanup(func() { cancel(); <-done })
	return books
}

// nextBook waits for a book that satisfies ok.
func nextBook(t *testing.T, books <-chan inventory.Book, ok func(inventory.Book) bool) inventory.Book {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case b := <-books:
			if ok(b) {
				return b
			}
		case <-deadline:
			t.Fatal("no such book delivered")
		}
	}
}

func TestLeaderFeedSharesWhatItWrote(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	leader := c.ledger(t, "owner-1")
	fleet := ledgertest.Fleet(3)
	// the leader's, for this save's statuses: its feed delivers the record
	// as a follower's does, without it
	fleet.Clusters[1].Contest = &inventory.Contest{Answered: true, Conflict: &inventory.Conflict{Name: "prod-00", Sources: []string{"eks", "rancher"}, KeptSource: "rancher"}}
	require.NoError(t, leader.Save(ctx, fleet))
	rendering := map[string]any{} // by ID: the saved book's rendering pointers
	for _, r := range fleet.Clusters {
		if r.Rendering != nil {
			rendering[r.ID] = r.Rendering
		}
	}
	complete := func(b inventory.Book) bool { return len(b.Clusters) == len(fleet.Clusters) }

	own := nextBook(t, watchOn(t, leader), complete)
	follower := nextBook(t, c.watch(t), complete)
	t.Run("a follower's records share what they have in common", func(t *testing.T) { assertShared(t, follower) })
	t.Run("a new leader's records share what they have in common", func(t *testing.T) {
		loaded, err := c.ledger(t, "owner-1").Load(ctx)
		require.NoError(t, err)
		assertShared(t, loaded)
	})
	bare := ledgertest.WithoutCAs(own)
	for i, r := range own.Clusters {
		f := follower.Clusters[i]
		assert.Equal(t, f, bare.Clusters[i], "the shared record is the decoded one, but for the CA")
		if r.Rendering != nil {
			assert.False(t, r.Rendering.CA.IsZero(), "%s: the leader's record keeps its CA", r.ID)
			assert.True(t, f.Rendering.CA.IsZero(), "%s: a follower holds no CA", r.ID)
			assert.Same(t, rendering[r.ID], r.Rendering, "%s: the leader's feed decoded a second copy", r.ID)
			assert.NotSame(t, rendering[r.ID], f.Rendering, "%s: a follower shares nothing with the leader", r.ID)
		}
	}

	t.Run("what a save replaces or deletes is forgotten", func(t *testing.T) {
		l := c.ledger(t, "owner-1")
		for range 3 {
			b := ledgertest.Fleet(3)
			b.Clusters[0].Missed++ // a changed record each time
			require.NoError(t, l.Save(ctx, b))
		}
		l.written.mu.RLock()
		assert.Len(t, l.written.bySum, 4, "one record per object, however many saves")
		l.written.mu.RUnlock()
		require.NoError(t, l.Save(ctx, ledgertest.Fleet(1)))
		l.written.mu.RLock()
		defer l.written.mu.RUnlock()
		assert.Len(t, l.written.bySum, 2)
		for id, s := range l.known {
			assert.Contains(t, l.written.bySum, s.record, "%s: its record is the one its object holds", id)
		}
	})
}

// TestUnchangedSaveKeepsTheSharedRecords: a save puts every record, changed
// or not; one of an unchanged record keeps the copy the feed's objects
// share, or the leader would hold each record twice after its next save.
func TestUnchangedSaveKeepsTheSharedRecords(t *testing.T) {
	ctx := context.Background()
	l := newCluster(t).ledger(t, "owner-1")
	require.NoError(t, l.Save(ctx, ledgertest.Fleet(3)))
	l.written.mu.RLock()
	before := maps.Clone(l.written.bySum)
	l.written.mu.RUnlock()
	require.NoError(t, l.Save(ctx, ledgertest.Fleet(3))) // equal records, new copies
	l.written.mu.RLock()
	defer l.written.mu.RUnlock()
	require.Len(t, l.written.bySum, len(before))
	for sum, r := range l.written.bySum {
		assert.Same(t, before[sum], r, "%s: one copy of an unchanged record, not one per save", r.ID)
	}
}

// assertShared checks that the renderings of b, Fleet(3)'s as a follower
// decodes them, share their label sets and tenant, but not their names.
func assertShared(t *testing.T, b inventory.Book) {
	t.Helper()
	var decoded []*sources.Cluster
	for _, r := range b.Clusters {
		if r.Rendering != nil {
			decoded = append(decoded, r.Rendering)
		}
	}
	require.Len(t, decoded, 3)
	sameMap := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	for _, c := range decoded[1:] {
		assert.True(t, sameMap(decoded[0].Labels, c.Labels), "%s: one label set for equal labels", c.Name)
		assert.True(t, sameMap(decoded[0].Annotations, c.Annotations), "%s: one annotation set", c.Name)
		assert.Same(t, unsafe.StringData(decoded[0].Tenant), unsafe.StringData(c.Tenant), "%s: one copy of the tenant", c.Name)
		assert.NotSame(t, unsafe.StringData(decoded[0].Name), unsafe.StringData(c.Name))
	}
}

// profile reads the ClusterProfile name of the cluster's namespace.
func (c *cluster) profile(t *testing.T, name string) metav1.Object {
	t.Helper()
	obj, err := c.adminDy.Resource(Resource).Namespace(c.ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return obj
}

// recordsSent checks, as each create or metadata apply of a ClusterProfile
// is sent, that the ledger already knows the record it carries, and fails
// the writes it is told to.
type recordsSent struct {
	rt     http.RoundTripper
	ledger atomic.Pointer[Ledger]
	// fail fails the create of that object, failApply the apply of that
	// one's metadata
	fail, failApply string

	mu              sync.Mutex
	sent, unknown   int
	failed, applied []string
}

func (s *recordsSent) RoundTrip(r *http.Request) (*http.Response, error) {
	l := s.ledger.Load()
	if l == nil || r.Body == nil || (r.Method != http.MethodPost && r.Method != http.MethodPatch) ||
		!strings.Contains(r.URL.Path, "/"+Resource.Resource) || strings.HasSuffix(r.URL.Path, "/status") {
		return s.rt.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var obj metav1.PartialObjectMetadata
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	raw, ok := obj.Annotations[AnnotationRecord]
	_, _, known := l.written.get(sha256.Sum256([]byte(raw)))
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		s.sent++
		if !known {
			s.unknown++
		}
	}
	if obj.Name == s.fail || r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/"+s.failApply) {
		s.failed = append(s.failed, obj.Name)
		return nil, errors.New("connection reset")
	}
	s.applied = append(s.applied, obj.Name)
	return s.rt.RoundTrip(r)
}

func TestLeaderKnowsWhatItWritesBeforeSendingIt(t *testing.T) {
	c := newCluster(t)
	sent := &recordsSent{}
	l := c.ledgerThrough(t, "owner-1", func(rt http.RoundTripper) http.RoundTripper {
		sent.rt = rt
		return sent
	})
	sent.ledger.Store(l)

	fleet := ledgertest.Fleet(3)
	sent.fail = objectName("owner-1", &fleet.Clusters[2])
	require.Error(t, l.Save(context.Background(), fleet), "one create failed")
	sent.mu.Lock()
	assert.Equal(t, []string{sent.fail}, sent.failed)
	assert.Equal(t, len(fleet.Clusters), sent.sent, "every create carries its record")
	assert.Zero(t, sent.unknown, "a record the feed may see before the write returns is known when the write is sent")
	sent.mu.Unlock()

	failed := fleet.Clusters[2]
	for _, r := range l.written.bySum {
		assert.NotEqual(t, failed.ID, r.ID, "the record of a failed create is forgotten")
	}
	assert.Len(t, l.written.bySum, len(fleet.Clusters)-1, "what the objects that exist hold")

	// the next save creates it; then a change whose apply fails
	sent.fail = ""
	require.NoError(t, l.Save(context.Background(), fleet))
	changed := ledgertest.Fleet(3)
	changed.Clusters[1].Missed = 1
	changed.Clusters[1].MissingSince = time.Now().UTC().Truncate(time.Second)
	sent.failApply = objectName("owner-1", &changed.Clusters[1])
	require.Error(t, l.Save(context.Background(), changed), "one apply failed")
	sent.mu.Lock()
	assert.Contains(t, sent.failed, sent.failApply)
	assert.Zero(t, sent.unknown)
	sent.mu.Unlock()
	for _, r := range l.written.bySum {
		assert.NotEqual(t, changed.Clusters[1].ID, r.ID, "neither the record its object holds nor the one that failed is shared")
	}
	assert.Len(t, l.written.bySum, len(fleet.Clusters)-1)

	sent.failApply = ""
	require.NoError(t, l.Save(context.Background(), changed))
	assert.Len(t, l.written.bySum, len(fleet.Clusters), "one record per object once every write went through")
	for id, s := range l.known {
		r, ok := l.written.bySum[s.record]
		if assert.True(t, ok, id) {
			assert.Equal(t, id, identity(r.Source, r.ID))
		}
	}
}

// TestEditedRecordIsNotServedAndWrittenAgain: a record the leader did not
// write (a deposed leader's late write, a hand edit) does not add up to
// the sums, so no reader serves it, and the leader's next save writes its
// own record again, so that the ledger adds up again.
func TestEditedRecordIsNotServedAndWrittenAgain(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	complete := func(b inventory.Book) bool { return len(b.Clusters) == 4 }
	l := c.ledger(t, "owner-1")
	b := ledgertest.Fleet(3)
	require.NoError(t, l.Save(ctx, b))
	books := watchOn(t, l)
	nextBook(t, books, complete)
	edited := b.Clusters[1]
	edited.Missed = 7 // as a deposed leader's late write, or a hand edit
	var name string
	for _, n := range c.profileNames(t) {
		have, err := recordOf(c.profile(t, n))
		require.NoError(t, err)
		if have.ID == edited.ID {
			name = n
			c.setRecord(t, n, string(mustJSON(t, edited)))
		}
	}
	deadline := time.After(2 * time.Second)
	for waiting := true; waiting; {
		select {
		case got := <-books:
			require.NotEqual(t, 7, got.Clusters[1].Missed, "a record the leader's sums do not hold was served")
		case <-deadline:
			waiting = false
		}
	}
	require.NoError(t, l.Save(ctx, b), "the leader's next save")
	have, err := recordOf(c.profile(t, name))
	require.NoError(t, err)
	assert.Equal(t, 0, have.Missed, "the leader's record written again")
}
