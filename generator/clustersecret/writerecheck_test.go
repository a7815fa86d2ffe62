package clustersecret

// Writes that race another writer, on paths other than those of
// writepath_test.go: an update planned from Secrets listed from the API
// (no cache), and a delete planned for a cluster that left the selection.

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestRenameRacingATakeoverOfTheListedSecret protects the re-check of an
// update after a conflict: ownership and cluster id. The reconciler has
// no cache: each pass lists the Secrets from the API, and the first
// attempt of an update writes over the Secret as listed, without reading
// it again. Cluster id-1 is renamed upstream (a content update in place);
// just before that update reaches the API server, another writer changes
// the Secret. The API answers 409, the Secret is read again, and since it
// is no longer ours, or no longer id-1's, nothing more is sent: the other
// writer's change and the old cluster name stay.
func TestRenameRacingATakeoverOfTheListedSecret(t *testing.T) {
	cases := []struct {
		name     string
		takeOver func(*corev1.Secret)
		check    func(t *testing.T, got *corev1.Secret)
	}{
		{name: "adopted into a Helm release (managed-by: Helm)",
			takeOver: func(s *corev1.Secret) { s.Labels[LabelManagedBy] = "Helm" },
			check: func(t *testing.T, got *corev1.Secret) {
				assert.Equal(t, "Helm", got.Labels[LabelManagedBy], "the Secret is Helm's now")
			}},
		{name: "pointed at another cluster (cluster-id)",
			takeOver: func(s *corev1.Secret) { s.Annotations[AnnotationClusterID] = "id-9" },
			check: func(t *testing.T, got *corev1.Secret) {
				assert.Equal(t, "id-9", got.Annotations[AnnotationClusterID], "the Secret is id-9's now")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, r, rec, name := renamedUpstream(t)
			rec.onceBefore(http.MethodPut, name, func() { e.edit(name, tc.takeOver) })
			ch := pass(t, r)
			require.Len(t, ch.Update, 1)
			require.NotNil(t, ch.Update[0].Old.Full(), "planned from the API's list")

			var answers []int // of the updates sent, in order
			for _, w := range rec.sent(name) {
				if w.method == http.MethodPut {
					answers = append(answers, w.status)
				}
			}
			assert.Equal(t, []int{http.StatusConflict}, answers,
				"the API refused the update of the listed version, and no second update followed the read")
			got := e.get(name)
			tc.check(t, got)
			assert.Equal(t, "a", string(got.Data["name"]), "the rename was not written")
		})
	}
}

