package inventory

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Record is what the inventory knows of one cluster of one source across
// listings: the whole state of its lifecycle, nothing derived from the
// process. The ledger keeps it (see Ledger), so that every replica answers
// from the same records and a new leader resumes where the last one was.
type Record struct {
	// Source and ID identify the cluster (ID is the cluster's Key).
	Source string `json:"source"`
	ID     string `json:"id"`
	// Rendering is the latest good rendering in its current phase, served
	// while Served; nil when the cluster never had one.
	Rendering *sources.Cluster `json:"rendering,omitempty"`
	// Served is set once the cluster was ready or degraded with a good
	// rendering: from then on it stays served until its departure is
	// confirmed.
	Served bool `json:"served,omitempty"`
	// Unserved is how the latest listing had a cluster that is not served
	// (pending, never rendered, leaving before it was ever served).
	Unserved *Unserved `json:"unserved,omitempty"`
	// KeptReason is why the latest listing of a served cluster could not be
	// rendered: it is served from its last good rendering.
	KeptReason string `json:"keptReason,omitempty"`
	// Missed counts consecutive complete listings of its source the
	// cluster was absent from or leaving in, since MissingSince, up to
	// the departure's HeldListings: no decision depends on more, and a
	// count that went on would change the record, which the ledger
	// writes on change only, at every listing of a drop held until an
	// operator acknowledges it.
	Missed       int       `json:"missed,omitempty"`
	MissingSince time.Time `json:"missingSince,omitzero"`
	// Held: its departure is part of a mass drop, or was held by the
	// departure breaker (Blocked), and needs HeldListings or an
	// acknowledgement.
	Held bool `json:"held,omitempty"`
	// Blocked: the breaker held it. Unlike a mass drop's, being seen
	// leaving does not release it: too many departures at once are held
	// whatever the upstream says.
	Blocked bool `json:"blocked,omitempty"`
	// Left: the cluster was seen leaving upstream since it went missing.
	// Its departure is a deletion, never part of a drop.
	Left bool `json:"left,omitempty"`
	// Waiting: its departure was due, and the breaker let it wait for
	// room in the source's interval (see Departure.MaxDeletions); it no
	// longer counts towards a trip.
	Waiting bool `json:"waiting,omitempty"`
	// Pinned: its departure was due, and an operator's pin on its
	// ClusterProfile (see Options.Pinned) keeps it served until the pin
	// is removed. Not a held departure: it needs no acknowledgement.
	Pinned bool `json:"pinned,omitempty"`
	// DryRun: its departure was due in a dry run (Options.DryRun), which
	// confirms none: it stays served until a process that is not a dry
	// run confirms it.
	DryRun bool `json:"dryRun,omitempty"`
	// Established is when the cluster was first in a snapshot after the
	// start-up barrier: it then keeps its name against a newcomer and its
	// listing against a duplicate.
	Established time.Time `json:"established,omitzero"`
	// Holds is the name the cluster was last served under: against
	// another cluster listed under that name it keeps it, whatever their
	// ages, so a cluster renamed onto a name in use is the newcomer.
	Holds string `json:"holds,omitempty"`
	// Acknowledged: an operator acknowledged the cluster's departure (see
	// Options.Acknowledged). It is read from the ledger, never written to
	// the record.
	Acknowledged bool `json:"-"`
	// Pin: an operator pinned the cluster's ClusterProfile (see
	// Options.Pinned). Like Acknowledged, it is read from the ledger,
	// never written to the record.
	Pin bool `json:"-"`
	// Contest says how the leader's latest answer has a served cluster
	// that another contests (a name conflict, a duplicate listing). It is
	// set in the books the leader saves (see Inventory.book), for the
	// ledger to show; it is never loaded, and no answer depends on it.
	Contest *Contest `json:"-"`

	// listing is the number of this process's last listing that had the
	// cluster (0: none yet); listings are counted per process, the ledger
	// keeps Missed instead.
	listing uint64
}

// Departing reports whether r is served while missing from its source:
// the only time an acknowledgement of its departure means anything.
func (r *Record) Departing() bool { return r.Served && r.Missed > 0 }

// lifecycle is one source's view of its clusters across listings. It is
// owned by the inventory and used under its lock.
type lifecycle struct {
	rule Departure
	// acked, when set, holds a mass drop until an operator acknowledges
	// each departure (or the cluster is seen leaving); nil releases it
	// after HeldListings listings.
	acked func(source, id string) bool
	// pinned, when set, keeps a due departure served while an operator
	// pins the cluster, or while it cannot tell (see Options.Pinned).
	pinned func(source, id string) (pinned, known bool)
	// dryRun confirms no departure (see Options.DryRun).
	dryRun  bool
	tracked map[string]*Record
	// listings counts the complete listings applied by this process.
	listings uint64
	// interval is the source's; budget, the breaker's window, the
	// shortest time between two of its regular listings (the interval
	// less its jitter): see Departure.
	interval, budget time.Duration
	// recent are the departures confirmed within the window, oldest
	// first; the ledger keeps them in the source's record.
	recent []RecentDepartures

	// What the records say now (see view).
	served   []*sources.Cluster
	unserved []Unserved
	kept     []Kept
	held     int
	blocked  int // of held, those the departure breaker holds
	waiting  int // departures confirmed that wait for the breaker's room
	pins     int // departures due that a pin keeps served
	dry      int // departures due that a dry run keeps served
}

