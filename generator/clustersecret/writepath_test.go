package clustersecret

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// The tests of this file race the reconciler's writes against another
// writer on the real kube-apiserver: a recording RoundTripper runs the
// other writer's change (through the admin client) just before our write
// is sent, so the write meets a newer object than the one the plan read.

// racingUpdate is an update planned from the cache while another writer
// changes the Secret before it is sent.
type racingUpdate struct {
	name string
	// countdown: the planned update is a prune countdown (the cluster
	// left the selection) rather than a content update (drift repair)
	countdown bool
	meanwhile func(*corev1.Secret)
	// puts is the number of our PUTs: the one refused with 409, plus
	// the merged retry when the Secret is still ours
	puts  int
	check func(t *testing.T, got *corev1.Secret)
}

// theirServer is the server another writer sets.
const theirServer = "https://theirs.example.com"

// racingUpdates are the cases of TestUpdateRacingAnotherWriter.
var racingUpdates = []racingUpdate{
	{name: "another owner took the Secret", puts: 1,
		meanwhile: func(s *corev1.Secret) {
			s.Labels[LabelOwner] = "someone-else"
			s.Data["server"] = []byte(theirServer)
		},
		check: func(t *testing.T, got *corev1.Secret) {
			assert.Equal(t, "someone-else", got.Labels[LabelOwner])
			assert.Equal(t, theirServer, string(got.Data["server"]))
		}},
	{name: "managed-by label removed: a person took the Secret over", puts: 1,
		meanwhile: func(s *corev1.Secret) {
			delete(s.Labels, LabelManagedBy)
			s.Data["server"] = []byte(theirServer)
		},
		check: func(t *testing.T, got *corev1.Secret) {
			assert.NotContains(t, got.Labels, LabelManagedBy)
			assert.Equal(t, theirServer, string(got.Data["server"]))
		}},
	{name: "now another cluster's Secret (cluster-id)", puts: 1,
		meanwhile: func(s *corev1.Secret) {
			s.Annotations[AnnotationClusterID] = "another-cluster"
			s.Data["server"] = []byte(theirServer)
		},
		check: func(t *testing.T, got *corev1.Secret) {
			assert.Equal(t, "another-cluster", got.Annotations[AnnotationClusterID])
			assert.Equal(t, theirServer, string(got.Data["server"]))
		}},
	{name: "still ours, a person added a label and a key: merged again", puts: 2,
		meanwhile: func(s *corev1.Secret) {
			s.Labels["added-by-hand"] = "yes"
			s.Data["shard"] = []byte("3")
		},
		check: func(t *testing.T, got *corev1.Secret) {
			assert.Equal(t, "yes", got.Labels["added-by-hand"], "the person's change survives")
			assert.Equal(t, "3", string(got.Data["shard"]))
			assert.Equal(t, "https://a.example.com", string(got.Data["server"]), "our change is merged into the fresh copy")
		}},
	{name: "countdown: a person edited the Secret meanwhile", countdown: true, puts: 1,
		meanwhile: func(s *corev1.Secret) { s.Labels["added-by-hand"] = "yes" },
		check: func(t *testing.T, got *corev1.Secret) {
			assert.Equal(t, "yes", got.Labels["added-by-hand"], "the person's change survives")
			assert.NotContains(t, got.Annotations, AnnotationMissingSince, "the countdown is left to the next pass")
		}},
}

