package inventory

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// SourceState is what a snapshot says about one source.
type SourceState struct {
	Name     string           `json:"name"`
	Provider sources.Provider `json:"provider"`
	// Synced is true once the source has completed a listing.
	Synced bool `json:"synced"`
	// Stale is true when the latest listing failed and the snapshot holds
	// the last complete one.
	Stale bool `json:"stale"`
	// HeldDepartures counts served clusters of the source whose departure
	// is held by the mass-drop rule (see Departure.MaxFraction).
	HeldDepartures int `json:"heldDepartures"`
	// BlockedDepartures counts those of HeldDepartures the departure
	// breaker holds (more due at once than Departure.MaxDeletions allows),
	// not a mass drop.
	BlockedDepartures int `json:"blockedDepartures"`
	// WaitingDepartures counts served clusters of the source whose
	// departure is confirmed but waits for room under
	// Departure.MaxDeletions in the source's interval: not held.
	WaitingDepartures int `json:"waitingDepartures"`
	// PinnedDepartures counts served clusters of the source whose
	// departure was due but an operator's pin keeps them served (see
	// Options.Pinned); HeldDepartures does not count them.
	PinnedDepartures int `json:"pinnedDepartures"`
	// DryRunDepartures counts served clusters of the source whose
	// departure was due in a dry run (see Options.DryRun), which confirms
	// none.
	DryRunDepartures int `json:"dryRunDepartures"`
	// Retired is true for a source that is not configured any more but
	// whose clusters the ledger still holds: they depart as a vanished
	// fleet does, held until acknowledged.
	Retired bool `json:"retired,omitempty"`
}

// Conflict is a cluster name listed more than once, or names that Argo CD
// normalizes alike (see Name). The cluster that was served under that name
// first (Kept) keeps it; the others (newcomers) are not served. When none
// was served before, none is served.
type Conflict struct {
	// Name is the name the clusters share, as Argo CD normalizes it
	// (sources.NormalizedName).
	Name string `json:"name"`
	// Names are the clusters' names as listed, where they differ from
	// Name ("Prod_EU" next to "prod-eu").
	Names []string `json:"names,omitempty"`
	// Sources lists the source of each cluster with that name (a source may
	// appear twice when it listed the name twice).
	Sources []string `json:"sources"`
	// KeptSource is the source of the established cluster that keeps the
	// name, empty when none is served.
	KeptSource string `json:"keptSource,omitempty"`
}

// Duplicate is a cluster listed under another name by a second source: the
// same server URL, or the same cloud cluster (CloudID). Only the kept
// listing is in the snapshot's Clusters; the duplicate is neither served
// nor given a Secret, and is not treated as gone either.
type Duplicate struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	// ID is the duplicate listing's cluster ID: one source may list a name
	// twice.
	ID         string `json:"id"`
	KeptName   string `json:"keptName"`
	KeptSource string `json:"keptSource"`
	// Reason is "server" or "cloudID".
	Reason string `json:"reason"`
}

// Unserved is a listed cluster that is not served: pending (never usable
// yet), or never rendered (Reason says why).
type Unserved struct {
	Name   string        `json:"name"`
	Source string        `json:"source"`
	ID     string        `json:"id"`
	Phase  sources.Phase `json:"phase"`
	State  string        `json:"state,omitempty"`
	Reason string        `json:"reason,omitempty"`
}

// Kept is a served cluster whose latest listing could not be rendered: it
// is served from its last good rendering.
type Kept struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// Departed is a cluster whose departure this process confirmed: it is no
// longer served and its Secret may be pruned.
type Departed struct {
	Name   string    `json:"name"`
	Source string    `json:"source"`
	ID     string    `json:"id"`
	At     time.Time `json:"at"`
}

// Ref identifies a cluster: its source and its ID in that source.
type Ref struct {
	Source string `json:"source"`
	ID     string `json:"id"`
}