// TestDeleteRacingAPinOrAForeignRecreate protects the preconditions of a
// delete (the UID and resourceVersion the plan saw): cluster "dropped"
// leaves the selection and its Secret's countdown is reached at once
// (AfterListings 1). Between the plan and the delete, a person pins the
// Secret (a new resourceVersion), or another deployment deletes it and
// writes its own Secret under that name (a new UID). The delete is
// refused, and the Secret stays then and at the next pass.
func TestDeleteRacingAPinOrAForeignRecreate(t *testing.T) {
	cases := []struct {
		name      string
		meanwhile func(e *env, name string)
		check     func(t *testing.T, got *corev1.Secret)
	}{
		{name: "pinned by a person",
			meanwhile: func(e *env, name string) { e.edit(name, func(s *corev1.Secret) { s.Labels[LabelPin] = "true" }) },
			check: func(t *testing.T, got *corev1.Secret) {
				assert.Equal(t, "true", got.Labels[LabelPin])
			}},
		{name: "replaced by another deployment's Secret",
			meanwhile: func(e *env, name string) {
				secrets := e.admin.CoreV1().Secrets(e.ns)
				assert.NoError(e.t, secrets.Delete(context.Background(), name, metav1.DeleteOptions{}))
				_, err := secrets.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns,
					Labels: map[string]string{LabelSecretType: "cluster", LabelManagedBy: ManagedByValue, LabelOwner: "other-owner"}},
					StringData: map[string]string{"name": "theirs", "server": "https://theirs.example.com", "config": "{}"}}, metav1.CreateOptions{})
				assert.NoError(e.t, err)
			},
			check: func(t *testing.T, got *corev1.Secret) {
				assert.Equal(t, "other-owner", got.Labels[LabelOwner])
				assert.Equal(t, "theirs", string(got.Data["name"]))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := newFleet(t, "kept", "dropped")
			pass(t, newReconciler(t, e, f))
			r, rec := recordingReconciler(t, e, f, func(c *Config) {
				c.Prune.AfterListings = 1
				c.Select = func(c *sources.Cluster) bool { return c.Name != "dropped" }
			})
			name := sn("dropped")
			rec.onceBefore(http.MethodDelete, name, func() { tc.meanwhile(e, name) })

			ch := pass(t, r)
			require.Equal(t, []string{name}, names(ch.Delete), "the plan deletes it")
			if dels := rec.sent(name); assert.Len(t, dels, 1) {
				assert.Equal(t, http.StatusConflict, dels[0].status, "the API refused the delete")
			}
			tc.check(t, e.get(name))
			ch = pass(t, r)
			assert.Empty(t, names(ch.Delete), "nor deleted by the next pass")
			tc.check(t, e.get(name))
			assert.Equal(t, []string{name, sn("kept")}, e.secretNames())
		})
	}
}

// TestUpdateRetryStopsAtTheFence: the lease is checked before each write,
// the retry of an update after a conflict included. Cluster id-1 is
// renamed upstream; just before the update reaches the API server another
// writer changes the Secret (409) and the leader's lease passes (a process
// frozen past it). The Secret is read again, but no second update is sent:
// the pass ends with the fence's error and the rename is not written.
func TestUpdateRetryStopsAtTheFence(t *testing.T) {
	e, r, rec, name := renamedUpstream(t)
	t0 := time.Now()
	clock, late := lateClock(t0)
	rec.onceBefore(http.MethodPut, name, func() {
		e.edit(name, func(s *corev1.Secret) { s.Labels["team"] = "sre" })
		late.Store(true)
	})
	_, err := r.Pass(lease.WithDeadline(context.Background(), t0.Add(time.Minute), clock))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the leader lease was not renewed")
	var answers []int // of the updates sent, in order
	for _, w := range rec.sent(name) {
		if w.method == http.MethodPut {
			answers = append(answers, w.status)
		}
	}
	assert.Equal(t, []int{http.StatusConflict}, answers, "no update after the lease passed")
	assert.Equal(t, "a", string(e.get(name).Data["name"]), "the rename was not written")
}

// renamedUpstream is a reconciler with no informer (Secrets listed per
// pass) whose cluster id-1, named a, has its Secret and has just been
// renamed a-renamed upstream: the next pass updates name in place.
func renamedUpstream(t *testing.T) (e *env, r *Reconciler, rec *recorder, name string) {
	t.Helper()
	e = newEnv(t)
	f := membersFleet(t, member{name: "a", id: "id-1", env: "prod"})
	client, rec := recordingClient(t, 0)
	r, err := New(testConfig(e), client, f.inv, nil, nil)
	require.NoError(t, err)
	require.Len(t, pass(t, r).Create, 1)
	writeMembers(t, f.path, member{name: "a-renamed", id: "id-1", host: "a", env: "prod"})
	require.NoError(t, f.refresh())
	return e, r, rec, SecretName("cluster", "fleet", "a", "id-1")
}

// lateClock is the clock of a lease fence (lease.WithDeadline): t0 until
// late is set, an hour later from then on.
func lateClock(t0 time.Time) (func() time.Time, *atomic.Bool) {
	late := &atomic.Bool{}
	return func() time.Time {
		if late.Load() {
			return t0.Add(time.Hour)
		}
		return t0
	}, late
}