// TestUpdateRacingAnotherWriter: an update computed from an old read
// carries the resourceVersion read, so a change made meanwhile by someone
// else makes the API answer 409; the retry re-reads the Secret and writes
// nothing if it is no longer ours (owner or managed-by label) or now says
// it is another cluster's (cluster-id), merges again if it still is ours,
// and never retries a countdown. In every case the other writer's change
// survives.
func TestUpdateRacingAnotherWriter(t *testing.T) {
	for _, tc := range racingUpdates {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := newFleet(t, "a")
			pass(t, newReconciler(t, e, f))
			var r *Reconciler
			var rec *recorder
			if tc.countdown {
				// the cluster leaves the selection: its Secret starts counting down
				r, rec = recordingReconciler(t, e, f, func(c *Config) {
					c.Prune.AfterListings = 3
					c.Select = func(*sources.Cluster) bool { return false }
				})
			} else {
				// drift: the plan repairs our server URL
				e.edit(sn("a"), func(s *corev1.Secret) { s.Data["server"] = []byte("https://drifted.example.com") })
				r, rec = recordingReconciler(t, e, f)
			}
			rec.onceBefore(http.MethodPut, sn("a"), func() { e.edit(sn("a"), tc.meanwhile) })

			ch := pass(t, r)
			require.Len(t, ch.Update, 1)
			planned := ch.Update[0]
			assert.Equal(t, map[bool]string{false: "content", true: "countdown"}[tc.countdown], planned.Reason)
			assert.Nil(t, planned.Old.Full(), "planned from the cache: the update reads the Secret first")

			puts := rec.sent(sn("a"))
			require.Len(t, puts, tc.puts)
			assert.Equal(t, http.StatusConflict, puts[0].status, "the API refused the update computed from the old read")
			var sent corev1.Secret
			decode(t, puts[0].body, &sent)
			assert.Equal(t, planned.Old.ResourceVersion, sent.ResourceVersion, "the update sent carries the version read")
			if tc.puts > 1 {
				assert.Equal(t, http.StatusOK, puts[1].status)
			}
			tc.check(t, e.get(sn("a")))
		})
	}
}

// TestDeleteRacingAnotherWriter: a delete carries the UID and
// resourceVersion the plan saw as preconditions, so a Secret modified (new
// resourceVersion) or deleted and re-created (new UID) between the plan
// and the delete is not deleted.
func TestDeleteRacingAnotherWriter(t *testing.T) {
	cases := []struct {
		name      string
		meanwhile func(e *env)
		deleted   bool
	}{
		{name: "nothing meanwhile: deleted", meanwhile: func(*env) {}, deleted: true},
		{name: "modified meanwhile (new resourceVersion)", meanwhile: func(e *env) {
			e.edit(sn("leaves"), func(s *corev1.Secret) { s.Annotations["note"] = "keep me" })
		}},
		{name: "re-created meanwhile (new UID)", meanwhile: func(e *env) {
			ctx, secrets := context.Background(), e.admin.CoreV1().Secrets(e.ns)
			old, err := secrets.Get(ctx, sn("leaves"), metav1.GetOptions{})
			if !assert.NoError(e.t, err) {
				return
			}
			assert.NoError(e.t, secrets.Delete(ctx, old.Name, metav1.DeleteOptions{}))
			fresh := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: old.Namespace,
				Labels: old.Labels, Annotations: old.Annotations}, Data: old.Data, Type: old.Type}
			_, err = secrets.Create(ctx, fresh, metav1.CreateOptions{})
			assert.NoError(e.t, err)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := newFleet(t, "stays", "leaves")
			r, rec := recordingReconciler(t, e, f)
			pass(t, r)
			f.write("stays")
			for range 2 { // the inventory confirms the departure
				time.Sleep(5 * time.Millisecond)
				require.NoError(t, f.refresh())
			}
			rec.onceBefore(http.MethodDelete, sn("leaves"), func() { tc.meanwhile(e) })

			ch := pass(t, r)
			require.Equal(t, []string{sn("leaves")}, names(ch.Delete), "the plan deletes it")
			planned := ch.Delete[0]
			dels := rec.sent(sn("leaves"))
			require.Len(t, dels, 1)
			if tc.deleted {
				assert.Equal(t, []string{sn("stays")}, e.secretNames())
			} else {
				assert.Equal(t, http.StatusConflict, dels[0].status, "the API refused the delete")
				assert.Equal(t, []string{sn("leaves"), sn("stays")}, e.secretNames(), "the changed Secret is not deleted")
			}

			// the request itself names what the plan saw (on the API server
			// a re-created Secret also has a new resourceVersion, so only
			// the request shows that the UID is checked too)
			var opts metav1.DeleteOptions
			decode(t, dels[0].body, &opts)
			require.NotNil(t, opts.Preconditions, "the delete carries preconditions")
			if assert.NotNil(t, opts.Preconditions.UID, "precondition on the UID the plan saw") {
				assert.Equal(t, planned.UID, *opts.Preconditions.UID)
			}
			if assert.NotNil(t, opts.Preconditions.ResourceVersion, "precondition on the resourceVersion the plan saw") {
				assert.Equal(t, planned.ResourceVersion, *opts.Preconditions.ResourceVersion)
			}
		})
	}
}

