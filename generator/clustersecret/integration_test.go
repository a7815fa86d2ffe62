package clustersecret

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestColdCreateSteadyStateAndDrift(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a", "b", "c")
	r := newReconciler(t, e, f)

	pass(t, r)
	assert.Equal(t, []string{sn("a"), sn("b"), sn("c")}, e.secretNames())
	assert.Equal(t, int64(3), e.counter.writes.Load())
	s := e.secrets()[0]
	assert.Equal(t, "cluster", s.Labels[LabelSecretType])
	assert.Equal(t, "test-owner", s.Labels[LabelOwner])
	assert.Equal(t, "acme", s.Labels["tenant"])
	assert.Equal(t, "https://a.example.com", string(s.Data["server"]))
	assert.JSONEq(t, `{"awsAuthConfig":{"clusterName":"a","roleARN":"arn:aws:iam::1:role/argocd"},"tlsClientConfig":{"insecure":false}}`, string(s.Data["config"]))

	// steady state: no list (the cache), zero writes
	e.counter.writes.Store(0)
	e.counter.lists.Store(0)
	ch := pass(t, r)
	assert.Equal(t, int64(0), e.counter.writes.Load(), "a pass with nothing to change writes nothing")
	assert.Equal(t, int64(0), e.counter.lists.Load(), "a pass reads the cache")
	assert.Equal(t, 3, ch.Unchanged)

	// drift: a person edits our server and deletes another Secret
	ctx := context.Background()
	edited := s.DeepCopy()
	edited.Data["server"] = []byte("https://hijacked.example.com")
	edited.Labels["added-by-hand"] = "kept"
	_, err := e.admin.CoreV1().Secrets(e.ns).Update(ctx, edited, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, e.admin.CoreV1().Secrets(e.ns).Delete(ctx, sn("b"), metav1.DeleteOptions{}))
	e.counter.writes.Store(0)
	pass(t, r)
	assert.Equal(t, int64(2), e.counter.writes.Load(), "one update, one create")
	got, err := e.admin.CoreV1().Secrets(e.ns).Get(ctx, sn("a"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "https://a.example.com", string(got.Data["server"]), "drift repaired")
	assert.Equal(t, "kept", got.Labels["added-by-hand"], "a person's label is kept")
	assert.Contains(t, e.secretNames(), sn("b"), "deleted Secret recreated")
}

// TestUpstreamRemovalFollowsTheInventory: a cluster that left upstream
// keeps its Secret until the inventory confirms its departure (two
// listings here), then the Secret goes at the next pass.
func TestUpstreamRemovalFollowsTheInventory(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "stays", "leaves")
	r := newReconciler(t, e, f)
	pass(t, r)
	require.Len(t, e.secrets(), 2)

	f.write("stays")
	require.NoError(t, f.refresh())
	ch := pass(t, r)
	assert.Empty(t, ch.Delete)
	assert.Len(t, e.secrets(), 2, "one missed listing is not enough")
	leaves, err := e.admin.CoreV1().Secrets(e.ns).Get(context.Background(), sn("leaves"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "absent", leaves.Labels[LabelPhase], "served from its last rendering, marked absent")

	pass(t, r) // no new listing: nothing more happens
	assert.Len(t, e.secrets(), 2)

	time.Sleep(5 * time.Millisecond) // a later listing start time
	require.NoError(t, f.refresh())
	ch = pass(t, r)
	assert.Equal(t, []string{sn("leaves")}, names(ch.Delete), "departure confirmed")
	assert.Equal(t, []string{sn("stays")}, e.secretNames())
}

func TestFailingSourceDeletesNothing(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a", "b")
	r := newReconciler(t, e, f, func(c *Config) { c.Prune.AfterListings = 1 })
	pass(t, r)
	require.Len(t, e.secrets(), 2)

	require.NoError(t, os.WriteFile(f.path, []byte("clusters: [ broken"), 0o600))
	for range 5 {
		require.Error(t, f.refresh())
		time.Sleep(2 * time.Millisecond)
		pass(t, r)
	}
	assert.Len(t, e.secrets(), 2, "a failing source never prunes")

	// a truncated file (no clusters key) is a failure too, not "no clusters"
	require.NoError(t, os.WriteFile(f.path, nil, 0o600))
	require.Error(t, f.refresh())
	pass(t, r)
	assert.Len(t, e.secrets(), 2)
}

func TestForeignSecretsUntouched(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sameName := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: sn("a"), Namespace: e.ns,
		Labels: map[string]string{LabelSecretType: "cluster"}},
		StringData: map[string]string{"name": "hand-made-a", "server": "https://elsewhere.example.com", "config": "{}"}}
	sameServer := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hand-made-b", Namespace: e.ns,
		Labels: map[string]string{LabelSecretType: "cluster"}},
		StringData: map[string]string{"name": "b", "server": "https://b.example.com", "config": "{}"}}
	unlabelledSameName := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: sn("c"), Namespace: e.ns},
		StringData: map[string]string{"note": "not a cluster Secret at all"}}
	for _, s := range []*corev1.Secret{sameName, sameServer, unlabelledSameName} {
		_, err := e.admin.CoreV1().Secrets(e.ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	before := map[string]string{}
	for _, s := range e.secrets() {
		before[s.Name] = s.ResourceVersion
	}

	f := newFleet(t, "a", "b", "c", "d")
	r := newReconciler(t, e, f, func(c *Config) { c.Prune.AfterListings = 1 })
	ch := pass(t, r)
	assert.ElementsMatch(t, []Clash{{Cluster: "a", Secret: sn("a"), By: "name"}, {Cluster: "b", Secret: "hand-made-b", By: "server"},
		{Cluster: "c", Secret: sn("c"), By: "name"}}, ch.Clashes)
	for _, s := range e.secrets() {
		if rv, ok := before[s.Name]; ok {
			assert.Equal(t, rv, s.ResourceVersion, "%s untouched", s.Name)
		}
	}
	c, err := e.admin.CoreV1().Secrets(e.ns).Get(ctx, sn("c"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "not a cluster Secret at all", string(c.Data["note"]), "create over a foreign Secret is refused by the API and we leave it")
	assert.Contains(t, e.secretNames(), sn("d"))
	assert.Len(t, r.Status().Clashes, 3, "a name clash found at create time is reported too")

	// everything gone upstream, sync policy, departure confirmed: still only ours go
	f.write()
	require.NoError(t, f.refresh())
	require.NoError(t, f.refresh())
	pass(t, r)
	assert.ElementsMatch(t, []string{sn("a"), "hand-made-b"}, e.secretNames())
}

func TestTwoOwnersSideBySide(t *testing.T) {
	e := newEnv(t)
	fa, fb := newFleet(t, "shared", "only-a"), newFleet(t, "only-b")
	ra := newReconciler(t, e, fa, func(c *Config) { c.OwnerID, c.Prefix, c.Prune.AfterListings = "owner-a", "a", 1 })
	rb := newReconciler(t, e, fb, func(c *Config) { c.OwnerID, c.Prefix, c.Prune.AfterListings = "owner-b", "b", 1 })
	pass(t, ra)
	pass(t, rb)
	an := func(name string) string { return SecretName("a", "fleet", name, name) }
	bn := func(name string) string { return SecretName("b", "fleet", name, name) }
	assert.ElementsMatch(t, []string{an("shared"), an("only-a"), bn("only-b")}, e.secretNames())

	// b now lists "shared" too: same server as a's Secret → b skips it
	fb.write("only-b", "shared")
	require.NoError(t, fb.refresh())
	ch := pass(t, rb)
	assert.Equal(t, []Clash{{Cluster: "shared", Secret: an("shared"), By: "server"}}, ch.Clashes)

	// a's fleet empties: a deletes its own Secrets only
	fa.write()
	require.NoError(t, fa.refresh())
	require.NoError(t, fa.refresh())
	pass(t, ra)
	assert.Equal(t, []string{bn("only-b")}, e.secretNames())
}

func TestDryRunWritesNothing(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a", "b")
	r := newReconciler(t, e, f, func(c *Config) { c.DryRun = true })
	ch := pass(t, r)
	assert.Len(t, ch.Create, 2, "the plan is computed")
	assert.Equal(t, int64(0), e.counter.writes.Load())
	assert.Empty(t, e.secrets())
}

func TestLeaderHandover(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a")
	le := func(id string) lease.Config {
		// the handover is a release, not an expiry: long timings keep a
		// slow apiserver from costing the leader its Lease mid-test
		return lease.Config{Name: "argocd-cluster-discovery", Identity: id,
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 200 * time.Millisecond}
	}
	terms1, terms2 := &termCounter{}, &termCounter{}
	r1 := newReconciler(t, e, f, func(c *Config) { c.Issuers = map[string]sources.TokenIssuer{"other": terms1} })
	r2 := newReconciler(t, e, f, func(c *Config) { c.Issuers = map[string]sources.TokenIssuer{"other": terms2} })
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = r1.RunLeading(ctx1, e.client, le("one")) }()
	require.Eventually(t, func() bool { return r1.Status().Leader }, 10*time.Second, 20*time.Millisecond)
	go func() { defer wg.Done(); _ = r2.RunLeading(ctx2, e.client, le("two")) }()
	require.Eventually(t, func() bool { return len(e.secrets()) == 1 }, 10*time.Second, 20*time.Millisecond)
	time.Sleep(time.Second)
	assert.False(t, r2.Status().Leader, "one leader at a time")
	assert.True(t, r2.Status().LastPass.IsZero(), "the follower made no pass")

	cancel1() // the leader stops and releases the lease
	require.Eventually(t, func() bool { return r2.Status().Leader }, 15*time.Second, 50*time.Millisecond)
	assert.False(t, r1.Status().Leader)
	f.write("a", "new")
	require.NoError(t, f.refresh())
	require.Eventually(t, func() bool { return len(e.secrets()) == 2 }, 10*time.Second, 20*time.Millisecond, "the new leader writes")
	cancel2()
	wg.Wait()
	assert.Equal(t, int32(1), terms1.n.Load(), "each term starts by adopting the tokens our Secrets hold (sources.TokenKeeper)")
	assert.Equal(t, int32(1), terms2.n.Load())
}

// termCounter is a sources.TokenKeeper that counts its new terms.
type termCounter struct{ n atomic.Int32 }

func (c *termCounter) IssueToken(context.Context, string) (string, error) {
	return "", errors.New("unused")
}
func (c *termCounter) ReleaseToken(context.Context, string) error { return nil }
func (c *termCounter) AdoptTokens(context.Context, string, map[string]string) error {
	c.n.Add(1)
	return nil
}
func (c *termCounter) TokenWritten(string, string)                       {}
func (c *termCounter) SweepTokens(context.Context) error                 { return nil }
func (c *termCounter) RevokeTokens(context.Context, string) (int, error) { return 0, nil }

// TestLostLeaseStopsWrites: a leader frozen past its lease wakes up with
// its context not cancelled yet (client-go has not noticed): the pass
// reads and plans, and the write fence stops every write.
func TestLostLeaseStopsWrites(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a", "b")
	r := newReconciler(t, e, f)
	ctx := lease.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond), nil)
	ch, err := r.Pass(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the leader lease was not renewed")
	assert.Len(t, ch.Create, 2, "the pass got as far as its plan")
	assert.Empty(t, e.secrets())
	assert.Equal(t, int64(0), e.counter.writes.Load())

	// within its lease, the same pass writes
	ch, err = r.Pass(lease.WithDeadline(context.Background(), time.Now().Add(time.Minute), nil))
	require.NoError(t, err)
	assert.Len(t, ch.Create, 2)
	assert.Len(t, e.secrets(), 2)
}

