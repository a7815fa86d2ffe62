package inventory

import (
	"time"
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
}

// Status returns the live status of every source.
func (inv *Inventory) Status() Status {
	snap := inv.Snapshot()
	inv.mu.Lock()
	defer inv.mu.Unlock()
	out := Status{SnapshotVersion: snap.Version, Clusters: len(snap.Clusters), Conflicts: nonNil(snap.Conflicts),
		Duplicates: nonNil(snap.Duplicates), Unserved: nonNil(snap.Unserved), Kept: nonNil(snap.Kept), Departed: nonNil(snap.Departed)}
	for i, st := range inv.states {
		s := st.status
		s.SourceState = snap.Sources[i]
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
