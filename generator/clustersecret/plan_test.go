package clustersecret

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// planWant is what a plan case expects.
type planWant struct {
	create, delete, blocked []string
	update                  map[string]string // name → reason
	clashes                 []Clash
	pending                 []string // "secret:missed/needed[:held]"
	unchanged               int
}

// planPrune is the prune of the plan tests unless a case says otherwise.
func planPrune() PruneOptions {
	return PruneOptions{AfterListings: 3, MaxDeletions: 5, MaxDeletionsPercent: 10}
}

// planCase is one plan: by default under upsert-only, with planPrune, and
// a new listing of source fleet at t0.
type planCase struct {
	name     string
	served   []sources.Cluster // in the snapshot and desired
	listed   []sources.Cluster // in the snapshot only (not ready, ...)
	current  []corev1.Secret
	states   []inventory.SourceState
	policy   Policy
	prune    *PruneOptions
	listings map[string]time.Time
	held     map[string]bool
	want     planWant
}

func foreignOwner(s *corev1.Secret) { s.Labels[LabelOwner] = "someone-else" }

// TestPlanContent: creates, updates in place and clashes of served
// clusters.
func TestPlanContent(t *testing.T) {
	runPlan(t, []planCase{
		{name: "new cluster", served: []sources.Cluster{cl("a")}, want: planWant{create: []string{sn("a")}}},
		{name: "steady state", served: []sources.Cluster{cl("a")}, current: []corev1.Secret{current(t, cl("a"))}, want: planWant{unchanged: 1}},
		{name: "changed CA", served: []sources.Cluster{cl("a", func(c *sources.Cluster) { c.CA = sources.CAFromData(caB) })},
			current: []corev1.Secret{current(t, cl("a"))}, want: planWant{update: map[string]string{sn("a"): "content"}}},
		{name: "changed CA under create-only", served: []sources.Cluster{cl("a", func(c *sources.Cluster) { c.CA = sources.CAFromData(caB) })},
			current: []corev1.Secret{current(t, cl("a"))}, policy: PolicyCreateOnly, want: planWant{unchanged: 1}},
		{name: "changed labels", served: []sources.Cluster{cl("a", func(c *sources.Cluster) { c.Labels = map[string]string{"env": "staging"} })},
			current: []corev1.Secret{current(t, cl("a"))}, want: planWant{update: map[string]string{sn("a"): "content"}}},
		{name: "label added by a person is not a change", served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("a"), func(s *corev1.Secret) {
				s.Labels["team"] = "sre"
				s.Data["shard"] = []byte("1")
			})}, want: planWant{unchanged: 1}},
		{name: "foreign secret with the same name", served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("a"), foreignOwner, func(s *corev1.Secret) { s.Data["server"] = []byte("https://elsewhere") })},
			want:    planWant{clashes: []Clash{{Cluster: "a", Secret: sn("a"), By: "name"}}}},
		{name: "foreign secret with the same server", served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("a"), foreignOwner, func(s *corev1.Secret) { s.Name = "hand-made" })},
			want:    planWant{clashes: []Clash{{Cluster: "a", Secret: "hand-made", By: "server"}}}},
		{name: "foreign secret with the same cluster name", served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("a"), foreignOwner, func(s *corev1.Secret) {
				s.Name, s.Data["server"] = "hand-made", []byte("https://elsewhere")
			})},
			want: planWant{clashes: []Clash{{Cluster: "a", Secret: "hand-made", By: "cluster name"}}}},
		{name: "foreign secret with the cluster name of an established one", served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("a")), current(t, cl("a"), foreignOwner, func(s *corev1.Secret) {
				s.Name, s.Data["server"] = "hand-made", []byte("https://elsewhere")
			})},
			want: planWant{unchanged: 1, clashes: []Clash{{Cluster: "a", Secret: "hand-made", By: "cluster name"}}}},
		{name: "ours renamed onto a foreign secret's cluster name is left as it is",
			served: []sources.Cluster{cl("a", withID("id-1"))},
			current: []corev1.Secret{current(t, cl("old", withID("id-1"))), current(t, cl("a"), foreignOwner, func(s *corev1.Secret) {
				s.Name, s.Data["server"] = "hand-made", []byte("https://elsewhere")
			})},
			want: planWant{unchanged: 1, clashes: []Clash{{Cluster: "a", Secret: "hand-made", By: "cluster name"}}}},
		{name: "ours of a cluster that left holds the server: no second secret",
			served:  []sources.Cluster{cl("b", func(c *sources.Cluster) { c.Server = "https://a.example.com" })},
			current: []corev1.Secret{current(t, cl("a"))},
			want: planWant{clashes: []Clash{{Cluster: "b", Secret: sn("a"), By: "server"}},
				pending: []string{sn("a") + ":1/3:policy upsert-only never deletes"}, unchanged: 1}},
		{name: "ours moving onto the server of ours for another cluster is left as it is",
			served:  []sources.Cluster{cl("b", func(c *sources.Cluster) { c.Server = "https://a.example.com" })},
			current: []corev1.Secret{current(t, cl("a")), current(t, cl("b"))},
			want: planWant{clashes: []Clash{{Cluster: "b", Secret: sn("a"), By: "server"}},
				pending: []string{sn("a") + ":1/3:policy upsert-only never deletes"}, unchanged: 2}},
		{name: "our secret of another owner id is foreign", policy: PolicySync, served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("a"), func(s *corev1.Secret) { s.Labels[LabelOwner] = "fleet-b" })},
			want:    planWant{clashes: []Clash{{Cluster: "a", Secret: sn("a"), By: "name"}}}},
	})
}

