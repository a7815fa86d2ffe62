package inventory

import (
	"slices"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Contest is how the answer has a served cluster that another cluster
// contests: its name (a name conflict) or its listing (a duplicate). It is
// derived from the snapshot, never part of what a record keeps (see
// Record.Contest).
type Contest struct {
	// Answered: the cluster is in the answer; in a name conflict, it
	// holds the name.
	Answered bool
	// Conflict is the name conflict the cluster is part of, if any.
	Conflict *Conflict
	// Duplicate, if set, is the cluster listed again by another source,
	// and which listing is served instead of this one.
	Duplicate *Duplicate
}

// contests finds, in a snapshot, the served clusters contested by
// another: nil when the snapshot has no conflict and no duplicate, so a
// fleet without either costs a save nothing.
type contests struct {
	conflicts map[string]*Conflict // by name, as Argo CD normalizes it
	// duplicates by the duplicate listing's source and ID
	duplicates map[clusterKey]*Duplicate
	// answered are the clusters in the answer whose names are in a
	// conflict, by source and ID
	answered map[clusterKey]bool
}

// contestsOf indexes the conflicts and duplicates of s.
func contestsOf(s *Snapshot) *contests {
	if len(s.Conflicts) == 0 && len(s.Duplicates) == 0 {
		return nil
	}
	cs := &contests{conflicts: make(map[string]*Conflict, len(s.Conflicts)),
		duplicates: make(map[clusterKey]*Duplicate, len(s.Duplicates)), answered: map[clusterKey]bool{}}
	for i := range s.Conflicts {
		cs.conflicts[s.Conflicts[i].Name] = &s.Conflicts[i]
	}
	for i := range s.Duplicates {
		d := &s.Duplicates[i]
		cs.duplicates[clusterKey{d.Source, d.ID}] = d
	}
	for _, c := range s.Clusters {
		if cs.conflicts[sources.NormalizedName(c.Name)] != nil {
			cs.answered[clusterKey{c.Source, c.Key()}] = true
		}
	}
	return cs
}

// of returns the contest of r, a copy of the snapshot's parts of it: nil
// for a cluster nobody contests, or one that is not served.
func (cs *contests) of(r *Record) *Contest {
	if cs == nil || !r.Served || r.Rendering == nil {
		return nil
	}
	if d := cs.duplicates[clusterKey{r.Source, r.ID}]; d != nil {
		dup := *d
		return &Contest{Duplicate: &dup}
	}
	c := cs.conflicts[sources.NormalizedName(r.Rendering.Name)]
	if c == nil || !slices.Contains(c.Sources, r.Source) {
		return nil
	}
	conflict := *c
	return &Contest{Conflict: &conflict, Answered: cs.answered[clusterKey{r.Source, r.ID}]}
}
