package clusterprofile

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

// What the ledger must not write: past its lease, another owner's
// ConfigMap, another owner's (or another cluster's) ClusterProfile.

// TestNoWriteOnceTheLeaseMayHavePassed holds the lease fence of the
// ledger's object writes (lease.Check before each): a leader frozen past
// its lease, its context not cancelled yet, writes nothing, neither the
// creates of a cold start nor the applies and deletes of a changed book,
// and its save fails saying why.
func TestNoWriteOnceTheLeaseMayHavePassed(t *testing.T) {
	expired := lease.WithDeadline(context.Background(), time.Now().Add(-time.Second), nil)
	changed := ledgertest.Fleet(2) // prod-02 and prod-03 departed, prod-00 departing
	changed.Clusters[1].Missed, changed.Clusters[1].MissingSince = 1, time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		before *inventory.Book // saved while the lease was held
		save   inventory.Book
	}{
		{name: "a cold start creates nothing", save: ledgertest.Fleet(3)},
		{name: "a changed book applies and deletes nothing", before: new(ledgertest.Fleet(4)), save: changed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			l := c.ledger(t, "owner-1")
			if tc.before != nil {
				require.NoError(t, l.Save(context.Background(), *tc.before))
			}
			stored := c.versions(t)
			c.counter.writes.Store(0)
			assert.ErrorContains(t, l.Save(expired, tc.save), "lease was not renewed")
			assert.Zero(t, c.counter.writes.Load(), "writes sent past the lease")
			assert.Equal(t, stored, c.versions(t), "what the apiserver holds")
		})
	}
}

// TestEveryWriteOfASaveChecksTheLease: a ClusterProfile write checks the
// lease itself (a put may send a create, a read and an apply after the
// one check of its turn), and so does the ConfigMap's patch after its
// create and read: the lease passing between two requests of one step
// stops the second.
func TestEveryWriteOfASaveChecksTheLease(t *testing.T) {
	c := newCluster(t)
	l := c.ledger(t, "owner-1")
	require.NoError(t, l.Save(context.Background(), ledgertest.Fleet(2)))
	name := c.profileNames(t)[0]
	c.counter.writes.Store(0)
	expired := lease.WithDeadline(context.Background(), time.Now().Add(-time.Second), nil)
	require.ErrorContains(t, l.apply(expired, name, "", []byte(`{}`)), "lease was not renewed")

	// the ConfigMap: the first check passes, the one before the patch
	// does not
	checks := 0
	deadline := time.Now().Add(time.Hour)
	passing := lease.WithDeadline(context.Background(), deadline, func() time.Time {
		if checks++; checks > 1 {
			return deadline
		}
		return time.Now()
	})
	l.mu.Lock()
	l.sources = []byte("stale") // not what the ConfigMap holds: a patch is due
	err := l.saveSources(passing, []inventory.SourceRecord{{Name: "eks"}}, map[string]int{}, map[string]uint64{}, newSaveLog())
	l.mu.Unlock()
	require.ErrorContains(t, err, "lease was not renewed")
	assert.Zero(t, c.counter.writes.Load(), "writes sent past the lease")
}

// TestConfigMapOfAnotherOwnerIsNotWritten holds the owner check of the
// ConfigMap write: a ConfigMap under the ledger's name that another owner
// holds (relabelled since we wrote it, or created by another owner since
// we loaded) is not patched; the save fails saying it is not ours.
func TestConfigMapOfAnotherOwnerIsNotWritten(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		take func(t *testing.T, c *cluster, l *Ledger) // makes the ConfigMap another owner's
	}{
		{name: "relabelled after we wrote it", take: func(t *testing.T, c *cluster, l *Ledger) {
			require.NoError(t, l.Save(ctx, ledgertest.Fleet(2)))
			patch := []byte(`{"metadata":{"labels":{"` + LabelOwner + `":"owner-2"}}}`)
			_, err := c.admin.CoreV1().ConfigMaps(c.ns).Patch(ctx, l.opts.ConfigMap, types.MergePatchType, patch, metav1.PatchOptions{})
			require.NoError(t, err)
		}},
		{name: "created by another owner after we loaded", take: func(t *testing.T, c *cluster, l *Ledger) {
			_, err := l.Load(ctx)
			require.NoError(t, err)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: l.opts.ConfigMap, Namespace: c.ns,
				Labels: map[string]string{LabelManager: Manager, LabelOwner: "owner-2"}},
				Data: map[string]string{SourcesKey: "[]", CountsKey: `{"rancher":7}`}}
			_, err = c.admin.CoreV1().ConfigMaps(c.ns).Create(ctx, cm, metav1.CreateOptions{})
			require.NoError(t, err)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			l := c.ledger(t, "owner-1")
			tc.take(t, c, l)
			before := c.configMapData(t, l)
			assert.ErrorContains(t, l.Save(ctx, ledgertest.Fleet(3)), "is not ours")
			assert.Equal(t, before, c.configMapData(t, l), "the other owner's ConfigMap")
		})
	}
}