// TestPlanCountdown: the prune countdown of Secrets whose cluster is gone.
func TestPlanCountdown(t *testing.T) {
	listing1 := t0.Add(-time.Minute)
	runPlan(t, []planCase{
		{name: "foreign secret of a gone cluster is never deleted", policy: PolicySync,
			current: []corev1.Secret{current(t, cl("gone"), foreignOwner, countdownAt(t0.Add(-time.Hour), 5, listing1))},
			want:    planWant{}},
		{name: "vanished under upsert-only", current: []corev1.Secret{current(t, cl("gone"))},
			want: planWant{pending: []string{sn("gone") + ":1/3:policy upsert-only never deletes"}, unchanged: 1}},
		{name: "vanished under create-only", policy: PolicyCreateOnly, current: []corev1.Secret{current(t, cl("gone"))},
			want: planWant{pending: []string{sn("gone") + ":1/3:policy create-only never deletes"}, unchanged: 1}},
		{name: "vanished under sync starts the countdown", policy: PolicySync, current: []corev1.Secret{current(t, cl("gone"))},
			want: planWant{update: map[string]string{sn("gone"): "countdown"}, pending: []string{sn("gone") + ":1/3"}}},
		{name: "countdown counts a new listing", policy: PolicySync,
			current: []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Minute), 1, listing1))},
			want:    planWant{update: map[string]string{sn("gone"): "countdown"}, pending: []string{sn("gone") + ":2/3"}}},
		{name: "countdown waits for a new listing", policy: PolicySync, listings: map[string]time.Time{"fleet": listing1},
			current: []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    planWant{pending: []string{sn("gone") + ":2/3"}, unchanged: 1}},
		{name: "countdown reached: delete", policy: PolicySync,
			current: []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    planWant{delete: []string{sn("gone")}}},
		{name: "countdown reached but grace period not passed", policy: PolicySync,
			prune:   &PruneOptions{AfterListings: 3, GracePeriod: time.Hour, MaxDeletions: 5},
			current: []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    planWant{update: map[string]string{sn("gone"): "countdown"}, pending: []string{sn("gone") + ":3/3"}}},
		{name: "countdown frozen while the source fails", policy: PolicySync,
			states:  []inventory.SourceState{{Name: "fleet", Synced: true, Stale: true}},
			current: []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    planWant{pending: []string{sn("gone") + ":2/3:latest listing of the source failed"}, unchanged: 1}},
		{name: "nothing deleted before the source synced", policy: PolicySync,
			states:  []inventory.SourceState{{Name: "fleet"}},
			current: []corev1.Secret{current(t, cl("gone"))},
			want:    planWant{unchanged: 1}},
		{name: "source no longer configured", policy: PolicySync, states: []inventory.SourceState{{Name: "other", Synced: true}},
			current: []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    planWant{pending: []string{sn("gone") + ":2/3:source not configured"}, unchanged: 1}},
		{name: "pinned", policy: PolicySync,
			current: []corev1.Secret{current(t, cl("gone"), func(s *corev1.Secret) { s.Labels[LabelPin] = "true" }, countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    planWant{pending: []string{sn("gone") + ":3/3:pinned"}, unchanged: 1}},
	})
}