// listing is one complete listing of a source: its clusters and, from a
// sources.AccountLister, the accounts it covered (nil from other sources).
type listing struct {
	clusters []sources.Cluster
	accounts []string
	// servedBefore: the identities of the listed clusters a version
	// without a ledger served (see Inventory.checkSeed).
	servedBefore []string
}

// listed is the outcome of one complete listing for a lifecycle.
type listed struct {
	departed []Departed
	// newlyHeld counts departures the mass-drop rule held in this listing,
	// blocked those the breaker held, waiting those the breaker left
	// for a later listing (see Departure.MaxDeletions).
	newlyHeld, blocked, waiting int
}

// apply takes one complete, prepared listing of the source (sorted by
// name, keys unique) and moves every cluster along its lifecycle:
//
//	listing says                        before          after
//	pending                             never served    not served (Unserved)
//	pending                             served          served, degraded (re-provisioning)
//	ready or degraded, rendered         any             served with this rendering
//	ready or degraded, not rendered     served          served with its last rendering (Kept)
//	ready or degraded, not rendered     never served    not served (Unserved, with the reason)
//	leaving                             never served    not served (Unserved); forgotten once absent
//	absent                              never served    forgotten
//	leaving, or absent                  served          served with its last rendering, phase leaving
//	                                                    or absent, one more listing missed; after
//	                                                    AfterListings (HeldListings in a mass drop)
//	                                                    and GracePeriod: departed, unless an
//	                                                    operator pins it (Pinned: served on), or
//	                                                    in a dry run (DryRun: served on)
//
// servers tells which cluster serves a server: a served cluster whose
// listing moves it onto another cluster's server keeps its last rendering
// (Kept), as one that could not be rendered does. One server is one
// cluster in Argo CD, and the server a listing gives may be the cluster
// owner's to write (Rancher's authorized endpoint): a move must neither
// push the cluster serving it out of the answer nor take its place.
//
// answered holds the keys of the source's clusters in the answer before
// this listing (the last snapshot's Clusters): a drop and the breaker are
// counted against them, so this listing's newcomers never dilute a drop,
// and the source's listings served from another source (duplicates) or
// losing their name never pad it.
func (l *lifecycle) apply(source string, ls listing, answered map[string]bool, servers *serverClaims, now time.Time) listed {
	l.listings++
	var gone []missing
	for i := range ls.clusters {
		if m, leaving := l.take(source, &ls.clusters[i], servers); leaving {
			gone = append(gone, m)
		}
	}
	for key, r := range l.tracked {
		switch {
		case r.listing == l.listings: // in this listing (leaving ones are in gone already)
		case !r.Served:
			delete(l.tracked, key) // never served: nothing to confirm
		default:
			gone = append(gone, missing{key: key, r: r})
		}
	}
	l.forgetRecent(now)
	out := l.depart(source, gone, l.holds(gone, answered, ls.accounts, now), answered, now)
	l.view()
	return out
}

// missing is a served cluster absent from a listing, or leaving in it.
type missing struct {
	key string
	r   *Record
	// leaving is the cluster as listed when it is leaving, nil when absent.
	leaving *sources.Cluster
}

// take moves one listed cluster c along its lifecycle (apply's table). A
// served cluster leaving is left to depart: take returns it, with leaving
// true.
func (l *lifecycle) take(source string, c *sources.Cluster, servers *serverClaims) (m missing, leaving bool) {
	key := c.Key()
	r := l.tracked[key]
	if r == nil {
		r = &Record{Source: source, ID: key}
		l.tracked[key] = r
	}
	r.listing = l.listings
	r.Unserved, r.KeptReason = nil, ""
	phase := c.Phase.OrReady()
	if phase == sources.PhaseLeaving {
		if r.Served {
			return missing{key, r, c}, true
		}
		r.Unserved = unserved(c, phase, "")
		return missing{}, false
	}
	r.Missed, r.MissingSince, r.Held, r.Blocked, r.Left, r.Waiting, r.Pinned, r.DryRun = 0, time.Time{}, false, false, false, false, false, false
	switch {
	case phase == sources.PhasePending && !r.Served:
		r.Unserved = unserved(c, phase, c.NotReadyReason)
		return missing{}, false
	case phase == sources.PhasePending:
		phase = sources.PhaseDegraded // an established cluster re-provisioning has not left
	case !phase.Valid() || phase == sources.PhaseAbsent:
		phase = sources.PhaseDegraded // unknown is degraded, never absence
	}
	moved := c.Ready && r.Served && r.Rendering != nil && r.Rendering.Server != c.Server
	if moved {
		if holder, taken := servers.heldByAnother(c.Server, Ref{Source: source, ID: key}); taken {
			r.Rendering = withPhase(r.Rendering, phase, c.State)
			r.KeptReason = serverTakenReason(c.Server, holder)
			return missing{}, false
		}
		servers.claim(c.Server, Ref{Source: source, ID: key})
	}
	switch {
	case c.Ready:
		c.Phase = phase
		keepCloudIdentity(c, r.Rendering)
		c.AccountLabel = "" // not part of a rendering: one the ledger gives back has none, and held compares them
		r.Rendering, r.Served = held(r.Rendering, c), true
	case r.Rendering == nil:
		r.Unserved = unserved(c, phase, c.NotReadyReason)
	default:
		r.Rendering = withPhase(r.Rendering, phase, c.State)
		r.KeptReason = c.NotReadyReason
	}
	return missing{}, false
}

