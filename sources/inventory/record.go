package inventory

import (
	"strings"
	"time"
)

// recorded is what recording one listing did, copied under inv.mu for the
// logs written after it is released.
type recorded struct {
	err      error
	took     time.Duration
	clusters int
	res      listed
	// status, held and dry (departures a dry run keeps) are the source's
	// after the listing.
	status    SourceStatus
	held, dry int
}

// record records the outcome of one listing of st: the source's status,
// lifecycle and metrics, then a new snapshot and the subscribers, all under
// inv.mu; then the logs, after it.
func (inv *Inventory) record(st *sourceState, ls listing, err error, start time.Time, took time.Duration) {
	inv.mu.Lock()
	st.status.attempted(start, took)
	var res listed
	if err != nil {
		st.status.failed(err)
	} else {
		res = inv.recordListing(st, ls, start)
	}
	inv.metrics.observeListing(st.spec.Name, &st.status, took, err)
	prev, next, changed := inv.publish(start)
	inv.notify(changed, err == nil)
	rec := recorded{err: err, took: took, clusters: len(ls.clusters), res: res, status: st.status, held: st.life.held, dry: st.life.dry}
	inv.mu.Unlock()

	inv.logListing(st.spec, rec)
	if changed {
		inv.logSnapshot(prev, next)
	}
}

// recordListing applies a complete listing of st to its lifecycle, the
// remembered departures, its status and its lifecycle metrics. The caller
// holds inv.mu.
func (inv *Inventory) recordListing(st *sourceState, ls listing, start time.Time) listed {
	clusters := ls.clusters
	res := st.life.apply(st.spec.Name, ls, inv.answered(st.spec.Name), newServerClaims(inv.snap.Load().Clusters), start)
	st.life.holdNames(ls.servedBefore)
	for _, d := range res.departed {
		inv.departed[clusterKey{d.Source, d.ID}] = d
	}
	for i := range clusters {
		delete(inv.departed, clusterKey{st.spec.Name, clusters[i].Key()})
	}
	byPhase := countPhases(st.life.served)
	st.status.listed(start, clusters, len(st.life.served), byPhase)
	inv.metrics.observeLifecycle(st.spec.Name, byPhase, len(res.departed), &st.life)
	inv.endIfEmpty(st)
	st.seeding = false
	return res
}

// answered returns the keys of source's clusters in the current
// snapshot's answer. The caller holds inv.mu.
func (inv *Inventory) answered(source string) map[string]bool {
	out := map[string]bool{}
	for _, c := range inv.snap.Load().Clusters {
		if c.Source == source {
			out[c.Key()] = true
		}
	}
	return out
}

// publish merges a new snapshot and stores it, with the next version when
// its content changed. It returns the previous snapshot, the new one and
// whether it changed. The caller holds inv.mu.
func (inv *Inventory) publish(now time.Time) (prev, next *Snapshot, changed bool) {
	prev = inv.snap.Load()
	next = inv.merge(prev.Version, now)
	changed = !sameContent(prev, next)
	if changed {
		next.Version = prev.Version + 1
		inv.metrics.observeSnapshot(next)
	}
	// Stored even unchanged, under the same version: prev holds the
	// renderings the records held when it was merged, and keeping it would
	// keep those the records have replaced since for as long as nothing
	// changes.
	inv.snap.Store(next)
	if inv.follower {
		inv.scheduleJoin()
	}
	return prev, next, changed
}

// logListing logs the outcome of one listing of the source of spec: failed
// or complete, a mass drop held, departures confirmed. It needs no lock.
func (inv *Inventory) logListing(spec SourceSpec, rec recorded) {
	log := inv.logger.With("source", spec.Name, "provider", string(spec.Provider), "took", rec.took.Round(time.Millisecond).String())
	if rec.err != nil {
		log.Warn("listing failed; keeping the last complete listing", "error", rec.err.Error(),
			"consecutiveFailures", rec.status.ConsecutiveFailures, "stale", rec.status.Stale)
	} else {
		log.Debug("listing complete", "clusters", rec.clusters)
	}
	if rec.res.newlyHeld > 0 {
		log.Warn("served clusters missing as a mass drop, or with their account out of sight; holding their departure",
			"missing", rec.res.newlyHeld, "share", fraction(rec.res.newlyHeld, rec.status.Served+len(rec.res.departed)), "heldDepartures", rec.held)
	}
	if rec.res.blocked > 0 {
		log.Error("departure breaker tripped: more departures due in one listing than departure.maxDeletions allows; holding them until acknowledged",
			"held", rec.res.blocked, "heldDepartures", rec.held)
	}
	if rec.res.waiting > 0 {
		log.Warn("more departures due than departure.maxDeletions allows within one interval; serving them until a later listing",
			"waiting", rec.res.waiting)
	}
	if rec.dry > 0 && inv.dryRun {
		log.Warn("dry run: departures due are not confirmed; serving them", "dryRunDepartures", rec.dry)
	}
	for _, d := range rec.res.departed {
		log.Info("cluster departure confirmed; no longer served", "cluster", d.Name, "id", d.ID)
	}
}

// logSnapshot logs a changed snapshot: the conflicts and duplicates it
// adds to prev, then its version and counts. It needs no lock.
func (inv *Inventory) logSnapshot(prev, next *Snapshot) {
	for _, c := range newConflicts(prev, next) {
		inv.logger.Error("cluster name listed more than once; serving only the established cluster, if any",
			"cluster", c.Name, "sources", strings.Join(c.Sources, ","), "keptSource", c.KeptSource)
	}
	for _, d := range newDuplicates(prev, next) {
		inv.logger.Warn("cluster listed twice; serving one listing", "cluster", d.Name, "source", d.Source,
			"served", d.KeptName, "servedSource", d.KeptSource, "sameBy", d.Reason)
	}
	inv.logger.Info("snapshot changed", "version", next.Version, "clusters", len(next.Clusters),
		"conflicts", len(next.Conflicts), "duplicates", len(next.Duplicates))
}
