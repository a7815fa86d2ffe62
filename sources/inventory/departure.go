package inventory

// The departure rule: when a served cluster has left, when a drop is
// held, and the breaker over one listing's departures.

import (
	"fmt"
	"math"
	"strings"
	"time"
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

func (d Departure) withDefaults() (Departure, error) {
	def := DefaultDeparture()
	if d.AfterListings == 0 {
		d.AfterListings = def.AfterListings
	}
	if d.GracePeriod == 0 {
		d.GracePeriod = def.GracePeriod
	}
	if d.GracePeriod < 0 {
		d.GracePeriod = 0
	}
	if d.MaxFraction == 0 {
		d.MaxFraction = def.MaxFraction
	}
	if d.HeldListings == 0 {
		d.HeldListings = max(def.HeldListings, d.AfterListings)
	}
	if d.MaxDeletions == 0 {
		d.MaxDeletions = def.MaxDeletions
	}
	if d.MaxDeletionsPercent == 0 {
		d.MaxDeletionsPercent = def.MaxDeletionsPercent
	}
	switch {
	case d.MaxDeletions < 0 || d.MaxDeletionsPercent < 0 || d.MaxDeletionsPercent > 100:
		return d, fmt.Errorf("departure maxDeletions %d, maxDeletionsPercent %v: must be at least 0, the percentage at most 100",
			d.MaxDeletions, d.MaxDeletionsPercent)
	case d.AfterListings < 1:
		return d, fmt.Errorf("departure afterListings %d: must be at least 1", d.AfterListings)
	case d.MaxFraction <= 0 || d.MaxFraction > 1:
		return d, fmt.Errorf("departure maxFraction %v: must be above 0 and at most 1", d.MaxFraction)
	case d.HeldListings < d.AfterListings:
		return d, fmt.Errorf("departure heldListings %d: must be at least afterListings (%d)", d.HeldListings, d.AfterListings)
	}
	return d, nil
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

// breaker lets through the due departures of one listing if they are at
// most max(MaxDeletions, MaxDeletionsPercent % of servedBefore), else only
// those held and released (acknowledged, or by HeldListings): the others
// are held and stay served. It returns those to confirm and how many it
// held.
func (l *lifecycle) breaker(source string, due []missing, servedBefore int) ([]missing, int) {
	limit := max(l.rule.MaxDeletions, int(math.Ceil(float64(servedBefore)*l.rule.MaxDeletionsPercent/100)))
	if len(due) <= limit {
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
func (l *lifecycle) holds(gone []missing, servedBefore int, accounts []string) func(missing) bool {
	if l.massDrop(gone, servedBefore) {
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
		return a != "" && !covered[strings.ToLower(a)]
	}
}

// massDrop reports whether the clusters absent in this listing and not
// held yet (gone without being seen leaving: a cluster deleted upstream is
// seen leaving first) are more than MaxFraction of the clusters served
// before it, and either more than one or the source's only one. Clusters
// still departing from earlier listings count too, so a loss spread over
// several listings (a role removed subscription by subscription) is caught
// as one drop: the window is the departure's own. A lost role, token or
// subscription looks like that far more often than a deletion.
func (l *lifecycle) massDrop(gone []missing, servedBefore int) bool {
	absent := 0
	for _, g := range gone {
		if g.leaving == nil && !g.r.Left && !g.r.Held {
			absent++
		}
	}
	return l.rule.isDrop(absent, servedBefore)
}

// isDrop reports whether missing clusters of the served ones are a mass
// drop: more than MaxFraction of them, and more than one or the only one.
func (d Departure) isDrop(missing, served int) bool {
	return (missing > 1 || missing == 1 && served == 1) && float64(missing) > d.MaxFraction*float64(served)
}
