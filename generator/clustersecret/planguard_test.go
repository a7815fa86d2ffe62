package clustersecret

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// TestPlanBreakerLimit: the breaker allows max(MaxDeletions,
// ceil(ours × MaxDeletionsPercent / 100)) deletions in a pass, counting
// only our Secrets; exactly at the limit deletes, one over blocks them all.
func TestPlanBreakerLimit(t *testing.T) {
	listing1 := t0.Add(-time.Minute)
	cases := []struct {
		name                string
		ours, foreign, gone int
		maxDeletions        int
		maxDeletionsPercent float64
		blocked             bool
	}{
		// the percentage allows more than MaxDeletions: 25% of 20 = 5 > 1
		{name: "percent above count, at the limit", ours: 20, gone: 5, maxDeletions: 1, maxDeletionsPercent: 25},
		{name: "percent above count, one over", ours: 20, gone: 6, maxDeletions: 1, maxDeletionsPercent: 25, blocked: true},
		// the percentage allows fewer than MaxDeletions: 10% of 20 = 2 < 4
		{name: "percent below count, at the limit", ours: 20, gone: 4, maxDeletions: 4, maxDeletionsPercent: 10},
		{name: "percent below count, one over", ours: 20, gone: 5, maxDeletions: 4, maxDeletionsPercent: 10, blocked: true},
		// the percentage is rounded up: 12% of 20 = 2.4 → 3
		{name: "percent rounded up, at the limit", ours: 20, gone: 3, maxDeletions: 1, maxDeletionsPercent: 12},
		{name: "percent rounded up, one over", ours: 20, gone: 4, maxDeletions: 1, maxDeletionsPercent: 12, blocked: true},
		// foreign Secrets do not count: 20% of our 10 = 2, not of all 40
		{name: "foreign Secrets not counted, at the limit", ours: 10, foreign: 30, gone: 2, maxDeletions: 1, maxDeletionsPercent: 20},
		{name: "foreign Secrets not counted, one over", ours: 10, foreign: 30, gone: 3, maxDeletions: 1, maxDeletionsPercent: 20, blocked: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var served []sources.Cluster
			var cur []corev1.Secret
			var gone []string
			for i := range tc.ours {
				c := cl(fmt.Sprintf("c%02d", i))
				if i < tc.gone { // left upstream, countdown reached at this listing
					cur = append(cur, current(t, c, countdownAt(t0.Add(-time.Hour), 2, listing1)))
					gone = append(gone, sn(c.Name))
					continue
				}
				served = append(served, c)
				cur = append(cur, current(t, c))
			}
			for i := range tc.foreign {
				cur = append(cur, current(t, cl(fmt.Sprintf("f%02d", i)), func(s *corev1.Secret) { s.Labels[LabelOwner] = "someone-else" }))
			}
			ch := Plan(Input{Desired: desired(t, served...), Current: records(cur...), Snapshot: snapshot(append([]sources.Cluster{}, served...)),
				Listings: map[string]time.Time{"fleet": t0}, OwnerID: owner, Policy: PolicySync, Now: t0,
				Prune: PruneOptions{AfterListings: 3, MaxDeletions: tc.maxDeletions, MaxDeletionsPercent: tc.maxDeletionsPercent}})
			if tc.blocked {
				assert.Empty(t, ch.Delete, "one over the limit deletes nothing")
				assert.Equal(t, gone, names(ch.Blocked))
			} else {
				assert.Equal(t, gone, names(ch.Delete), "exactly at the limit deletes")
				assert.Empty(t, ch.Blocked)
			}
		})
	}
}

