package inventory

// The departure rule: when a served cluster has left, when a drop is
// held, and the breaker over an interval's departures.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Departure decides when a served cluster has left. Argo CD deletes the
// Applications of a cluster as soon as an answer no longer lists it, so a
// departure is confirmed, never merely observed.
type Departure struct {
	// AfterListings is how many consecutive complete listings of its source
	// a served cluster must be absent from (or leaving in) before it leaves
	// the answer and its Secret may be pruned. Default 3.
	AfterListings int
	// GracePeriod must also have passed since the cluster was first seen
	// missing. Default 5m; negative means none.
	GracePeriod time.Duration
	// MaxFraction bounds a drop: when one complete listing makes more than
	// this fraction of a source's served clusters (and more than one)
	// missing at once, their departure is held: each needs HeldListings
	// listings instead of AfterListings. A mass drop is far more often a
	// lost role or subscription than a mass deletion. Default 0.25. The
	// drop is counted over the source's window (HeldListings intervals):
	// the clusters that vanished and departed within it count with those
	// missing now, so a loss spread over time is caught too.
	MaxFraction float64
	// HeldListings is what a held departure needs. Default 10.
	HeldListings int
	// MaxDeletions and MaxDeletionsPercent are the answer's breaker: the
	// shortest time between two regular listings of the source (its
	// interval less the jitter) confirms at most max(MaxDeletions,
	// MaxDeletionsPercent % of the source's served clusters) departures,
	// besides those released (acknowledged, or by HeldListings), which
	// always pass. When more are newly due in one listing, none of them is
	// confirmed: they are held, as in a mass drop. When fewer are due but
	// the departures confirmed within that time leave room for only some
	// (listings closer together, on change events), the others wait, still
	// served, for a later listing. Defaults 5 and 10, as the Secret
	// breaker's.
	MaxDeletions        int
	MaxDeletionsPercent float64
}

// DefaultDeparture is the departure rule the service ships with.
func DefaultDeparture() Departure {
	return Departure{AfterListings: 3, GracePeriod: 5 * time.Minute, MaxFraction: 0.25, HeldListings: 10,
		MaxDeletions: 5, MaxDeletionsPercent: 10}
}

// withDefaults fills the zero fields with DefaultDeparture's; a negative
// GracePeriod or MaxDeletionsPercent means none (0), so that a caller can
// ask for 0. Then it validates.
func (d Departure) withDefaults() (Departure, error) {
	def := DefaultDeparture()
	if d.AfterListings == 0 {
		d.AfterListings = def.AfterListings
	}
	d.GracePeriod = orNone(d.GracePeriod, def.GracePeriod)
	if d.MaxFraction == 0 {
		d.MaxFraction = def.MaxFraction
	}
	if d.HeldListings == 0 {
		d.HeldListings = max(def.HeldListings, d.AfterListings)
	}
	if d.MaxDeletions == 0 {
		d.MaxDeletions = def.MaxDeletions
	}
	d.MaxDeletionsPercent = orNone(d.MaxDeletionsPercent, def.MaxDeletionsPercent)
	if errs := d.Validate(field.NewPath("departure")); len(errs) > 0 {
		return d, errs.ToAggregate()
	}
	return d, nil
}

// orNone is v, def when v is zero, 0 when v is negative (none).
func orNone[T time.Duration | float64](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// Validate returns every problem of the rule, each with its path under
// path (departure, in the configuration file). It changes nothing; the
// configuration loader and New (after its defaults) both call it.
func (d Departure) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d.AfterListings < 1 {
		errs = append(errs, field.Invalid(path.Child("afterListings"), d.AfterListings, "must be at least 1 (one listing is never enough to confirm a departure)"))
	}
	if d.GracePeriod < 0 {
		errs = append(errs, field.Invalid(path.Child("gracePeriod"), d.GracePeriod.String(), "must be at least 0s"))
	}
	if d.MaxFraction <= 0 || d.MaxFraction > 1 {
		errs = append(errs, field.Invalid(path.Child("maxFraction"), d.MaxFraction, "must be above 0 and at most 1"))
	}
	if d.HeldListings < d.AfterListings {
		errs = append(errs, field.Invalid(path.Child("heldListings"), d.HeldListings, fmt.Sprintf("must be at least departure.afterListings (%d)", d.AfterListings)))
	}
	if d.MaxDeletions < 1 {
		errs = append(errs, field.Invalid(path.Child("maxDeletions"), d.MaxDeletions, "must be at least 1"))
	}
	if d.MaxDeletionsPercent < 0 || d.MaxDeletionsPercent > 100 {
		errs = append(errs, field.Invalid(path.Child("maxDeletionsPercent"), d.MaxDeletionsPercent, "must be from 0 to 100"))
	}
	return errs
}

