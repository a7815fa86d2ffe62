package inventory

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Run loads the ledger, if any, then lists every source now and then at
// its interval until ctx is cancelled, saving the records to the ledger
// after each listing; a source's hints (sources.Hinter) list it sooner
// (see HintQuiet). It returns once every loop has stopped. Only the leader
// runs it.
func (inv *Inventory) Run(ctx context.Context) {
	run := inv.startRun()
	// the term ends when ctx does, before this Run has returned and maybe
	// after the next term's Run has started: not loaded from then on. The
	// AfterFunc runs in a goroutine of its own, maybe after Run has
	// returned or not at all (stop won): the deferred call settles it.
	defer inv.unload(run)
	stop := context.AfterFunc(ctx, func() { inv.unload(run) })
	defer stop()
	if inv.ledger != nil && !inv.load(ctx) {
		return
	}
	inv.markLoaded(ctx, run)
	var wg sync.WaitGroup
	if r, ok := inv.ledger.(Repairer); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inv.repair(ctx, r.Repairs())
		}()
	}
	states := inv.statesNow()
	for _, st := range states {
		wg.Add(2)
		go func() {
			defer wg.Done()
			inv.loop(ctx, st)
		}()
		go func() {
			defer wg.Done()
			inv.runHints(ctx, st)
		}()
	}
	wg.Wait()
}

// repairDelay is how long the leader waits after someone else's write to
// the ledger before it saves (see repair): a burst of them (kubectl
// delete of many objects) is put back by one save. maxRepairDelay is the
// longest wait: someone who writes again right after each repair (a
// second process writing the ledger, which leader election should
// prevent) is answered later each time, up to the default interval of
// the listings, instead of once a second.
const (
	repairDelay    = time.Second
	maxRepairDelay = time.Minute
)

// repair saves the book again each time the ledger tells that someone
// else wrote to it (see Repairer), a delay after the first such write of
// a burst, until ctx ends: repairDelay, doubled for each write seen within
// twice the delay after the last repair, up to maxRepairDelay. A repair
// whose save fails (the API server out of reach, a write refused) is
// tried again after the next, doubled, delay, without waiting for another
// write; once one succeeds, the next repair waits repairDelay again.
// Without it the ledger stays as others left it, and every replica
// answers 503, until the leader's next listing. A save in progress is
// waited for (saveMu); before the first round of listings a repair saves
// nothing (see save), and that round's save puts the ledger back.
func (inv *Inventory) repair(ctx context.Context, repairs <-chan struct{}) {
	var delay time.Duration
	var last time.Time
	failed := false
	for {
		if !failed {
			select {
			case <-ctx.Done():
				return
			case <-repairs:
			}
		}
		delay = repairWait(delay, last, time.Now())
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		select {
		case <-repairs: // the same burst
		default:
		}
		wasFailing := failed
		failed = !inv.save(ctx)
		last = time.Now()
		if wasFailing && !failed { // the outage is over: a write of someone else is news again
			delay, last = 0, time.Time{}
		}
	}
}

// repairWait is the wait before a repair save asked for at now, the last
// repair's wait having been prev and its save done at last (zero: none).
func repairWait(prev time.Duration, last, now time.Time) time.Duration {
	if !last.IsZero() && now.Sub(last) < 2*prev {
		return min(2*prev, maxRepairDelay)
	}
	return repairDelay
}

// startRun counts a new Run, not loaded yet (see Loaded), and returns its
// number.
func (inv *Inventory) startRun() uint64 {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.runs++
	inv.loaded = false
	return inv.runs
}

// unload records that Run number run is not loaded (see Loaded), unless
// a later Run has started.
func (inv *Inventory) unload(run uint64) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if run == inv.runs {
		inv.loaded = false
	}
}

// markLoaded records that Run number run, whose term is ctx, has loaded
// the ledger, unless a later Run has started or the term has ended
// meanwhile (its end may have been recorded already). It tells the
// subscribers, so that what waited for it (the Secret reconciler's pass,
// woken by the load's own snapshot before) runs now.
func (inv *Inventory) markLoaded(ctx context.Context, run uint64) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if run != inv.runs || ctx.Err() != nil {
		return
	}
	inv.loaded = true
	inv.notify(true, false)
}

// Loaded reports whether the snapshot is of the Run in progress: a
// leader's Run loads the ledger at the start of each term, and until it
// has, the snapshot is the end of its last term, which another leader may
// have moved on from since (departures confirmed, clusters renamed). What
// writes from the snapshot (the Secret reconciler) waits for it. An
// inventory that follows a ledger, or that no Run has started (one listed
// by RefreshAll), is loaded.
func (inv *Inventory) Loaded() bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.loaded || inv.follower
}

// statesNow returns the sources' states as they are now: a restore may
// add or remove retired ones meanwhile.
func (inv *Inventory) statesNow() []*sourceState {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return slices.Clone(inv.states)
}

