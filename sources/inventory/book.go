package inventory

import (
	"context"
	"slices"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// The seam between the inventory and its ledger: the leader's inventory
// loads the book before its first listing and saves it after each one;
// every replica's answering inventory follows the book and projects it.

// book returns the records of every source as a Book, each with its
// contest in the current snapshot. The caller holds inv.mu.
func (inv *Inventory) book() Book {
	b := Book{Sources: make([]SourceRecord, 0, len(inv.states))}
	n := 0
	for _, st := range inv.states {
		n += len(st.life.tracked)
	}
	b.Clusters = make([]Record, 0, n)
	cs := contestsOf(inv.snap.Load())
	for _, st := range inv.states {
		s := st.status
		b.Sources = append(b.Sources, SourceRecord{Name: st.spec.Name, Provider: st.spec.Provider, Synced: s.Synced,
			Stale: s.Stale, LastError: s.LastError, ConsecutiveFailures: s.ConsecutiveFailures, Recent: slices.Clone(st.life.recent)})
		for _, r := range st.life.tracked {
			b.Clusters = append(b.Clusters, *r)
			b.Clusters[len(b.Clusters)-1].Contest = cs.of(r)
		}
	}
	b.Sort()
	return b
}

// restore replaces the state of every source by what b holds and
// publishes the snapshot it makes. It keeps b's records, and modifies
// them, in b's own array (see Feed). The served records of a source that is
// not configured make it a retired source (retired.go); its other records
// are left out. The caller holds no lock.
func (inv *Inventory) restore(b Book) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	wasRetired := inv.dropRetired()
	for _, st := range inv.states {
		st.life.tracked, st.life.listings, st.life.recent = map[string]*Record{}, 0, nil
		st.status = SourceStatus{SourceState: SourceState{Name: st.spec.Name, Provider: st.spec.Provider}, Interval: st.spec.Interval.String()}
		st.seeding = inv.seed != nil && !inv.follower
	}
	providers := map[string]sources.Provider{}
	recent := map[string][]RecentDepartures{}
	for _, s := range b.Sources {
		providers[s.Name], recent[s.Name] = s.Provider, s.Recent
		if st := inv.bySource[s.Name]; st != nil {
			st.status.Synced, st.status.Stale, st.status.LastError, st.status.ConsecutiveFailures = s.Synced, s.Stale, s.LastError, s.ConsecutiveFailures
			st.seeding = st.seeding && !s.Synced
		}
	}
	for _, st := range inv.states {
		inv.metrics.observeRestored(st.spec.Name, &st.status)
	}
	for i := range b.Clusters {
		r := &b.Clusters[i] // tracked where it is: one array, not an allocation per record
		if r.Source == "" || r.ID == "" || r.Served && r.Rendering == nil {
			continue
		}
		st := inv.bySource[r.Source]
		if st == nil && r.Served {
			p := providers[r.Source]
			if p == "" {
				p = r.Rendering.Provider
			}
			st = inv.retire(r.Source, p, wasRetired[r.Source])
		}
		if st != nil {
			r.listing = 0
			st.life.tracked[r.ID] = r
		}
	}
	for _, st := range inv.states { // retired ones included
		st.life.recent = slices.Clone(recent[st.spec.Name])
	}
	inv.viewAll()
	inv.unsettled = ""
	_, _, changed := inv.publish(inv.now())
	inv.notify(changed, false)
	inv.followed = inv.follower
}

// scheduleJoin arranges for a follower's snapshot to be published again
// when its first joining cluster is due (see holdJoining); publish calls
// it. The caller holds inv.mu.
func (inv *Inventory) scheduleJoin() {
	if inv.joinTimer != nil {
		inv.joinTimer.Stop()
		inv.joinTimer = nil
	}
	if inv.joinAt.IsZero() {
		return
	}
	// at least a moment: a clock that does not move (a test's) must not
	// make it spin
	inv.joinTimer = time.AfterFunc(max(inv.joinAt.Sub(inv.now()), 10*time.Millisecond), func() {
		inv.mu.Lock()
		defer inv.mu.Unlock()
		_, _, changed := inv.publish(inv.now()) // schedules the next
		inv.notify(changed, false)
	})
}