// TestPinnedSecretSurvivesDeparture: a Secret a person pinned stays when
// its cluster's departure is confirmed, under the sync policy.
func TestPinnedSecretSurvivesDeparture(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "stays", "leaves", "pinned")
	r := newReconciler(t, e, f)
	pass(t, r)
	e.edit(sn("pinned"), func(s *corev1.Secret) { s.Labels[LabelPin] = "true" })
	f.write("stays")
	for range 2 {
		time.Sleep(5 * time.Millisecond)
		require.NoError(t, f.refresh())
	}
	ch := pass(t, r)
	assert.Equal(t, []string{sn("leaves")}, names(ch.Delete), "the unpinned Secret goes")
	assert.Equal(t, []string{sn("pinned"), sn("stays")}, e.secretNames(), "the pinned Secret stays")
}

// TestNoPruneWhileANameConflictHolds: after a restart, a second source
// lists a cluster of the same name (another server) as the one our Secret
// is for. Neither is established, so the name is served to none; the
// Secret is not pruned however many listings pass, while a Secret whose
// cluster is really gone is pruned by the same passes.
func TestNoPruneWhileANameConflictHolds(t *testing.T) {
	e := newEnv(t)
	before := newFleet(t, "a", "b", "gone")
	pass(t, newReconciler(t, e, before))
	require.Len(t, e.secrets(), 3)

	before.write("a", "b")
	otherPath := filepath.Join(t.TempDir(), "other.yaml")
	require.NoError(t, os.WriteFile(otherPath, []byte("clusters:\n  - name: a\n    server: https://a.other.example.com\n"), 0o600))
	fleetSrc, err := static.New(static.Config{File: before.path}, "")
	require.NoError(t, err)
	otherSrc, err := static.New(static.Config{File: otherPath}, "")
	require.NoError(t, err)
	inv, err := inventory.New([]inventory.SourceSpec{
		{Name: "fleet", Provider: sources.ProviderStatic, Source: fleetSrc, Interval: time.Hour, Timeout: 5 * time.Second},
		{Name: "other", Provider: sources.ProviderStatic, Source: otherSrc, Interval: time.Hour, Timeout: 5 * time.Second},
	}, inventory.Options{Departure: inventory.Departure{AfterListings: 1, GracePeriod: -1, MaxFraction: 1}})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(context.Background()))
	snap, _ := inv.SnapshotAndListings()
	require.Len(t, snap.Conflicts, 1)
	require.Equal(t, "a", snap.Conflicts[0].Name)
	require.Empty(t, snap.Conflicts[0].KeptSource, "the name is served to none")

	r := newReconciler(t, e, &fleet{t: t, path: before.path, inv: inv}, func(c *Config) { c.Prune.AfterListings = 1 })
	for i := range 3 {
		if i > 0 {
			time.Sleep(5 * time.Millisecond)
			require.NoError(t, inv.RefreshAll(context.Background()))
		}
		ch := pass(t, r)
		assert.NotContains(t, names(ch.Delete), sn("a"), "pass %d", i)
		assert.Empty(t, ch.Blocked)
	}
	assert.Equal(t, []string{sn("a"), sn("b")}, e.secretNames(), "the conflicted cluster's Secret stays, the gone one was pruned")
	assert.NotContains(t, e.get(sn("a")).Annotations, AnnotationMissingSince, "no countdown either")
}