// Snapshot is an immutable view of the merged inventory. Callers must not
// modify it or anything it points to.
type Snapshot struct {
	// Version grows by one each time the content changes.
	Version uint64
	// Clusters are the served clusters, sorted by name: every cluster in
	// phase ready, degraded, leaving or absent whose departure is not yet
	// confirmed, each with its latest good rendering; name conflicts and
	// duplicates left out. They are the renderings the lifecycle's records
	// hold, shared by the snapshots made from them, never copies.
	Clusters []*sources.Cluster
	// Unserved lists clusters listed but not served, sorted by name.
	Unserved []Unserved
	// Kept lists served clusters whose latest listing could not be
	// rendered, sorted by name.
	Kept []Kept
	// Departed lists the departures this process confirmed recently,
	// sorted by source and ID.
	Departed []Departed
	// Sources in configuration order.
	Sources []SourceState
	// Conflicts sorted by name.
	Conflicts []Conflict
	// Duplicates sorted by name.
	Duplicates []Duplicate
	// Known identifies every cluster the inventory knows, served or not
	// (pending, in a name conflict, a duplicate), sorted by source and ID.
	Known []Ref
	// Answered: the book holds a cluster served in an earlier answer (an
	// established record), so the start-up barrier is behind it (see
	// Waiting).
	Answered bool
	// Unsettled: this replica follows a ledger it has read but not been
	// able to take (see Book.Unsettled), and why; it has no answer.
	Unsettled string
}

// Present reports whether a cluster of that name is known to the snapshot
// in any form: served, unserved, in a name conflict or a duplicate. A
// cluster that is not present is unknown to this process (it left before
// the process started, or its departure was confirmed).
func (s *Snapshot) Present(name string) bool {
	i := sort.Search(len(s.Clusters), func(i int) bool { return s.Clusters[i].Name >= name })
	if i < len(s.Clusters) && s.Clusters[i].Name == name {
		return true
	}
	for _, u := range s.Unserved {
		if u.Name == name {
			return true
		}
	}
	for _, c := range s.Conflicts {
		if c.Name == name || slices.Contains(c.Names, name) {
			return true
		}
	}
	for _, d := range s.Duplicates {
		if d.Name == name {
			return true
		}
	}
	return false
}

// Knows reports whether the inventory knows the cluster with that
// identity in that source, served or not: what decides whether its Secret
// is kept, whatever the name it was written under.
func (s *Snapshot) Knows(source, id string) bool {
	_, found := slices.BinarySearchFunc(s.Known, Ref{source, id}, compareRefs)
	return found
}

func compareRefs(a, b Ref) int {
	if c := strings.Compare(a.Source, b.Source); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// HasDeparted reports whether this process confirmed the departure of the
// cluster with that identity in that source.
func (s *Snapshot) HasDeparted(source, id string) bool {
	i := sort.Search(len(s.Departed), func(i int) bool {
		d := s.Departed[i]
		return d.Source > source || (d.Source == source && d.ID >= id)
	})
	return i < len(s.Departed) && s.Departed[i].Source == source && s.Departed[i].ID == id
}

// Source returns the state of the named source.
func (s *Snapshot) Source(name string) (SourceState, bool) {
	for _, st := range s.Sources {
		if st.Name == name {
			return st, true
		}
	}
	return SourceState{}, false
}

// Synced reports whether every source has completed a listing.
func (s *Snapshot) Synced() bool {
	for _, st := range s.Sources {
		if !st.Synced {
			return false
		}
	}
	return true
}

// Waiting returns the sources the start-up barrier waits for: until every
// source has completed a listing, no answer is given (503), no Secret is
// written and no cluster is established, since a source listing later
// could claim any cluster (a duplicate, a name conflict). Once an answer
// has been given (Answered), a source that has not listed yet (one added
// later, a bad credential) waits alone: the established clusters keep
// their names and servers against its newcomers, and its clusters, never
// served, join the answer once it lists. Nil: no barrier.
func (s *Snapshot) Waiting() []string {
	if s.Answered {
		return nil
	}
	var out []string
	for _, st := range s.Sources {
		if !st.Synced {
			out = append(out, st.Name)
		}
	}
	return out
}
