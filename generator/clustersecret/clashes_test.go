package clustersecret

// Clashes on the envtest control plane: a Secret the plan must not write
// over, whether foreign or ours for another cluster.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// member is a cluster of a fleet file with an id (none: its name), a host
// (its server is https://<host>.example.com; none: its name) and an env
// label.
type member struct{ name, id, host, env string }

// writeMembers writes the clusters file at path.
func writeMembers(t testing.TB, path string, ms ...member) {
	t.Helper()
	var b strings.Builder
	b.WriteString("clusters:\n")
	for _, m := range ms {
		host := m.host
		if host == "" {
			host = m.name
		}
		fmt.Fprintf(&b, "  - {name: %s, server: 'https://%s.example.com', labels: {env: %s}, auth: {aws: {clusterName: %s}}", m.name, host, m.env, m.name)
		if m.id != "" {
			fmt.Fprintf(&b, ", id: %s", m.id)
		}
		b.WriteString("}\n")
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
}

// membersFleet is a fleet over a new clusters file of ms.
func membersFleet(t testing.TB, ms ...member) *fleet {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clusters.yaml")
	writeMembers(t, path, ms...)
	return fleetAt(t, path)
}

// TestForeignSecretAtOurNameIsNeverCreatedOver protects "a foreign Secret
// under the desired name is a clash": a cluster Secret written by hand
// holds the name our Secret of cluster a would get (another server,
// another Argo CD name). The dry run's plan reports the clash by name and
// plans no create; the pass that writes sends no create at all (it does
// not leave the refusal to the API server), reports the clash, and the
// foreign Secret stays byte for byte as it was.
func TestForeignSecretAtOurNameIsNeverCreatedOver(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.admin.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: sn("a"), Namespace: e.ns, Labels: map[string]string{LabelSecretType: "cluster", "team": "platform"},
			Annotations: map[string]string{"note": "written by hand"}},
		StringData: map[string]string{"name": "legacy-a", "server": "https://legacy-a.example.com", "config": `{"bearerToken":"hand"}`},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	original := e.get(sn("a"))
	f := newFleet(t, "a")
	wantClash := []Clash{{Cluster: "a", Secret: sn("a"), By: "name"}}

	dry := pass(t, newReconciler(t, e, f, func(c *Config) { c.DryRun = true }))
	assert.Empty(t, names(dry.Create), "the dry run plans no create")
	assert.Equal(t, wantClash, dry.Clashes, "the dry run reports the clash")

	r := newReconciler(t, e, f)
	for range 2 {
		ch := pass(t, r)
		assert.Empty(t, names(ch.Create))
		assert.Equal(t, wantClash, r.Status().Clashes)
	}
	assert.Zero(t, e.counter.writes.Load(), "no create request was sent over the foreign Secret")
	got := e.get(sn("a"))
	assert.Equal(t, original.ResourceVersion, got.ResourceVersion)
	assert.Equal(t, original.UID, got.UID)
	assert.Equal(t, original.Labels, got.Labels)
	assert.Equal(t, original.Annotations, got.Annotations)
	assert.Equal(t, original.Data, got.Data)
}

// TestIdentityClashKeepsTheOtherClustersSecret protects "our Secret of
// another cluster is never taken over": the name our Secret of newcomer a
// (id id-new) would get holds a Secret of ours that says it is for
// another cluster a (id id-old), which left and whose countdown is one
// listing short of its end. Over three listings the Secret is neither
// written over, nor counted down, nor deleted; the identity clash is
// reported.
func TestIdentityClashKeepsTheOtherClustersSecret(t *testing.T) {
	e := newEnv(t)
	name := SecretName("cluster", "fleet", "a", "id-new")
	departed := cl("a", func(c *sources.Cluster) { c.ID = "id-old" })
	d, err := Build(&departed, &Options{Namespace: e.ns, OwnerID: "test-owner"}, noToken)
	require.NoError(t, err)
	s := d.Secret
	s.Name = name
	counted := time.Now().Add(-time.Hour)
	countdownAt(counted, 2, counted)(s)
	_, err = e.admin.CoreV1().Secrets(e.ns).Create(context.Background(), s, metav1.CreateOptions{})
	require.NoError(t, err)
	original := e.get(name)

	f := membersFleet(t, member{name: "a", id: "id-new", env: "prod"})
	r := newReconciler(t, e, f, func(c *Config) { c.Prune.AfterListings = 3 })
	for i := range 3 {
		if i > 0 {
			time.Sleep(5 * time.Millisecond)
			require.NoError(t, f.refresh())
		}
		ch := pass(t, r)
		assert.Empty(t, names(ch.Create), "pass %d", i)
		assert.Empty(t, names(ch.Delete), "pass %d", i)
		assert.Equal(t, []Clash{{Cluster: "a", Secret: name, By: "identity"}}, r.Status().Clashes, "pass %d", i)
	}
	assert.Zero(t, e.counter.writes.Load())
	got := e.get(name)
	assert.Equal(t, original.ResourceVersion, got.ResourceVersion, "never written")
	assert.Equal(t, "id-old", got.Annotations[AnnotationClusterID], "still the departed cluster's")
	assert.Equal(t, "2", got.Annotations[AnnotationMissingListings], "its countdown not advanced")
	assert.Equal(t, []string{name}, e.secretNames())
}

