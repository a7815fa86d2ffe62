package inventory

// The departure rule: when a served cluster has left, when a drop is
// held, and the breaker over one listing's departures.

import (
	"fmt"
	"math"
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
	// lost role or subscription than a mass deletion. Default 0.25.
	MaxFraction float64
	// HeldListings is what a held departure needs. Default 10.
	HeldListings int
	// MaxDeletions and MaxDeletionsPercent are the answer's breaker: one
	// listing confirms at most max(MaxDeletions, MaxDeletionsPercent % of
	// the source's served clusters) departures; when more are due, none of
	// them is confirmed: they are held, as in a mass drop (acknowledged
	// ones pass). Defaults 5 and 10, as the Secret breaker's.
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

// breaker lets through the due departures of one listing if those in the
// answer (answered) are at most max(MaxDeletions, MaxDeletionsPercent % of
// the answered), else only those held and released (acknowledged, or by
// HeldListings): the others are held and stay served. It returns those to
// confirm and how many it held.
func (l *lifecycle) breaker(source string, due []missing, answered map[string]bool) ([]missing, int) {
	limit := max(l.rule.MaxDeletions, int(math.Ceil(float64(len(answered))*l.rule.MaxDeletionsPercent/100)))
	shrink := 0
	for _, g := range due {
		if answered[g.key] {
			shrink++
		}
	}
	if shrink <= limit {
		return due, 0
	}
	var pass []missing
	blocked := 0
	for _, g := range due {
		if g.r.Held { // released by its acknowledgement or HeldListings: never blocked again
			pass = append(pass, g)
			continue
		}
		g.r.Held, g.r.Blocked = true, true
		blocked++
		l.keepServing(g)
	}
	return pass, blocked
}

// holds returns which gone clusters of one listing have their departure
// held: all of them in a mass drop, and those whose account the listing no
// longer covered (see sources.AccountLister). Only clusters gone without
// being seen leaving are ever asked.
func (l *lifecycle) holds(gone []missing, answered map[string]bool, accounts []string) func(missing) bool {
	if l.massDrop(gone, answered) {
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
// first) are more than MaxFraction of that part, and either more than one
// or its only one. Clusters still departing from earlier listings count
// too, held ones included, so a loss spread over several listings (a
// role removed subscription by subscription) is caught as one drop, and
// clusters vanishing after part of it was held join it: the window is the
// departure's own. A lost role, token or
// subscription looks like that far more often than a deletion.
func (l *lifecycle) massDrop(gone []missing, answered map[string]bool) bool {
	absent := 0
	for _, g := range gone {
		if g.leaving == nil && !g.r.Left && answered[g.key] {
			absent++
		}
	}
	return l.rule.isDrop(absent, len(answered))
}

// isDrop reports whether missing clusters of the served ones are a mass
// drop: more than MaxFraction of them, and more than one or the only one.
func (d Departure) isDrop(missing, served int) bool {
	return (missing > 1 || missing == 1 && served == 1) && float64(missing) > d.MaxFraction*float64(served)
}