// TestPlanPinOnEveryDeletePath: a pinned Secret is kept on each path that
// deletes its unpinned twin: a confirmed departure, a countdown reached
// for a cluster unknown to this process, and a countdown reached for a
// cluster that left the selection.
func TestPlanPinOnEveryDeletePath(t *testing.T) {
	listing1 := t0.Add(-time.Minute)
	reached := countdownAt(t0.Add(-time.Hour), 2, listing1) // the listing at t0 is the third missed
	paths := []struct {
		name       string
		served     []sources.Cluster
		departed   []inventory.Departed
		deselected map[string]bool
		secret     corev1.Secret
	}{
		{name: "confirmed departure", departed: []inventory.Departed{{Name: "x", Source: "fleet", ID: "x", At: t0}},
			secret: current(t, cl("x"))},
		{name: "countdown reached, cluster unknown to the process", secret: current(t, cl("x"), reached)},
		{name: "countdown reached, cluster deselected", served: []sources.Cluster{cl("x")},
			deselected: map[string]bool{"fleet/x": true}, secret: current(t, cl("x"), reached)},
	}
	for _, p := range paths {
		for _, pinned := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, pinned=%v", p.name, pinned), func(t *testing.T) {
				s := *p.secret.DeepCopy()
				if pinned {
					s.Labels[LabelPin] = "true"
				}
				snap := snapshot(append([]sources.Cluster{}, p.served...))
				snap.Departed = p.departed
				ch := Plan(Input{Current: records(s), Snapshot: snap, Deselected: p.deselected,
					Listings: map[string]time.Time{"fleet": t0}, OwnerID: owner, Policy: PolicySync, Now: t0,
					Prune: PruneOptions{AfterListings: 3, MaxDeletions: 5, MaxDeletionsPercent: 10}})
				assert.Empty(t, ch.Blocked)
				if !pinned {
					assert.Equal(t, []string{sn("x")}, names(ch.Delete), "the unpinned Secret is deleted on this path")
					return
				}
				assert.Empty(t, ch.Delete, "the pinned Secret is kept")
				assert.Empty(t, ch.Update, "and not written")
				if assert.Len(t, ch.Pending, 1) {
					assert.Equal(t, "pinned", ch.Pending[0].Held)
				}
			})
		}
	}
}

// TestPlanKeepsByIdentity: a Secret whose countdown is reached is not
// deleted while the inventory knows its cluster's identity, served or not
// (in a name conflict, a duplicate); its countdown is cleared instead. Its
// name alone keeps nothing: a newcomer that took the name of a departed
// cluster does not keep the departed cluster's Secret.
func TestPlanKeepsByIdentity(t *testing.T) {
	listing1 := t0.Add(-time.Minute)
	reached := current(t, cl("a"), countdownAt(t0.Add(-time.Hour), 2, listing1))
	itself := []inventory.Ref{{Source: "fleet", ID: "a"}}
	cases := []struct {
		name       string
		conflicts  []inventory.Conflict
		duplicates []inventory.Duplicate
		known      []inventory.Ref
		deleted    bool
	}{
		{name: "control: unknown, deleted", deleted: true},
		{name: "in a name conflict", conflicts: []inventory.Conflict{{Name: "a", Sources: []string{"fleet", "other"}}}, known: itself},
		{name: "a duplicate", duplicates: []inventory.Duplicate{{Name: "a", Source: "fleet", KeptName: "a-eks", KeptSource: "eks", Reason: "server"}}, known: itself},
		{name: "a newcomer took its name: deleted", conflicts: []inventory.Conflict{{Name: "a", Sources: []string{"other"}}},
			known: []inventory.Ref{{Source: "other", ID: "a-2"}}, deleted: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot(nil)
			snap.Conflicts, snap.Duplicates, snap.Known = tc.conflicts, tc.duplicates, tc.known
			ch := Plan(Input{Current: records(reached), Snapshot: snap,
				Listings: map[string]time.Time{"fleet": t0}, OwnerID: owner, Policy: PolicySync, Now: t0,
				Prune: PruneOptions{AfterListings: 3, MaxDeletions: 5, MaxDeletionsPercent: 10}})
			if tc.deleted {
				assert.Equal(t, []string{sn("a")}, names(ch.Delete))
				return
			}
			assert.Empty(t, ch.Delete)
			assert.Empty(t, ch.Pending)
			if assert.Len(t, ch.Update, 1) {
				assert.Equal(t, "countdown", ch.Update[0].Reason)
				assert.NotContains(t, written(t, ch.Update[0]).Annotations, AnnotationMissingSince, "countdown cleared")
			}
		})
	}
}
