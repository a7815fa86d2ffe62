package inventory

// Retired sources: the ledger holds records of a source the configuration
// no longer has (removed, or renamed: a renamed source is a new source).
// Its clusters are not forgotten at once, which would delete their
// Applications: the retired source lists nothing at every interval, so
// its served clusters go through the departure rule like any cluster that
// vanished, a mass drop held until acknowledged (or HeldListings with the
// in-memory ledger). Once its last record is gone, so is the source.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// defaultRetiredInterval is how often a retired source "lists" when no
// source is configured to give a shorter interval.
const defaultRetiredInterval = time.Minute

// retiredSource is the listing of a retired source: complete and empty.
type retiredSource struct{}

func (retiredSource) Clusters(context.Context) ([]sources.Cluster, error) { return nil, nil }

// retire adds a state for the source name that the book has records of and
// the configuration has not, synced (its clusters are served from the
// ledger at once) and marked retired; known: it was retired in the book
// restored before, so it is not logged again. The caller holds inv.mu.
func (inv *Inventory) retire(name string, provider sources.Provider, known bool) *sourceState {
	every := defaultRetiredInterval
	for _, st := range inv.states {
		if !st.retired {
			every = min(every, st.spec.Interval)
		}
	}
	st := &sourceState{
		spec:    SourceSpec{Name: name, Provider: provider, Source: retiredSource{}, Interval: every, Timeout: every},
		retired: true, trigger: make(chan struct{}, 1),
		life: lifecycle{rule: inv.rule, acked: inv.acked, pinned: inv.pinned, dryRun: inv.dryRun, interval: every, budget: time.Duration(float64(every) * (1 - inv.jitter)), tracked: map[string]*Record{}},
	}
	st.status = SourceStatus{SourceState: SourceState{Name: name, Provider: provider, Synced: true, Retired: true}, Interval: every.String()}
	inv.states = append(inv.states, st)
	inv.bySource[name] = st
	inv.metrics.initSource(name)
	if known { // retired in the last book already: said once
		return st
	}
	inv.logger.Warn("the ledger holds clusters of a source that is not configured; they depart as a vanished fleet does (held until acknowledged)",
		"source", name, "provider", string(provider))
	return st
}

// dropRetired removes every retired state, before a book is restored, and
// returns their names. The caller holds inv.mu.
func (inv *Inventory) dropRetired() map[string]bool {
	dropped := map[string]bool{}
	kept := inv.states[:0]
	for _, st := range inv.states {
		if st.retired {
			st.ended = true
			dropped[st.spec.Name] = true
			delete(inv.bySource, st.spec.Name)
			continue
		}
		kept = append(kept, st)
	}
	clear(inv.states[len(kept):])
	inv.states = kept
	return dropped
}

// endIfEmpty removes the retired source st once it has no record left:
// every cluster it had has departed. The caller holds inv.mu.
func (inv *Inventory) endIfEmpty(st *sourceState) {
	if !st.retired || len(st.life.tracked) > 0 {
		return
	}
	inv.logger.Info("every cluster of the retired source has departed; forgetting the source", "source", st.spec.Name)
	i := 0
	for ; i < len(inv.states) && inv.states[i] != st; i++ {
	}
	if i < len(inv.states) {
		inv.states = append(inv.states[:i], inv.states[i+1:]...)
	}
	delete(inv.bySource, st.spec.Name)
	st.ended = true
}

// retiredMayList fails a retired source's listing while a configured
// source has not completed one: that source may list the retired one's
// clusters (a renamed source, whose first listing failed), and until it
// has, no departure of the retired source is counted, as for any failed
// listing. It needs no lock.
func (inv *Inventory) retiredMayList() error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	var waiting []string
	for _, st := range inv.states {
		if !st.retired && !st.status.Synced {
			waiting = append(waiting, st.spec.Name)
		}
	}
	if len(waiting) > 0 {
		return fmt.Errorf("waiting for %s to complete a listing: a source that is not configured departs only once every configured source has listed (one may list its clusters)",
			strings.Join(waiting, ", "))
	}
	return nil
}