// load restores the book the ledger holds, trying again with a growing
// wait until it succeeds or ctx ends. It reports whether it succeeded: a
// leader that cannot read the ledger must not list, or it would forget
// what the ledger holds (departures counted, drops held, renderings kept).
func (inv *Inventory) load(ctx context.Context) bool {
	wait := time.Second
	for {
		b, err := inv.ledger.Load(ctx)
		if err == nil {
			inv.restore(b)
			inv.logger.Info("ledger loaded; resuming the lifecycle", "clusters", len(b.Clusters), "sources", len(b.Sources))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		inv.logger.Error("cannot load the ledger; not listing until it can be read", "error", err.Error(), "retryIn", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// save writes the current book to the ledger, one save at a time, so the
// last save always holds the latest state, and reports whether every
// write succeeded (a save cut short by ctx's end did not). Nothing is
// written until every configured source has tried its first listing (see
// firstRoundDone): that is no failure.
func (inv *Inventory) save(ctx context.Context) bool {
	if inv.ledger == nil {
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	inv.saveMu.Lock()
	defer inv.saveMu.Unlock()
	inv.mu.Lock()
	if !inv.firstRoundDone() {
		inv.mu.Unlock()
		return true
	}
	b := inv.book()
	inv.mu.Unlock()
	ok := inv.saveBook(ctx, b)
	// records someone else wrote meanwhile: taken, or deleted, by a save
	// at once, so that the ledger adds up again for its readers
	if s, isStrays := inv.ledger.(Strays); isStrays {
		if strays := s.Strays(); len(strays) > 0 {
			inv.adopt(strays)
			inv.mu.Lock()
			b = inv.book()
			inv.mu.Unlock()
			ok = inv.saveBook(ctx, b)
		}
	}
	return ok
}

// saveBook saves b, logging and counting a failure, and reports whether
// it succeeded. The caller holds inv.saveMu.
func (inv *Inventory) saveBook(ctx context.Context, b Book) bool {
	err := inv.ledger.Save(ctx, b)
	if err != nil && ctx.Err() == nil {
		inv.metrics.ledgerErrors.Inc()
		inv.logger.Error("cannot save the ledger; replicas keep answering from the last saved book", "error", err.Error())
	}
	return err == nil
}

// firstRoundDone reports whether every configured source has tried a
// listing in this process, whatever its outcome. Until then a save would
// write records the next save rewrites: the clusters of the sources that
// list first become established once the others have listed (merge), so
// at a cold start each of their ClusterProfiles would be written twice
// (5,000 applies more of 25,000 writes at 10,000 clusters in two sources),
// and the save of the first listing would hold up the others'. Nothing is
// served before every source has listed (the start-up barrier), so the
// wait delays no answer; a source whose first listing fails ends the wait
// as one that succeeds. The caller holds inv.mu.
func (inv *Inventory) firstRoundDone() bool {
	for _, st := range inv.states {
		if !st.retired && st.status.LastAttempt.IsZero() {
			return false
		}
	}
	return true
}

// Follow makes inv a projection of the ledger behind feed: each book the
// feed delivers replaces inv's state and publishes its snapshot, as the
// leader's own inventory would make it from the same records. It returns
// when ctx ends. An inventory that follows must not Run.
func (inv *Inventory) Follow(ctx context.Context, feed Feed) {
	inv.mu.Lock()
	inv.follower = true
	inv.mu.Unlock()
	feed.Watch(ctx, func(b Book) {
		if b.Unsettled != "" {
			inv.unsettle(b.Unsettled)
			return
		}
		inv.restore(b)
	})
}

// viewAll makes every source's view of its records again, and its served
// counts. The caller holds inv.mu.
func (inv *Inventory) viewAll() {
	for _, st := range inv.states {
		st.life.view()
		byPhase := countPhases(st.life.served)
		st.status.Served = len(st.life.served)
		st.status.Absent = byPhase[sources.PhaseAbsent] + byPhase[sources.PhaseLeaving]
	}
}

// adopt takes records the ledger found after the leader loaded it (see
// Strays) as a restart would load them: a served cluster stays served and
// goes through the departure rule if its source does not list it. A
// record of an identity this process tracks is left out (its own is the
// newer), and so is one of a source that is not configured (a new
// leader's load would retire that source; a retired source added while
// the sources run would never list): the next save deletes them. The
// caller holds no lock.
func (inv *Inventory) adopt(records []Record) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	took := false
	for i := range records {
		r := records[i]
		st := inv.bySource[r.Source]
		if r.ID == "" || r.Served && r.Rendering == nil || st == nil || st.retired || st.life.tracked[r.ID] != nil {
			inv.logger.Warn("the ledger holds a record this process did not write; not taken, the next save deletes it",
				"source", r.Source, "id", r.ID)
			continue
		}
		r.listing = 0 // not seen in a listing of this process
		st.life.tracked[r.ID] = &r
		took = true
		inv.logger.Warn("the ledger holds a record this process did not write (a deposed leader's late write, a restored object); taken as a restart would load it",
			"source", r.Source, "id", r.ID, "served", r.Served)
	}
	if took {
		inv.viewAll()
		_, _, changed := inv.publish(inv.now())
		inv.notify(changed, false)
	}
}

// unsettle makes an inventory that follows a ledger and has no book yet
// publish a snapshot that says why (Snapshot.Unsettled): the feed has
// read the ledger, and it does not add up. One that has a book keeps it.
func (inv *Inventory) unsettle(reason string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.followed {
		return
	}
	inv.unsettled, inv.followed = reason, true
	_, _, changed := inv.publish(inv.now())
	inv.notify(changed, false)
}
