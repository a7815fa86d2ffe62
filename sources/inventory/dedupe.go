package inventory

import (
	"slices"
	"sort"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// dedupe keeps one listing per cluster: clusters sharing a server URL or a
// CloudID are one cluster. The listing kept is the established one, else
// the one whose source's kind ranks first under prefer (see kindOrder),
// then the first by source and name, so the choice is stable. established
// and kind tell when a listing was established (zero if it is not) and the
// kind of its source.
func dedupe(cs []*sources.Cluster, prefer Preference, established func(*sources.Cluster) time.Time,
	kind func(*sources.Cluster) sources.Kind) ([]*sources.Cluster, []Duplicate) {
	rankListings(cs, kindOrder(prefer), established, kind)
	byServer := map[string]*sources.Cluster{}
	byKey := map[string]*sources.Cluster{} // by sources.ServerKey
	byCloud := map[string]*sources.Cluster{}
	kept := make([]*sources.Cluster, 0, len(cs))
	var dups []Duplicate
	for _, c := range cs {
		first, reason := byServer[c.Server], "server"
		if first == nil && established(c).IsZero() {
			// another spelling of a server already served is a duplicate
			// for a newcomer only: two clusters served before under two
			// spellings stay served (dropping one would delete its
			// Applications)
			first = byKey[sources.ServerKey(c.Server)]
		}
		if first == nil && c.CloudID != "" && established(c).IsZero() {
			// a cloud id is a duplicate for a newcomer only, as another
			// spelling of a server is: two established clusters whose
			// listings learn one cloud id (a credential read again) both
			// stay served
			first, reason = byCloud[c.CloudID], "cloudID"
		}
		if first != nil {
			dups = append(dups, Duplicate{Name: c.Name, Source: c.Source, ID: c.Key(), KeptName: first.Name, KeptSource: first.Source, Reason: reason})
			continue
		}
		byServer[c.Server] = c
		if k := sources.ServerKey(c.Server); byKey[k] == nil {
			byKey[k] = c
		}
		if c.CloudID != "" {
			byCloud[c.CloudID] = c
		}
		kept = append(kept, c)
	}
	sort.Slice(dups, func(i, j int) bool {
		if dups[i].Name != dups[j].Name {
			return dups[i].Name < dups[j].Name
		}
		return dups[i].Source < dups[j].Source
	})
	return kept, dups
}

// rankListings sorts cs, best listing first: established ones (earliest
// first), then by the rank of their source's kind in order, then by source
// and name.
func rankListings(cs []*sources.Cluster, order []sources.Kind, established func(*sources.Cluster) time.Time,
	kind func(*sources.Cluster) sources.Kind) {
	type ranked struct {
		c    *sources.Cluster
		rank int
		at   time.Time // when established
	}
	rs := make([]ranked, len(cs))
	for i, c := range cs {
		r := ranked{c: c, at: established(c)}
		if r.at.IsZero() {
			r.rank = 1 + kindRank(order, kind(c))
		}
		rs[i] = r
	}
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		switch {
		case a.rank != b.rank:
			return a.rank < b.rank
		case !a.at.Equal(b.at):
			return a.at.Before(b.at)
		case a.c.Source != b.c.Source:
			return a.c.Source < b.c.Source
		}
		return a.c.Name < b.c.Name
	})
	for i := range rs {
		cs[i] = rs[i].c
	}
}

// kindOrder returns the kinds of source in the order dedupe prefers their
// listings of one cluster: the preferred kind first, then file (clusters
// written by hand), then the other.
//
//	prefer    order
//	cloud     cloud (EKS, AKS), file (static), manager (Rancher)
//	rancher   manager (Rancher), file (static), cloud (EKS, AKS)
func kindOrder(prefer Preference) []sources.Kind {
	if prefer == PreferRancher {
		return []sources.Kind{sources.KindManager, sources.KindFile, sources.KindCloud}
	}
	return []sources.Kind{sources.KindCloud, sources.KindFile, sources.KindManager}
}

// kindRank is k's position in order; an empty or unknown kind ranks last.
func kindRank(order []sources.Kind, k sources.Kind) int {
	if i := slices.Index(order, k); i >= 0 {
		return i
	}
	return len(order)
}