// neededListings is how many listings a gone cluster must miss before its
// departure is confirmed: AfterListings; in a held mass drop, HeldListings,
// or with acknowledgements forever until it is acknowledged. A held
// cluster seen leaving is an ordinary departure from then on, unless the
// breaker held it.
func (l *lifecycle) neededListings(source string, g missing) int {
	r := g.r
	switch {
	case !r.Held:
		return l.rule.AfterListings
	case l.acked != nil && l.acked(source, g.key):
		return l.rule.AfterListings // stays Held: the breaker lets it pass
	case g.leaving != nil && !r.Blocked:
		r.Held = false
		return l.rule.AfterListings
	case l.acked == nil:
		return l.rule.HeldListings
	}
	return math.MaxInt
}

// confirmable reports whether the departure of g, due, may be confirmed:
// not while an operator pins the cluster (its record then says Pinned),
// nor while the pins cannot be read (a new leader whose view has not read
// the ledger yet: its record stays as it was), nor in a dry run (DryRun).
func (l *lifecycle) confirmable(source string, g missing) bool {
	pinned, known := false, true
	if l.pinned != nil {
		pinned, known = l.pinned(source, g.key)
	}
	switch {
	case !known:
		return false
	case pinned:
		g.r.Pinned, g.r.DryRun, g.r.Waiting = true, false, false // not due: no breaker's room to wait for
		return false
	case l.dryRun:
		g.r.Pinned, g.r.DryRun, g.r.Waiting = false, true, false
		return false
	}
	if g.r.DryRun {
		// held back by a dry run, perhaps for long: it waits for the
		// breaker's room, oldest first, instead of tripping it with
		// every other one a dry run held
		g.r.Waiting = true
	}
	g.r.Pinned, g.r.DryRun = false, false
	return true
}

// breaker lets through the due departures of one listing (now) within
// the budget of the source's interval: at most max(MaxDeletions,
// MaxDeletionsPercent % of the answered) departures from the answer
// (answered) within the shortest time between two regular listings
// (budget). When the departures newly due in this listing are over that
// limit on their own, the breaker trips: only those held and released
// (acknowledged, or by HeldListings) pass; the others, waiting ones
// included, are held and stay served. Otherwise the released ones pass
// whatever the budget, then the oldest others up to what the departures
// confirmed within the window left; the rest wait (Waiting), served, for
// a later listing, and no longer count towards a trip. It returns those
// to confirm, how many it held and how many wait.
func (l *lifecycle) breaker(due []missing, answered map[string]bool, now time.Time) (pass []missing, blocked, waiting int) {
	limit := max(l.rule.MaxDeletions, int(math.Ceil(float64(len(answered))*l.rule.MaxDeletionsPercent/100)))
	fresh, shrink := 0, 0
	for _, g := range due {
		if answered[g.key] {
			shrink++
			if !g.r.Waiting {
				fresh++
			}
		}
	}
	if fresh > limit {
		for _, g := range due {
			if g.r.Held { // released by its acknowledgement or HeldListings: never blocked again
				pass = append(pass, g)
				continue
			}
			g.r.Held, g.r.Blocked, g.r.Waiting = true, true, false
			blocked++
			l.keepServing(g)
		}
		return pass, blocked, 0
	}
	room := limit - l.recentSince(now.Add(-l.budget), false)
	if shrink <= room {
		return due, 0, 0
	}
	released := func(g missing) int {
		if g.r.Held {
			return 0
		}
		return 1
	}
	slices.SortFunc(due, func(a, b missing) int { // released ones first, then the oldest
		return cmp.Or(cmp.Compare(released(a), released(b)), a.r.MissingSince.Compare(b.r.MissingSince), strings.Compare(a.key, b.key))
	})
	for _, g := range due {
		switch {
		case !answered[g.key]:
		case g.r.Held || room > 0: // a released one passes whatever the room
			room--
		default:
			g.r.Waiting = true
			waiting++
			l.keepServing(g)
			continue
		}
		pass = append(pass, g)
	}
	return pass, 0, waiting
}