// TestForeignSecretWithOurServerFreezesOurs protects "ours and a foreign
// Secret with the same server: ours is left alone": after our Secret of
// cluster a exists, a person adds a cluster Secret of their own for a's
// server, and then a's labels change upstream. Our Secret is not updated
// (nor deleted), the foreign one is untouched, and the clash by server is
// reported.
func TestForeignSecretWithOurServerFreezesOurs(t *testing.T) {
	e := newEnv(t)
	f := membersFleet(t, member{name: "a", env: "prod"})
	r := newReconciler(t, e, f)
	require.Len(t, pass(t, r).Create, 1)
	ours := e.get(sn("a"))

	_, err := e.admin.CoreV1().Secrets(e.ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "a-by-hand", Namespace: e.ns, Labels: map[string]string{LabelSecretType: "cluster"}},
		StringData: map[string]string{"name": "a-by-hand", "server": "https://a.example.com", "config": "{}"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	theirs := e.get("a-by-hand")
	writeMembers(t, f.path, member{name: "a", env: "staging"})
	require.NoError(t, f.refresh())

	e.counter.writes.Store(0)
	ch := pass(t, r)
	assert.Equal(t, []Clash{{Cluster: "a", Secret: "a-by-hand", By: "server"}}, ch.Clashes)
	assert.Empty(t, ch.Update)
	assert.Empty(t, names(ch.Delete))
	assert.Zero(t, e.counter.writes.Load())
	got := e.get(sn("a"))
	assert.Equal(t, ours.ResourceVersion, got.ResourceVersion, "ours is left as it was")
	assert.Equal(t, "prod", got.Labels["env"])
	assert.Equal(t, theirs.ResourceVersion, e.get("a-by-hand").ResourceVersion, "theirs is untouched")
}

// TestRenamedClusterGetsNoSecondSecretOnItsServer protects "two clusters
// never share one server": cluster a is renamed b upstream with its id
// (a new identity, the same API server). Where a's Secret stays once a's
// departure is confirmed (upsert-only; sync with the breaker tripped, as a
// renamed source of many clusters trips it), b gets none: the clash by
// server is reported, and at no pass do two of our Secrets hold one
// server. Once a person deletes a's Secret, b's is written.
func TestRenamedClusterGetsNoSecondSecretOnItsServer(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"upsert-only":           func(c *Config) { c.Policy = PolicyUpsertOnly },
		"sync, breaker tripped": func(c *Config) { c.Prune.MaxDeletions, c.Prune.MaxDeletionsPercent = 0, 0 },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			f := membersFleet(t, member{name: "a", host: "shared", env: "prod"})
			r := newReconciler(t, e, f, mut)
			require.Len(t, pass(t, r).Create, 1)
			writeMembers(t, f.path, member{name: "b", host: "shared", env: "prod"})
			for i := range 4 {
				time.Sleep(5 * time.Millisecond)
				require.NoError(t, f.refresh())
				pass(t, r)
				assert.Equal(t, []string{sn("a")}, e.secretNames(), "pass %d", i)
			}
			assert.Equal(t, []Clash{{Cluster: "b", Secret: sn("a"), By: "server"}}, r.Status().Clashes)

			require.NoError(t, e.admin.CoreV1().Secrets(e.ns).Delete(context.Background(), sn("a"), metav1.DeleteOptions{}))
			assert.Equal(t, []string{sn("b")}, names(pass(t, r).Create))
			assert.Empty(t, r.Status().Clashes)
		})
	}
}