// TestRestartedCountdownWaitsForTheFirstListing: a countdown a process
// left one listing from its end is not completed by a new process whose
// source has not listed yet (the reconciler does not even pass before
// every source has listed; this holds at the plan too): the Secret is
// kept, its countdown untouched, and the reason is said.
func TestRestartedCountdownWaitsForTheFirstListing(t *testing.T) {
	listing1 := t0.Add(-time.Minute)
	runPlan(t, []planCase{
		{name: "countdown at its end, source not listed since the restart", policy: PolicySync,
			states:   []inventory.SourceState{{Name: "fleet"}},
			listings: map[string]time.Time{"fleet": t0},
			current:  []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Hour), 2, listing1))},
			want:     planWant{pending: []string{sn("gone") + ":2/3:source has not completed a listing"}, unchanged: 1}},
		{name: "the same once the source has listed: deleted", policy: PolicySync,
			states:   []inventory.SourceState{{Name: "fleet", Synced: true}},
			listings: map[string]time.Time{"fleet": t0},
			current:  []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Hour), 2, listing1))},
			want:     planWant{delete: []string{sn("gone")}}},
	})
}

// TestPlanListedKept: a cluster listed in any form keeps its Secret, and
// one back during the countdown clears it.
func TestPlanListedKept(t *testing.T) {
	listing1 := t0.Add(-time.Minute)
	runPlan(t, []planCase{
		{name: "not ready cluster is neither created nor deleted", policy: PolicySync,
			listed:  []sources.Cluster{cl("waiting", func(c *sources.Cluster) { c.Ready = false })},
			current: []corev1.Secret{current(t, cl("waiting"))}, want: planWant{unchanged: 1}},
		{name: "held cluster (token unreadable) is kept", policy: PolicySync, held: map[string]bool{"fleet/tok": true},
			current: []corev1.Secret{current(t, cl("tok"))}, want: planWant{unchanged: 1}},
		{name: "cluster back during countdown", policy: PolicySync, served: []sources.Cluster{cl("back")},
			current: []corev1.Secret{current(t, cl("back"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    planWant{update: map[string]string{sn("back"): "content"}}},
		{name: "not-ready cluster back during countdown clears it", policy: PolicySync,
			listed:  []sources.Cluster{cl("back", func(c *sources.Cluster) { c.Ready = false })},
			current: []corev1.Secret{current(t, cl("back"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    planWant{update: map[string]string{sn("back"): "countdown"}}},
	})
}

// TestPlanBreaker: 10 of our 12 Secrets would go at once: none goes.
func TestPlanBreaker(t *testing.T) {
	var many []corev1.Secret
	for i := range 12 {
		many = append(many, current(t, cl(fmt.Sprintf("g%02d", i)), countdownAt(t0.Add(-time.Minute), 2, t0.Add(-time.Minute))))
	}
	runPlan(t, []planCase{{name: "breaker", policy: PolicySync, served: []sources.Cluster{cl("g00"), cl("g01")}, current: many,
		want: planWant{blocked: []string{sn("g02"), sn("g03"), sn("g04"), sn("g05"), sn("g06"),
			sn("g07"), sn("g08"), sn("g09"), sn("g10"), sn("g11")},
			update: map[string]string{sn("g00"): "content", sn("g01"): "content"}}}})
}

// runPlan plans each case and compares the changes with its want.
func runPlan(t *testing.T, cases []planCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := planPrune()
			if tc.prune != nil {
				p = *tc.prune
			}
			policy := tc.policy
			if policy == "" {
				policy = PolicyUpsertOnly
			}
			listings := tc.listings
			if listings == nil {
				listings = map[string]time.Time{"fleet": t0}
			}
			snap := snapshotWith(append([]sources.Cluster{}, tc.served...), tc.listed, tc.states...)
			ch := Plan(Input{Desired: desired(t, tc.served...), Current: records(tc.current...), Snapshot: snap,
				Listings: listings, Held: tc.held, OwnerID: owner, Policy: policy, Prune: p, Now: t0})

			assert.Equal(t, orEmpty(tc.want.create), names(ch.Create), "create")
			assert.Equal(t, orEmpty(tc.want.delete), names(ch.Delete), "delete")
			assert.Equal(t, orEmpty(tc.want.blocked), names(ch.Blocked), "blocked")
			gotUpd := map[string]string{}
			for _, u := range ch.Update {
				next := written(t, u)
				gotUpd[next.Name] = u.Reason
				assert.Equal(t, u.Old.ResourceVersion, next.ResourceVersion, "updates carry the version read")
			}
			if tc.want.update == nil {
				tc.want.update = map[string]string{}
			}
			assert.Equal(t, tc.want.update, gotUpd, "update")
			assert.Equal(t, tc.want.clashes, ch.Clashes, "clashes")
			var pend []string
			for _, pe := range ch.Pending {
				s := fmt.Sprintf("%s:%d/%d", pe.Secret, pe.Missed, pe.Needed)
				if pe.Held != "" {
					s += ":" + pe.Held
				}
				pend = append(pend, s)
			}
			assert.Equal(t, tc.want.pending, pend, "pending")
			assert.Equal(t, tc.want.unchanged, ch.Unchanged, "unchanged")
		})
	}
}

// TestUpdateTouchesOnlyWhatWeOwn: labels we propagated and that left
// upstream are removed; labels, annotations and data keys added by people
// stay.
func TestUpdateTouchesOnlyWhatWeOwn(t *testing.T) {
	before := cl("a", func(c *sources.Cluster) {
		c.Labels = map[string]string{"env": "prod", "team": "payments"}
		c.Annotations = map[string]string{"owner": "x@example.com"}
	})
	after := cl("a", func(c *sources.Cluster) {
		c.Labels = map[string]string{"env": "staging"}
		c.CA = sources.CAFromData(caB)
	})
	cur := current(t, before, func(s *corev1.Secret) {
		s.Labels["added-by-hand"] = "yes"
		s.Annotations["note"] = "keep me"
		s.Data["shard"] = []byte("2")
	})
	ch := Plan(Input{Desired: desired(t, after), Current: records(cur), Snapshot: snapshot([]sources.Cluster{after}),
		OwnerID: owner, Policy: PolicySync, Prune: PruneOptions{AfterListings: 3}, Now: t0})
	require.Len(t, ch.Update, 1)
	got := written(t, ch.Update[0])
	assert.Equal(t, "staging", got.Labels["env"])
	assert.NotContains(t, got.Labels, "team", "propagated earlier, gone upstream")
	assert.Equal(t, "yes", got.Labels["added-by-hand"])
	assert.NotContains(t, got.Annotations, "owner", "propagated annotation gone upstream")
	assert.Equal(t, "keep me", got.Annotations["note"])
	assert.Equal(t, "2", string(got.Data["shard"]))
	assert.Contains(t, string(got.Data["config"]), caB)
}

// lifecycleWant is what a lifecycle case expects.
type lifecycleWant struct {
	create, delete []string
	update         map[string]string // name → data["name"]
	clashes        []Clash
	pending        []string
}

// lifecycleCase is one plan with new listings of source fleet at t0.
type lifecycleCase struct {
	name      string
	served    []sources.Cluster
	conflicts []inventory.Conflict
	// known adds to the snapshot's known identities (the served ones are)
	known      []inventory.Ref
	departed   []inventory.Departed
	deselected map[string]bool
	current    []corev1.Secret
	policy     Policy
	want       lifecycleWant
}

// TestPlanLifecycle: the Secret follows the inventory's lifecycle (found by
// identity, pruned on a confirmed departure) and never loses to a foreign
// Secret.
func TestPlanLifecycle(t *testing.T) {
	departed := func(name, id string) inventory.Departed {
		return inventory.Departed{Name: name, Source: "fleet", ID: id, At: t0}
	}
	legacy := func(s *corev1.Secret) { // as written before identities: old name, no id annotation
		s.Name = "cluster-fleet-" + s.Annotations[AnnotationCluster]
		delete(s.Annotations, AnnotationClusterID)
	}
	pin := func(s *corev1.Secret) { s.Labels[LabelPin] = "true" }
	foreign := func(s *corev1.Secret) { s.Labels[LabelOwner] = "someone-else"; s.Name = "hand-made" }
	runLifecycle(t, []lifecycleCase{
		{name: "confirmed departure deletes at once", policy: PolicySync, departed: []inventory.Departed{departed("gone", "id-gone")},
			current: []corev1.Secret{current(t, cl("gone", withID("id-gone")))},
			want:    lifecycleWant{delete: []string{SecretName("cluster", "fleet", "gone", "id-gone")}}},
		{name: "confirmed departure, pinned", policy: PolicySync, departed: []inventory.Departed{departed("gone", "id-gone")},
			current: []corev1.Secret{current(t, cl("gone", withID("id-gone")), pin)},
			want:    lifecycleWant{pending: []string{SecretName("cluster", "fleet", "gone", "id-gone") + ":pinned"}}},
		{name: "confirmed departure under upsert-only", policy: PolicyUpsertOnly, departed: []inventory.Departed{departed("gone", "id-gone")},
			current: []corev1.Secret{current(t, cl("gone", withID("id-gone")))},
			want:    lifecycleWant{pending: []string{SecretName("cluster", "fleet", "gone", "id-gone") + ":policy upsert-only never deletes"}}},
		{name: "rename updates the one Secret in place", policy: PolicySync, served: []sources.Cluster{cl("new-name", withID("id-1"))},
			current: []corev1.Secret{current(t, cl("old-name", withID("id-1")))},
			want:    lifecycleWant{update: map[string]string{SecretName("cluster", "fleet", "old-name", "id-1"): "new-name"}}},
		{name: "a Secret of the previous version is taken over in place", policy: PolicySync, served: []sources.Cluster{cl("a", withID("c-123"))},
			current: []corev1.Secret{current(t, cl("a", withID("c-123")), legacy)},
			want:    lifecycleWant{update: map[string]string{"cluster-fleet-a": "a"}}},
		{name: "a foreign Secret with our server never removes ours", policy: PolicySync, served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("a")), current(t, cl("a"), foreign)},
			want:    lifecycleWant{clashes: []Clash{{Cluster: "a", Secret: "hand-made", By: "server"}}}},
		{name: "our Secret of another cluster at the desired name is never updated", policy: PolicySync, served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("b", withID("other")), func(s *corev1.Secret) { s.Name = sn("a") })},
			want:    lifecycleWant{clashes: []Clash{{Cluster: "a", Secret: sn("a"), By: "identity"}}}},
		{name: "a cluster leaving the selection counts down", policy: PolicySync, served: []sources.Cluster{cl("a")},
			deselected: map[string]bool{"fleet/a": true}, current: []corev1.Secret{current(t, cl("a"))},
			want: lifecycleWant{update: map[string]string{sn("a"): "a"}, pending: []string{sn("a") + ":1/3"}}},
		{name: "no prune while a name conflict holds", policy: PolicySync, conflicts: []inventory.Conflict{{Name: "a", Sources: []string{"fleet", "other"}}},
			known: []inventory.Ref{{Source: "fleet", ID: "a"}}, current: []corev1.Secret{current(t, cl("a"))}, want: lifecycleWant{}},
	})
}