// recentSince counts the departures confirmed after since, only those
// that vanished when vanished is set.
func (l *lifecycle) recentSince(since time.Time, vanished bool) int {
	n := 0
	for _, d := range l.recent {
		if d.At.After(since) {
			if vanished {
				n += d.Vanished
			} else {
				n += d.Departed
			}
		}
	}
	return n
}

// remember adds the departures of one listing (now) from the answer to
// the recent ones.
func (l *lifecycle) remember(departed []missing, answered map[string]bool, now time.Time) {
	d := RecentDepartures{At: now.UTC().Round(0)}
	for _, g := range departed {
		if answered[g.key] {
			d.Departed++
			if g.leaving == nil && !g.r.Left && !g.r.Held {
				d.Vanished++
			}
		}
	}
	if d.Departed > 0 {
		l.recent = append(l.recent, d)
	}
}

// window is how long the source remembers a confirmed departure: the
// time of HeldListings intervals, at least one (the breaker's).
func (l *lifecycle) window() time.Duration {
	return time.Duration(max(l.rule.HeldListings, 1)) * l.interval
}

// forgetRecent forgets the departures confirmed before the window.
func (l *lifecycle) forgetRecent(now time.Time) {
	since := now.Add(-l.window())
	l.recent = slices.DeleteFunc(l.recent, func(d RecentDepartures) bool { return !d.At.After(since) })
}

// holds returns which gone clusters of one listing have their departure
// held: all of them in a mass drop, and those whose account the listing no
// longer covered (see sources.AccountLister). Only clusters gone without
// being seen leaving are ever asked.
func (l *lifecycle) holds(gone []missing, answered map[string]bool, accounts []string, now time.Time) func(missing) bool {
	if l.massDrop(gone, answered, now) {
		return func(missing) bool { return true }
	}
	if accounts == nil {
		return func(missing) bool { return false }
	}
	covered := make(map[string]bool, len(accounts))
	for _, a := range accounts {
		covered[strings.ToLower(a)] = true
	}
	return func(g missing) bool {
		a := g.r.Rendering.Account
		return a != "" && !covered[strings.ToLower(a)] && !inCoveredScope(covered, g.r.ID)
	}
}

// inCoveredScope reports whether a prefix of id ending in "/" (a scope,
// see sources.AccountLister) is covered.
func inCoveredScope(covered map[string]bool, id string) bool {
	id = strings.ToLower(id)
	for i := range len(id) {
		if id[i] == '/' && covered[id[:i+1]] {
			return true
		}
	}
	return false
}

// massDrop reports whether the clusters of the answer (answered: the
// source's part of it before this listing) absent in this listing (gone
// without being seen leaving: a cluster deleted upstream is seen leaving
// first; nor a pinned one, kept by an operator who knows it gone) are
// more than MaxFraction of that part, and either more than one
// or its only one. Clusters still departing from earlier listings count
// too, held ones included, so a loss spread over several listings (a
// role removed subscription by subscription) is caught as one drop, and
// clusters vanishing after part of it was held join it. So do the
// clusters that vanished and departed within the source's window (now
// back), in the count and in the served they are counted against: a loss
// slower than a departure (two clusters of twenty every few minutes) is
// a drop once it adds up. A lost role, token or subscription looks like
// that far more often than a deletion.
func (l *lifecycle) massDrop(gone []missing, answered map[string]bool, now time.Time) bool {
	absent := 0
	for _, g := range gone {
		if g.leaving == nil && !g.r.Left && !g.r.Pinned && answered[g.key] { // a pinned one is known gone
			absent++
		}
	}
	if absent == 0 {
		return false
	}
	vanished := l.recentSince(now.Add(-l.window()), true)
	return l.rule.isDrop(absent+vanished, len(answered)+vanished)
}

// isDrop reports whether missing clusters of the served ones are a mass
// drop: more than MaxFraction of them, and more than one or the only one.
func (d Departure) isDrop(missing, served int) bool {
	return (missing > 1 || missing == 1 && served == 1) && float64(missing) > d.MaxFraction*float64(served)
}
