package clustersecret

// Fixtures of the plan and reconciler tests: clusters, their desired and
// current Secrets, snapshots.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

const owner = "fleet-a"

var (
	t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	// caA and caB are two different base64 PEM bundles (content does not
	// matter to the plan).
	caA = "Q0EtQQ=="
	caB = "Q0EtQg=="
)

func opts() *Options {
	return &Options{Namespace: "argocd", OwnerID: owner, Prefix: "cluster"}
}

func cl(name string, mut ...func(*sources.Cluster)) sources.Cluster {
	c := sources.Cluster{Source: "fleet", Provider: sources.ProviderStatic, Name: name, Server: "https://" + name + ".example.com",
		CA: sources.CAFromData(caA), Tenant: "acme", Region: "eu-west-1", Labels: map[string]string{"env": "prod"}, Ready: true,
		Auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: name, RoleARN: "arn:aws:iam::1:role/argocd"}}}
	for _, m := range mut {
		m(&c)
	}
	return c
}

// withID gives a cluster of cl its ID in the source (by default its name).
func withID(id string) func(*sources.Cluster) { return func(c *sources.Cluster) { c.ID = id } }

func noToken(sources.SecretRef) (string, error) { return "", errors.New("no token in this test") }

func desired(t *testing.T, cs ...sources.Cluster) []Desired {
	t.Helper()
	var out []Desired
	for i := range cs {
		d, err := Build(&cs[i], opts(), noToken)
		require.NoError(t, err)
		out = append(out, d)
	}
	return out
}

// current returns the Secret the cluster's desired Secret would be once
// written (what the API server would give back), optionally changed.
func current(t *testing.T, c sources.Cluster, mut ...func(*corev1.Secret)) corev1.Secret {
	t.Helper()
	s := *desired(t, c)[0].Secret.DeepCopy()
	s.UID, s.ResourceVersion = types.UID("uid-"+c.Name), "1"
	for _, m := range mut {
		m(&s)
	}
	return s
}

// sn is the Secret name of cluster name in source fleet (its ID is its
// name, as for static clusters).
func sn(name string) string { return SecretName("cluster", "fleet", name, name) }

// snapshot serves cs; listed are listed but not served.
func snapshot(cs []sources.Cluster, states ...inventory.SourceState) *inventory.Snapshot {
	return snapshotWith(cs, nil, states...)
}

func snapshotWith(cs, listed []sources.Cluster, states ...inventory.SourceState) *inventory.Snapshot {
	if len(states) == 0 {
		states = []inventory.SourceState{{Name: "fleet", Provider: sources.ProviderStatic, Synced: true}}
	}
	sources.SortByName(cs)
	snap := &inventory.Snapshot{Version: 1, Sources: states}
	for i := range cs {
		snap.Clusters = append(snap.Clusters, &cs[i])
	}
	for _, c := range listed {
		snap.Unserved = append(snap.Unserved, inventory.Unserved{Name: c.Name, Source: c.Source, ID: c.Key(), Phase: sources.PhasePending})
	}
	for _, c := range append(slices.Clone(cs), listed...) {
		snap.Known = append(snap.Known, inventory.Ref{Source: c.Source, ID: c.Key()})
	}
	snap.Known = sortRefs(snap.Known)
	return snap
}

// sortRefs sorts identities as a snapshot's Known are.
func sortRefs(refs []inventory.Ref) []inventory.Ref {
	slices.SortFunc(refs, func(a, b inventory.Ref) int {
		return cmp.Or(strings.Compare(a.Source, b.Source), strings.Compare(a.ID, b.ID))
	})
	return refs
}

func countdownAt(since time.Time, missed int, listing time.Time) func(*corev1.Secret) {
	return func(s *corev1.Secret) {
		s.Annotations[AnnotationMissingSince] = since.Format(time.RFC3339Nano)
		s.Annotations[AnnotationMissingListings] = fmt.Sprint(missed)
		s.Annotations[AnnotationMissingListing] = listing.Format(time.RFC3339Nano)
	}
}

func names[T interface{ GetName() string }](ss []T) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.GetName())
	}
	return out
}

// written is what u writes over the Secret its Record holds (read from
// the API).
func written(t testing.TB, u Update) *corev1.Secret {
	t.Helper()
	require.NotNil(t, u.Old.Full(), "a Record read from the API")
	if u.Want == nil {
		return onFresh(u.Old, u.Countdown, u.Old.Full())
	}
	want, err := u.Want.Render(noToken)
	require.NoError(t, err)
	want.Name = u.Old.Name
	return merge(u.Old.Full(), want)
}

// records returns the Records of ss as read from the API.
func records(ss ...corev1.Secret) []*Record {
	out := make([]*Record, len(ss))
	for i := range ss {
		out[i] = recordOf(&ss[i], true)
	}
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func ptr[T any](v T) *T { return &v }