// runLifecycle plans each case and compares the changes with its want.
func runLifecycle(t *testing.T, cases []lifecycleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot(append([]sources.Cluster{}, tc.served...))
			snap.Departed, snap.Conflicts = tc.departed, tc.conflicts
			snap.Known = sortRefs(append(snap.Known, tc.known...))
			var ds []Desired
			for _, d := range desired(t, tc.served...) {
				if !tc.deselected[Identity(d.Source, d.ID)] {
					ds = append(ds, d)
				}
			}
			ch := Plan(Input{Desired: ds, Current: records(tc.current...), Snapshot: snap, Deselected: tc.deselected,
				Listings: map[string]time.Time{"fleet": t0}, OwnerID: owner, Policy: tc.policy, Prune: planPrune(), Now: t0})
			assert.Equal(t, orEmpty(tc.want.create), names(ch.Create), "create")
			assert.Equal(t, orEmpty(tc.want.delete), names(ch.Delete), "delete")
			assert.Empty(t, ch.Blocked)
			got := map[string]string{}
			for _, u := range ch.Update {
				next := written(t, u)
				got[next.Name] = string(next.Data["name"])
				assert.Equal(t, u.Old.Name, next.Name, "in place")
				assert.Equal(t, u.Old.UID, next.UID)
			}
			if tc.want.update == nil {
				tc.want.update = map[string]string{}
			}
			assert.Equal(t, tc.want.update, got, "update")
			assert.Equal(t, tc.want.clashes, ch.Clashes, "clashes")
			var pend []string
			for _, pe := range ch.Pending {
				s := pe.Secret
				if pe.Held != "" {
					s += ":" + pe.Held
				} else {
					s += fmt.Sprintf(":%d/%d", pe.Missed, pe.Needed)
				}
				pend = append(pend, s)
			}
			assert.Equal(t, tc.want.pending, pend, "pending")
		})
	}
}