// RefreshAll lists every source once, concurrently, and returns the joined
// errors of the listings that failed. It is what `discover` uses.
func (inv *Inventory) RefreshAll(ctx context.Context) error {
	states := inv.statesNow()
	errs := make([]error, len(states))
	var wg sync.WaitGroup
	for i, st := range states {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = inv.refresh(ctx, st)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (inv *Inventory) loop(ctx context.Context, st *sourceState) {
	for {
		_ = inv.refresh(ctx, st) // recorded in status, metrics and logs
		inv.mu.Lock()
		ended := st.ended
		inv.mu.Unlock()
		if ended {
			return
		}
		t := time.NewTimer(inv.jittered(st.spec.Interval))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-st.trigger:
			t.Stop()
		}
	}
}

func (inv *Inventory) jittered(d time.Duration) time.Duration {
	if inv.jitter == 0 {
		return d
	}
	f := 1 + inv.jitter*(2*rand.Float64()-1)
	return time.Duration(float64(d) * f)
}

// refresh runs one listing of st and records its outcome. A listing cut
// short because ctx was cancelled (shutdown) is not recorded at all.
func (inv *Inventory) refresh(ctx context.Context, st *sourceState) error {
	lctx, cancel := context.WithTimeout(ctx, st.spec.Timeout)
	start := inv.now()
	var clusters []sources.Cluster
	var accounts []string
	var err error
	if al, ok := st.spec.Source.(sources.AccountLister); ok {
		clusters, accounts, err = al.ClustersAndAccounts(lctx)
		if accounts == nil {
			accounts = []string{}
		}
	} else {
		clusters, err = st.spec.Source.Clusters(lctx)
	}
	cancel()
	took := inv.now().Sub(start)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("timed out after %s: %w", st.spec.Timeout, err)
	}
	if err == nil && st.retired {
		err = inv.retiredMayList()
	}
	if err == nil {
		clusters, err = prepare(st.spec, clusters, inv.tenants)
	}
	var servedBefore []string
	if err == nil {
		servedBefore, err = inv.checkSeed(ctx, st, clusters)
	}
	if err != nil {
		err = fmt.Errorf("source %s: list clusters: %w", st.spec.Name, err)
	}
	inv.record(st, listing{clusters: clusters, accounts: accounts, servedBefore: servedBefore}, err, start, took)
	inv.save(ctx)
	return err
}

// prepare copies a listing's clusters, stamps each with its source, applies
// the tenant rules, normalizes servers and marks clusters that cannot be
// rendered as not ready. Two clusters with one identity fail the listing.
// What the clusters point to (labels, annotations, auth, namespaces) is
// shared with the source, never modified by either side (see
// sources.Source), so it is not copied: at 10,000 clusters copies would
// cost ~8 MiB.
func prepare(spec SourceSpec, in []sources.Cluster, tenants map[string]sources.TenantRule) ([]sources.Cluster, error) {
	out := make([]sources.Cluster, len(in))
	keys := make([]string, len(in)) // a sorted slice, not a map: at 10,000 clusters a map costs ~1 MiB more
	for i := range in {
		c := &out[i]
		*c = in[i]
		if c.Name == "" {
			return nil, fmt.Errorf("cluster %d has no name", i)
		}
		keys[i] = c.Key()
		if !c.Phase.Valid() || c.Phase == sources.PhaseAbsent {
			c.Phase = sources.PhaseDegraded // unknown is degraded, never absence
		}
		c.Source, c.Provider = spec.Name, spec.Provider
		if why := c.ApplyTenantRule(tenants, spec.TrustClusterLabels); why != "" && c.Ready {
			c.Ready, c.NotReadyReason = false, why
		}
		if !spec.TrustClusterLabels && spec.Kind != sources.KindFile {
			c.SetTenantLabel() // the owner's labels may not name a tenant; a file's are the operator's
		}
		c.DropAgentLabels()
		if srv, err := c.ValidServer(); err != nil {
			// a cluster its source lists not ready keeps the source's reason:
			// it may have no server because of it (an agent not bound yet)
			if c.Ready || c.NotReadyReason == "" {
				c.NotReadyReason = "invalid server: " + err.Error()
			}
			c.Ready = false
		} else {
			c.Server = srv
		}
		if err := c.Auth.Validate(); err != nil && c.Ready {
			c.Ready, c.NotReadyReason = false, "invalid auth: "+err.Error()
		}
		if c.Ready {
			c.NotReadyReason = ""
		} else if c.NotReadyReason == "" {
			c.NotReadyReason = "not ready upstream"
		}
	}
	slices.Sort(keys)
	for i := 1; i < len(keys); i++ {
		if keys[i] == keys[i-1] {
			return nil, fmt.Errorf("cluster id %q listed twice", keys[i])
		}
	}
	sources.SortByName(out)
	return out, nil
}