// TestForeignClusterProfileIsNeverAdopted holds the ledger's adoption
// check (ours): a create that finds its name taken adopts the object only
// if it is ours, by our owner and manager labels and a record of the same
// cluster. Any other object is left as it is, and the save reports an
// error for that record.
func TestForeignClusterProfileIsNeverAdopted(t *testing.T) {
	ctx := context.Background()
	book := ledgertest.Fleet(1)
	r := &book.Clusters[1] // prod-00
	require.Equal(t, "c-prod-00", r.ID)
	other := ledgertest.Fleet(2).Clusters[2] // prod-01
	ourLabels := map[string]string{LabelManager: Manager, LabelOwner: "owner-1", LabelSource: r.Source}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		record *inventory.Record // nil: no record annotation
	}{
		{name: "another owner's", labels: map[string]string{LabelManager: Manager, LabelOwner: "owner-2", LabelSource: r.Source}, record: r},
		{name: "our labels, another cluster's record", labels: ourLabels, record: &other},
		{name: "our labels, no record", labels: ourLabels},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			l := c.ledger(t, "owner-1")
			_, err := l.Load(ctx) // before the object: a ledger that knows of it would not create it
			require.NoError(t, err)
			name := objectName("owner-1", r)
			c.createProfile(t, name, tc.labels, tc.record)
			before, err := c.adminDy.Resource(Resource).Namespace(c.ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)

			assert.ErrorContains(t, l.Save(ctx, book), "create clusterprofile "+name)
			after, err := c.adminDy.Resource(Resource).Namespace(c.ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, before.GetLabels(), after.GetLabels())
			assert.Equal(t, before.GetAnnotations(), after.GetAnnotations())
			assert.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "the object was written")
		})
	}
}

// versions returns the resource version of every ClusterProfile and
// ConfigMap of the cluster's namespace, by kind and name.
func (c *cluster) versions(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	profiles, err := c.adminDy.Resource(Resource).Namespace(c.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range profiles.Items {
		out["clusterprofile/"+p.GetName()] = p.GetResourceVersion()
	}
	cms, err := c.admin.CoreV1().ConfigMaps(c.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, cm := range cms.Items {
		out["configmap/"+cm.Name] = cm.ResourceVersion
	}
	return out
}

// configMapData reads the data of l's ConfigMap.
func (c *cluster) configMapData(t *testing.T, l *Ledger) map[string]string {
	t.Helper()
	cm, err := c.admin.CoreV1().ConfigMaps(c.ns).Get(context.Background(), l.opts.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	return cm.Data
}

// createProfile creates, as someone else would, a ClusterProfile named
// name with labels and, unless r is nil, r's record.
func (c *cluster) createProfile(t *testing.T, name string, labels map[string]string, r *inventory.Record) {
	t.Helper()
	annotations := map[string]string{}
	if r != nil {
		annotations[AnnotationRecord] = string(mustJSON(t, r))
	}
	c.createRaw(t, name, labels, annotations)
}

// createRaw creates a ClusterProfile named name with labels and
// annotations as they are.
func (c *cluster) createRaw(t *testing.T, name string, labels, annotations map[string]string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Resource.GroupVersion().String(), "kind": "ClusterProfile",
		"spec": map[string]any{"displayName": name, "clusterManager": map[string]any{"name": Manager}},
	}}
	obj.SetName(name)
	obj.SetLabels(labels)
	obj.SetAnnotations(annotations)
	_, err := c.adminDy.Resource(Resource).Namespace(c.ns).Create(context.Background(), obj, metav1.CreateOptions{})
	require.NoError(t, err)
}

// refusing opens the ledger of owner, counted as c.ledger's, whose
// requests that refuse matches fail before they reach the apiserver, as a
// request that timed out would.
func (c *cluster) refusing(t *testing.T, owner string, refuse func(*http.Request) bool) *Ledger {
	t.Helper()
	cfg := rest.CopyConfig(c.cfg)
	counted := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return refuser{next: counted(rt), refuse: refuse} }
	l, err := New(cfg, Options{Namespace: c.ns, OwnerID: owner})
	require.NoError(t, err)
	return l
}

type refuser struct {
	next   http.RoundTripper
	refuse func(*http.Request) bool
}

func (r refuser) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.refuse(req) {
		return nil, errors.New("the apiserver timed out")
	}
	return r.next.RoundTrip(req)
}