// TestChangesStringIsShort: a plan's log line has counts and the first
// names only, whatever the size of the fleet.
func TestChangesStringIsShort(t *testing.T) {
	var ch Changes
	for i := range 1000 {
		ch.Create = append(ch.Create, Desired{name: fmt.Sprintf("cluster-fleet-%04d", i)})
	}
	ch.Unchanged = 7
	s := ch.String()
	assert.Equal(t, "create=1000[cluster-fleet-0000,cluster-fleet-0001,cluster-fleet-0002,cluster-fleet-0003,cluster-fleet-0004,…] "+
		"update=0[] delete=0[] blocked=0[] clashes=0 pending=0 unchanged=7", s)
}

// TestPlanOneSecretPerClusterName: Argo CD refuses a destination name two
// cluster Secrets share, so no plan makes two of ours hold one Argo CD
// cluster name or one server: a Secret of ours kept for a cluster that
// left (not sync, pinned, the breaker, a countdown) keeps its name, and
// the newcomer under it gets none until it goes.
func TestPlanOneSecretPerClusterName(t *testing.T) {
	recreated := cl("prod", withID("c-new"), func(c *sources.Cluster) { c.Server = "https://rancher.example.com/k8s/clusters/c-new" })
	departed := cl("prod", withID("c-old"), func(c *sources.Cluster) { c.Server = "https://rancher.example.com/k8s/clusters/c-old" })
	renamed := func(from, to string) sources.Cluster {
		return cl(to, withID(from), func(c *sources.Cluster) { c.Server = "https://" + from + ".example.com" })
	}
	spelled := func(name, server string) sources.Cluster {
		return cl(name, func(c *sources.Cluster) { c.Server = server })
	}
	runPlan(t, []planCase{
		{name: "a cluster re-created under the name of one that left: ours for the one that left keeps it",
			served:  []sources.Cluster{recreated},
			current: []corev1.Secret{current(t, departed)},
			want: planWant{unchanged: 1, clashes: []Clash{{Cluster: "prod", Secret: SecretName("cluster", "fleet", "prod", "c-old"), By: "cluster name"}},
				pending: []string{SecretName("cluster", "fleet", "prod", "c-old") + ":1/3:policy upsert-only never deletes"}}},
		{name: "renamed onto the name ours for a cluster that left holds: left as it is",
			served:  []sources.Cluster{renamed("a", "b")},
			current: []corev1.Secret{current(t, cl("b")), current(t, cl("a"))},
			want: planWant{unchanged: 2, clashes: []Clash{{Cluster: "b", Secret: sn("b"), By: "cluster name"}},
				pending: []string{sn("b") + ":1/3:policy upsert-only never deletes"}}},
		{name: "two clusters swap their names: both renamed in place",
			served:  []sources.Cluster{renamed("a", "b"), renamed("b", "a")},
			current: []corev1.Secret{current(t, cl("a")), current(t, cl("b"))},
			want:    planWant{update: map[string]string{sn("a"): "content", sn("b"): "content"}}},
		{name: "renamed onto a name another served cluster leaves",
			served:  []sources.Cluster{renamed("a", "b"), renamed("b", "c")},
			current: []corev1.Secret{current(t, cl("a")), current(t, cl("b"))},
			want:    planWant{update: map[string]string{sn("a"): "content", sn("b"): "content"}}},
		{name: "two new clusters on two spellings of one server: one Secret",
			served: []sources.Cluster{spelled("x", "https://api.example.com"), spelled("y", "https://API.example.com:443/")},
			want:   planWant{create: []string{sn("x")}, clashes: []Clash{{Cluster: "y", Secret: sn("x"), By: "server"}}}},
	})
}
