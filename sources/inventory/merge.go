package inventory

import (
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// merge builds a snapshot from the lifecycle of every source: the served
// clusters of all sources, one listing kept per cluster (dedupe), then one
// cluster kept per name (conflicts). The caller holds inv.mu (or is New).
//
// Dedupe runs first, so that one cluster listed under one name by Rancher
// and by EKS is a duplicate, not a name conflict. In both steps an
// established cluster (served in an earlier snapshot) wins over a
// newcomer; among newcomers, dedupe follows the preference and a name
// listed twice is served to none. Once the start-up barrier is behind (see
// Snapshot.Waiting), the served clusters become established.
func (inv *Inventory) merge(version uint64, now time.Time) *Snapshot {
	snap := &Snapshot{Version: version, Unsettled: inv.unsettled}
	var all []*sources.Cluster
	for _, st := range inv.states {
		for _, r := range st.life.tracked {
			snap.Known = append(snap.Known, Ref{Source: r.Source, ID: r.ID})
			snap.Answered = snap.Answered || !r.Established.IsZero()
		}
		s := st.status.SourceState
		s.HeldDepartures, s.BlockedDepartures, s.WaitingDepartures = st.life.held, st.life.blocked, st.life.waiting
		s.PinnedDepartures, s.DryRunDepartures = st.life.pins, st.life.dry
		snap.Sources = append(snap.Sources, s)
		all = append(all, st.life.served...)
		snap.Unserved = append(snap.Unserved, st.life.unserved...)
		snap.Kept = append(snap.Kept, st.life.kept...)
	}
	kept, dups := dedupe(all, inv.prefer, inv.establishedAt, inv.kindOf)
	snap.Duplicates = dups
	snap.Clusters, snap.Conflicts = inv.resolveNames(kept)
	if inv.follower {
		snap.Clusters, snap.Unserved, inv.joinAt = inv.holdJoining(snap.Clusters, snap.Unserved, now)
	}
	snap.Departed = sortedDeparted(inv.departed, now)
	slices.SortFunc(snap.Known, compareRefs)
	sort.Slice(snap.Unserved, func(i, j int) bool { return snap.Unserved[i].Name < snap.Unserved[j].Name })
	sort.Slice(snap.Kept, func(i, j int) bool { return snap.Kept[i].Name < snap.Kept[j].Name })
	if len(snap.Waiting()) == 0 && !inv.follower {
		inv.establish(snap.Clusters, now)
		snap.Answered = snap.Answered || len(snap.Clusters) > 0 // established now
	}
	return snap
}

// holdJoining takes out of served the newcomers the leader established
// less than joinDelay before now: they are unserved ("joining") until
// then. A newcomer joins an answer given before it: the clusters
// established first (the first answer, at once, as a cold start or a
// restart with the in-memory ledger establishes them) are never held, or
// that answer would lack them. It returns when the first of them is due
// (zero: none). The caller holds inv.mu.
func (inv *Inventory) holdJoining(served []*sources.Cluster, unserved []Unserved, now time.Time) ([]*sources.Cluster, []Unserved, time.Time) {
	if inv.joinDelay <= 0 {
		return served, unserved, time.Time{}
	}
	var first, next time.Time
	var out []*sources.Cluster // nil while none is held: served as it is
	for i, c := range served {
		at := inv.establishedAt(c)
		due := at.Add(inv.joinDelay)
		if now.Before(due) && first.IsZero() {
			first = inv.firstEstablished()
		}
		if !now.Before(due) || !at.After(first) {
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		if out == nil {
			out = append(make([]*sources.Cluster, 0, len(served)), served[:i]...)
		}
		unserved = append(unserved, Unserved{Name: c.Name, Source: c.Source, ID: c.Key(), Phase: c.Phase, State: c.State,
			Reason: "joining: served from " + due.UTC().Format(time.RFC3339Nano)})
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	if out == nil {
		return served, unserved, next
	}
	return out, unserved, next
}

// firstEstablished returns when the first of the tracked clusters was
// established (zero: none). The caller holds inv.mu.
func (inv *Inventory) firstEstablished() time.Time {
	var first time.Time
	for _, st := range inv.states {
		for _, r := range st.life.tracked {
			if !r.Established.IsZero() && (first.IsZero() || r.Established.Before(first)) {
				first = r.Established
			}
		}
	}
	return first
}

// establish marks the clusters of an answer established (since now, for
// those that were not) and holding the name they are served under; every
// other record holds no name: a cluster that lost its name (renamed onto
// a held one, or a duplicate) does not take back the one it held before
// from the cluster served under it since. The caller holds inv.mu.
func (inv *Inventory) establish(answer []*sources.Cluster, now time.Time) {
	holders := make(map[*Record]bool, len(answer))
	for _, c := range answer {
		if r := inv.recordOf(c); r != nil {
			if r.Established.IsZero() {
				r.Established = now
			}
			r.Holds = c.Name
			holders[r] = true
		}
	}
	for _, st := range inv.states {
		for _, r := range st.life.tracked {
			if r.Holds != "" && !holders[r] {
				r.Holds = ""
			}
		}
	}
}

// recordOf returns what the lifecycle of c's source remembers of c.
func (inv *Inventory) recordOf(c *sources.Cluster) *Record {
	return inv.tracked(c.Source, c.Key())
}

// kindOf returns the kind of c's source, empty if it has none.
func (inv *Inventory) kindOf(c *sources.Cluster) sources.Kind {
	if st := inv.bySource[c.Source]; st != nil {
		return st.spec.Kind
	}
	return ""
}

// establishedAt returns when c was established, zero if it is not.
func (inv *Inventory) establishedAt(c *sources.Cluster) time.Time {
	if r := inv.recordOf(c); r != nil {
		return r.Established
	}
	return time.Time{}
}

// resolveNames keeps one cluster per name: the only one, else the one
// that holds the name (was served under it), else the one established
// first; a name listed twice with none established is served to none.
// Names are compared as Argo CD's cluster generator normalizes them
// (sources.NormalizedName): Application names are made of the normalized
// name, so "Prod_EU" listed next to an established "prod-eu" would take
// over its Application; it is a newcomer to that name like any other.
func (inv *Inventory) resolveNames(cs []*sources.Cluster) ([]*sources.Cluster, []Conflict) {
	byName := map[string][]*sources.Cluster{}
	for _, c := range cs {
		key := sources.NormalizedName(c.Name)
		byName[key] = append(byName[key], c)
	}
	served := make([]*sources.Cluster, 0, len(cs))
	var conflicts []Conflict
	for name, group := range byName {
		if len(group) == 1 {
			served = append(served, group[0])
			continue
		}
		var winner *sources.Cluster
		var since time.Time
		for _, c := range group {
			at := inv.establishedAt(c)
			if !at.IsZero() && (winner == nil || at.Before(since)) {
				winner, since = c, at
			}
		}
		// only a cluster in the last answer under name holds it. Two hold
		// it only when a version that compared names as listed served
		// both ("a_b" and "a-b"): both stay served, as they were, the
		// conflict reported; an upgrade drops neither from the answer
		var holders []*sources.Cluster
		for _, c := range group {
			if r := inv.recordOf(c); r != nil && r.Holds != "" && sources.NormalizedName(r.Holds) == name {
				holders = append(holders, c)
			}
		}
		kept := holders
		switch {
		case len(kept) > 0:
			sort.Slice(kept, func(i, j int) bool { return kept[i].Name < kept[j].Name })
		case winner != nil:
			kept = []*sources.Cluster{winner}
		}
		conflict := Conflict{Name: name}
		for _, c := range group {
			conflict.Sources = append(conflict.Sources, c.Source)
			if c.Name != name && !slices.Contains(conflict.Names, c.Name) {
				conflict.Names = append(conflict.Names, c.Name)
			}
		}
		sort.Strings(conflict.Sources)
		sort.Strings(conflict.Names)
		if len(kept) > 0 {
			conflict.KeptSource = kept[0].Source
			served = append(served, kept...)
		}
		conflicts = append(conflicts, conflict)
	}
	sort.Slice(served, func(i, j int) bool { return served[i].Name < served[j].Name }) // names as listed are unique here
	sort.Slice(conflicts, func(i, j int) bool { return conflicts[i].Name < conflicts[j].Name })
	return served, conflicts
}

func sameContent(a, b *Snapshot) bool {
	return a.Answered == b.Answered && a.Unsettled == b.Unsettled &&
		reflect.DeepEqual(a.Sources, b.Sources) &&
		reflect.DeepEqual(a.Conflicts, b.Conflicts) &&
		reflect.DeepEqual(a.Duplicates, b.Duplicates) &&
		reflect.DeepEqual(a.Unserved, b.Unserved) &&
		reflect.DeepEqual(a.Kept, b.Kept) &&
		reflect.DeepEqual(a.Departed, b.Departed) &&
		slices.Equal(a.Known, b.Known) &&
		len(a.Clusters) == len(b.Clusters) &&
		(len(a.Clusters) == 0 || reflect.DeepEqual(a.Clusters, b.Clusters))
}

func newConflicts(prev, next *Snapshot) []Conflict {
	var out []Conflict
	for _, c := range next.Conflicts {
		if !slices.ContainsFunc(prev.Conflicts, func(p Conflict) bool { return p.Name == c.Name }) {
			out = append(out, c)
		}
	}
	return out
}

func newDuplicates(prev, next *Snapshot) []Duplicate {
	var out []Duplicate
	for _, d := range next.Duplicates {
		if !slices.Contains(prev.Duplicates, d) {
			out = append(out, d)
		}
	}
	return out
}
