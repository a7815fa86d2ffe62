package inventory

import (
	"slices"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// SourceStatus is the live status of one source, for /status and logs.
type SourceStatus struct {
	SourceState
	Interval            string    `json:"interval"`
	LastAttempt         time.Time `json:"lastAttempt,omitzero"`
	LastSuccess         time.Time `json:"lastSuccess,omitzero"`
	LastDuration        string    `json:"lastDuration,omitempty"`
	LastError           string    `json:"lastError,omitempty"`
	ConsecutiveFailures int       `json:"consecutiveFailures"`
	// Clusters and NotReady count the last complete listing (NotReady:
	// listed clusters that could not be rendered from it).
	Clusters int `json:"clusters"`
	NotReady int `json:"notReady"`
	// Served counts the source's served clusters, Absent those of them
	// served from their last rendering while their departure is counted.
	Served int `json:"served"`
	Absent int `json:"absent"`
	// Hints is the state of the source's change stream, for a source that
	// has one (sources.Hinter).
	Hints *sources.HintStatus `json:"hints,omitempty"`
}

// Status is the live status of the inventory.
type Status struct {
	SnapshotVersion uint64         `json:"snapshotVersion"`
	Clusters        int            `json:"clusters"`
	Sources         []SourceStatus `json:"sources"`
	Conflicts       []Conflict     `json:"conflicts"`
	Duplicates      []Duplicate    `json:"duplicates"`
	// Unserved are listed clusters that are not served (pending, or never
	// rendered), Kept served clusters whose latest listing could not be
	// rendered, Departed recently confirmed departures.
	Unserved []Unserved `json:"unserved"`
	Kept     []Kept     `json:"kept"`
	Departed []Departed `json:"departed"`
	// NoAnswer is why this replica answers every request 503 (see
	// Snapshot.Unsettled): the ledger it follows does not add up, or its
	// view of the ledger is behind it. Empty while it answers.
	NoAnswer string `json:"noAnswer,omitempty"`
}

// Status returns the live status of every source.
func (inv *Inventory) Status() Status {
	snap := inv.Snapshot()
	inv.mu.Lock()
	defer inv.mu.Unlock()
	out := Status{SnapshotVersion: snap.Version, Clusters: len(snap.Clusters), Conflicts: nonNil(snap.Conflicts),
		Duplicates: nonNil(snap.Duplicates), Unserved: nonNil(snap.Unserved), Kept: nonNil(snap.Kept), Departed: nonNil(snap.Departed),
		NoAnswer: snap.Unsettled}
	for _, st := range inv.states {
		s := st.status
		if i := slices.IndexFunc(snap.Sources, func(ss SourceState) bool { return ss.Name == st.spec.Name }); i >= 0 {
			s.SourceState = snap.Sources[i]
		}
		if h, ok := st.spec.Source.(sources.Hinter); ok {
			hs := h.HintStatus()
			s.Hints = &hs
		}
		out.Sources = append(out.Sources, s)
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// attempted records the start and duration of a listing, successful or
// not. The caller holds inv.mu.
func (s *SourceStatus) attempted(start time.Time, took time.Duration) {
	s.LastAttempt = start
	s.LastDuration = took.Round(time.Millisecond).String()
}

// failed records a failed listing: the source keeps its last complete
// listing, stale once it has one. The caller holds inv.mu.
func (s *SourceStatus) failed(err error) {
	s.LastError = err.Error()
	s.ConsecutiveFailures++
	s.Stale = s.Synced
}

// listed records a complete listing started at start, after the lifecycle
// applied it: served clusters, byPhase of them. The caller holds inv.mu.
func (s *SourceStatus) listed(start time.Time, clusters []sources.Cluster, served int, byPhase map[sources.Phase]int) {
	s.Served = served
	s.Absent = byPhase[sources.PhaseAbsent] + byPhase[sources.PhaseLeaving]
	s.LastError, s.ConsecutiveFailures, s.Stale = "", 0, false
	s.Synced, s.LastSuccess = true, start
	s.Clusters, s.NotReady = len(clusters), 0
	for _, c := range clusters {
		if !c.Ready {
			s.NotReady++
		}
	}
}

// countPhases counts served clusters by phase.
func countPhases(served []*sources.Cluster) map[sources.Phase]int {
	byPhase := map[sources.Phase]int{}
	for _, c := range served {
		byPhase[c.Phase]++
	}
	return byPhase
}