func TestBearerTokenFromSecretReference(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.admin.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "aro-token", Namespace: e.ns},
		StringData: map[string]string{"token": "sha256~openshift-token\n"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	f := newFleet(t, "aro")
	r := newReconciler(t, e, f, func(c *Config) {
		c.Credentials = map[string]CredentialOverride{"fleet": {BearerToken: &sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "aro-token", Key: "token"}}}}
	})
	pass(t, r)
	s, err := e.admin.CoreV1().Secrets(e.ns).Get(ctx, sn("aro"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"bearerToken":"sha256~openshift-token","tlsClientConfig":{"insecure":false}}`, string(s.Data["config"]))

	// a missing token Secret holds the cluster: not created, not deleted
	require.NoError(t, e.admin.CoreV1().Secrets(e.ns).Delete(ctx, "aro-token", metav1.DeleteOptions{}))
	_, err = e.admin.CoreV1().Secrets(e.ns).Get(ctx, sn("aro"), metav1.GetOptions{})
	require.NoError(t, err)
	ch := pass(t, r)
	assert.Empty(t, ch.Delete)
	assert.Equal(t, []string{"aro"}, r.Status().Held)
	_, err = e.admin.CoreV1().Secrets(e.ns).Get(ctx, sn("aro"), metav1.GetOptions{})
	assert.False(t, apierrors.IsNotFound(err))
}

// TestCountdownFollowsListingsNotResyncs: a cluster that left while the
// service was down is unknown to the new process; its Secret counts down
// over complete listings, and with a long resync unchanged listings still
// advance the countdown, so it is pruned after AfterListings listings.
func TestCountdownFollowsListingsNotResyncs(t *testing.T) {
	e := newEnv(t)
	before := newFleet(t, "stays", "leaves")
	pass(t, newReconciler(t, e, before))
	require.Len(t, e.secrets(), 2)
	before.write("stays")
	f := fleetAt(t, before.path) // a restart: this process never saw "leaves"
	r := newReconciler(t, e, f, func(c *Config) { c.Prune.AfterListings, c.Resync = 3, time.Hour })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.RunWithoutElection(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return len(e.secrets()) == 2 }, 10*time.Second, 10*time.Millisecond)

	// the listing the reconciler starts from lacks "leaves": the first
	// miss; each later listing is the next (counting from the test's own
	// first refresh made the test pass or fail on the reconciler's speed)
	missed := func(n int) func() bool {
		return func() bool { st := r.Status(); return len(st.Pending) == 1 && st.Pending[0].Missed == n }
	}
	require.Eventually(t, missed(1), 10*time.Second, 10*time.Millisecond, "the listing it started from counted")
	for i := 2; i <= 3; i++ {
		time.Sleep(20 * time.Millisecond) // listings are told apart by their time
		require.NoError(t, f.refresh())
		if i < 3 {
			require.Eventually(t, missed(i), 10*time.Second, 10*time.Millisecond, "listing %d counted", i)
			assert.Len(t, e.secrets(), 2)
		}
	}
	require.Eventually(t, func() bool { return len(e.secrets()) == 1 }, 10*time.Second, 10*time.Millisecond, "pruned after 3 listings, long before a resync")
	assert.Equal(t, []string{sn("stays")}, e.secretNames())
}

// TestServedBeforeNamesOwnedSecrets: what seeds an empty ledger at an
// upgrade is the identities of the clusters whose Secrets this owner
// wrote, per source; another owner's Secrets and another source's are not.
func TestServedBeforeNamesOwnedSecrets(t *testing.T) {
	e := newEnv(t)
	fa, fb := newFleet(t, "one", "two", "three"), newFleet(t, "other")
	pass(t, newReconciler(t, e, fa, func(c *Config) { c.OwnerID, c.Prefix = "owner-a", "a" }))
	pass(t, newReconciler(t, e, fb, func(c *Config) { c.OwnerID, c.Prefix = "owner-b", "b" }))
	seed := ServedBefore(e.admin, e.ns, "owner-a")
	ids, err := seed(context.Background(), "fleet")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"one", "two", "three"}, ids)
	ids, err = seed(context.Background(), "elsewhere")
	require.NoError(t, err)
	assert.Empty(t, ids)
	_, err = ServedBefore(e.admin, "no-such-namespace-"+e.ns, "owner-a")(context.Background(), "fleet")
	require.NoError(t, err, "no Secrets is no error")
}

// TestStatusSaysWhyItDoesNotLead: a replica whose ServiceAccount may not
// touch the Lease says why in /status, instead of leader: false alone.
func TestStatusSaysWhyItDoesNotLead(t *testing.T) {
	e := newEnv(t)
	f := newFleet(t, "a")
	r := newReconciler(t, e, f)
	nobody := rest.CopyConfig(restConfig)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:argocd:nobody"}
	client, err := kubernetes.NewForConfig(nobody)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.RunLeading(ctx, client, lease.Config{Name: "argocd-cluster-discovery", Identity: "one",
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond})
	}()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return strings.Contains(r.Status().LeaseError, "forbidden") }, 10*time.Second, 20*time.Millisecond)
	assert.False(t, r.Status().Leader)
}