// TestRealLeaseLossStopsWrites: the reconciler runs under leader election
// on the real API server and is part-way through a pass of 200 slowed
// creates when another holder takes the Lease. Once this process has
// observed the loss, no write starts, and none reaches the API server
// except one already in flight when the Lease was lost (Concurrency 1).
func TestRealLeaseLossStopsWrites(t *testing.T) {
	const total, concurrency = 200, 1
	e := newEnv(t)
	clusters := numbered("l%03d", total)
	f := newFleet(t, clusters...)
	client, rec := recordingClient(t, 25*time.Millisecond)
	r, err := New(defaulted(Config{Options: Options{Namespace: e.ns, OwnerID: "test-owner"}, Policy: PolicySync, Concurrency: concurrency}),
		client, f.inv, nil, nil, WithInformer(informerFor(t, client, e.ns)))
	require.NoError(t, err)
	// the Lease is renewed through an undelayed client
	leaseClient, err := kubernetes.NewForConfig(restConfig)
	require.NoError(t, err)
	le := lease.Config{Name: "argocd-cluster-discovery", Identity: "us",
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.RunLeading(ctx, leaseClient, le) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return len(rec.sent("")) >= 20 }, 20*time.Second, 5*time.Millisecond, "the pass is writing")
	require.True(t, r.Status().Leader)

	// another holder takes the Lease, with a renewed time and a long
	// duration: our next renewals fail
	leases := e.admin.CoordinationV1().Leases(e.ns)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(context.Background(), le.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr("intruder"), LeaseDurationSeconds: ptr(int32(3600)),
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: l.Spec.LeaseTransitions}
		_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		return err
	}))
	taken := time.Now()

	// the moment this process observes the loss
	var lost time.Time
	require.Eventually(t, func() bool {
		if r.Status().Leader {
			return false
		}
		lost = time.Now()
		return true
	}, 10*time.Second, time.Millisecond, "the loss is observed")
	time.Sleep(time.Second) // ~40 more writes, were the pass still running

	var before, inFlight, startedAfter int
	var firstAfter time.Duration
	for _, w := range rec.sent("") {
		switch {
		case w.entered.After(lost):
			if startedAfter++; startedAfter == 1 {
				firstAfter = w.entered.Sub(lost)
			}
		case !w.forwarded.IsZero() && w.forwarded.After(lost):
			inFlight++ // in flight when the loss was observed, and sent anyway
		default:
			before++
		}
	}
	t.Logf("Lease taken; loss observed %v later; %d writes before it, %d in flight sent after it, %d started after it",
		lost.Sub(taken).Round(time.Millisecond), before, inFlight, startedAfter)
	assert.Zero(t, startedAfter, "no write starts once the loss is observed (the first started %v after it)", firstAfter)
	assert.LessOrEqual(t, inFlight, concurrency, "only a write in flight at the loss may reach the server")
	assert.Less(t, len(e.secrets()), total, "the pass was stopped part-way")
	l, err := leases.Get(context.Background(), le.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "intruder", *l.Spec.HolderIdentity, "we did not take the Lease back")
}

// TestTokenResolverConcurrent: apply renders the Secrets it writes from
// several goroutines with the pass's token resolver, which reads each
// reference once.
func TestTokenResolverConcurrent(t *testing.T) {
	t.Setenv("CLUSTERSECRET_TEST_TOKEN", "t0ken")
	resolve, _ := (&Reconciler{}).tokenResolver(context.Background(), nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			v, err := resolve(sources.SecretRef{Env: "CLUSTERSECRET_TEST_TOKEN"})
			assert.NoError(t, err)
			assert.Equal(t, "t0ken", v)
		})
	}
	wg.Wait()
}

// TestTokenResolverReadsOncePerPass: a pass reads each token reference
// once however many Secrets use it, concurrently or not: an issued token
// is asked of its source once.
func TestTokenResolverReadsOncePerPass(t *testing.T) {
	iss := &issuer{issued: map[string]int{}}
	r := &Reconciler{cfg: Config{Issuers: map[string]sources.TokenIssuer{"fleet": iss}}}
	resolve, read := r.tokenResolver(context.Background(), nil)
	ref := sources.SecretRef{Issued: &sources.IssuedToken{Source: "fleet", Cluster: "c-a"}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			v, err := resolve(ref)
			assert.NoError(t, err)
			assert.Equal(t, "c-a-0", v)
		})
	}
	wg.Wait()
	assert.Equal(t, 1, iss.issued["c-a"], "asked once")
	assert.True(t, read())
	next, _ := r.tokenResolver(context.Background(), nil)
	_, err := next(ref)
	require.NoError(t, err)
	assert.Equal(t, 2, iss.issued["c-a"], "a new pass asks again")
}