// depart counts one more listing missed by each gone cluster and confirms
// the departure of those that missed enough (the last row of apply's
// table), within the breaker; the others stay served with their last
// rendering.
func (l *lifecycle) depart(source string, gone []missing, hold func(missing) bool, answered map[string]bool, now time.Time) listed {
	var out listed
	var due []missing
	for _, g := range gone {
		r := g.r
		if r.Missed == 0 {
			r.MissingSince = now
		}
		if g.leaving != nil {
			r.Left = true
		} else if !r.Held && !r.Left && !r.Pinned && hold(g) { // an operator keeps a pinned one already
			r.Held = true
			out.newlyHeld++
		}
		if r.Missed < max(l.rule.AfterListings, l.rule.HeldListings) {
			r.Missed++
		}
		if r.Missed >= l.neededListings(source, g) && now.Sub(r.MissingSince) >= l.rule.GracePeriod {
			if l.confirmable(source, g) {
				due = append(due, g)
				continue
			}
		} else {
			r.Pinned, r.DryRun = false, false
		}
		l.keepServing(g)
	}
	due, out.blocked, out.waiting = l.breaker(due, answered, now)
	l.remember(due, answered, now)
	for _, g := range due {
		delete(l.tracked, g.key)
		out.departed = append(out.departed, Departed{Name: g.r.Rendering.Name, Source: source, ID: g.key, At: now})
	}
	return out
}

// keepServing serves a gone cluster from its last rendering, in phase
// leaving or absent.
func (l *lifecycle) keepServing(g missing) {
	phase, state := sources.PhaseAbsent, g.r.Rendering.State
	if g.leaving != nil {
		phase, state = sources.PhaseLeaving, g.leaving.State
	}
	g.r.Rendering = withPhase(g.r.Rendering, phase, state)
}

// view derives from the records what a snapshot shows of the source: the
// served clusters, the unserved, the kept renderings and the held
// departures. It reads nothing but the records, so a replica that holds
// the same records shows the same.
func (l *lifecycle) view() {
	l.served, l.unserved, l.kept, l.held, l.blocked, l.waiting, l.pins, l.dry = l.served[:0:0], nil, nil, 0, 0, 0, 0, 0
	for _, r := range l.tracked {
		switch {
		case r.Served:
			l.served = append(l.served, r.Rendering)
			if r.KeptReason != "" {
				l.kept = append(l.kept, Kept{Name: r.Rendering.Name, Source: r.Source, Reason: r.KeptReason})
			}
			if r.Held && !r.Pinned && !r.DryRun && r.Departing() { // an acknowledged one kept by a pin or a dry run is counted there
				l.held++
				if r.Blocked {
					l.blocked++
				}
			}
			if r.Waiting && r.Departing() {
				l.waiting++
			}
			if r.Pinned && r.Departing() {
				l.pins++
			}
			if r.DryRun && r.Departing() {
				l.dry++
			}
		case r.Unserved != nil:
			l.unserved = append(l.unserved, *r.Unserved)
		}
	}
	sort.Slice(l.served, func(i, j int) bool { return l.served[i].Name < l.served[j].Name })
	sort.Slice(l.unserved, func(i, j int) bool { return l.unserved[i].Name < l.unserved[j].Name })
	sort.Slice(l.kept, func(i, j int) bool { return l.kept[i].Name < l.kept[j].Name })
}

// departedTTL is how long a confirmed departure is remembered, for the
// Secret reconciler to prune its Secret; maxDeparted bounds how many.
const (
	departedTTL = 24 * time.Hour
	maxDeparted = 100_000
)

// sortedDeparted returns the remembered departures sorted by source, then
// ID, after forgetting those older than departedTTL and, past maxDeparted,
// the oldest.
func sortedDeparted(m map[clusterKey]Departed, now time.Time) []Departed {
	out := make([]Departed, 0, len(m))
	for k, d := range m {
		if now.Sub(d.At) >= departedTTL {
			delete(m, k)
			continue
		}
		out = append(out, d)
	}
	if len(out) > maxDeparted {
		sort.Slice(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
		for _, d := range out[maxDeparted:] {
			delete(m, clusterKey{d.Source, d.ID})
		}
		out = out[:maxDeparted]
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// clusterKey identifies a cluster across sources: its source and ID. Its
// strings are the cluster's own: a lookup allocates nothing.
type clusterKey struct{ source, id string }

// fraction formats a share for logs.
func fraction(n, of int) string {
	if of == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.0f%%", math.Round(100*float64(n)/float64(of)))
}
