package inventory

import (
	"context"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Book is everything that decides an answer: one Record per cluster the
// inventory knows and one SourceRecord per source. A snapshot is a
// function of the book and the configuration alone (see Inventory.Follow),
// so every replica holding the same book answers the same, and a leader
// that loads it resumes where the last one stopped.
type Book struct {
	// Sources sorted by name.
	Sources []SourceRecord `json:"sources"`
	// Clusters sorted by source, then ID.
	Clusters []Record `json:"clusters"`
	// Unsettled, set by a Feed in a book of nothing else, says why the
	// feed has read the ledger but cannot deliver it: its objects do not
	// add up (a save in progress or cut short, a record that cannot be
	// read). A feed sends it at most once, before its first book, so that
	// a replica that has no book yet answers a 503 with the reason
	// instead of not answering at all. Never saved.
	Unsettled string `json:"-"`
}

// SourceRecord is what the ledger keeps of one source. It changes when
// the source's state does (its first complete listing, a failure, a
// recovery) and, while the source fails, at each failed listing (its
// error and their count: one small write an interval); never at a
// listing that succeeds: steady state writes nothing. Recent changes
// when a departure is confirmed, and when one leaves the window.
type SourceRecord struct {
	Name     string           `json:"name"`
	Provider sources.Provider `json:"provider"`
	// Synced is set once the source has completed a listing.
	Synced bool `json:"synced"`
	// Stale: the latest listing failed; the records hold the last complete
	// one.
	Stale               bool   `json:"stale,omitempty"`
	LastError           string `json:"lastError,omitempty"`
	ConsecutiveFailures int    `json:"consecutiveFailures,omitempty"`
	// Recent are the departures the source's lifecycle confirmed within
	// its departure window, one entry per listing that confirmed any,
	// oldest first: what the answer's breaker and a drop spread over
	// time count (see Departure).
	Recent []RecentDepartures `json:"recent,omitempty"`
}

// RecentDepartures are the departures of clusters in the answer that one
// listing confirmed.
type RecentDepartures struct {
	At time.Time `json:"at"`
	// Departed counts them; Vanished counts those of them that went
	// missing without being seen leaving, and whose departure was not
	// held: a later drop counts them with its own.
	Departed int `json:"departed"`
	Vanished int `json:"vanished,omitempty"`
}

// Ledger keeps the book where every replica and every restart finds it:
// the Kubernetes API (sources/inventory/clusterprofile), or the process's
// memory where there is none (Memory). Only the leader writes it.
type Ledger interface {
	// Load returns the book as last saved: an empty book when nothing was
	// ever saved. The leader loads it once, before its first listing. The
	// book's slices are the caller's own, as a Feed's.
	Load(ctx context.Context) (Book, error)
	// Save makes the ledger hold b, writing only what differs from what it
	// holds. An error may leave part of b saved; the next Save writes the
	// rest.
	Save(ctx context.Context, b Book) error
}

// Strays is implemented by a ledger that can find records it holds but
// neither loaded nor wrote: a deposed leader's late create, an object
// restored from a backup. The leader takes them as a restart would load
// them (see Inventory.adopt); those it does not take, the next save
// deletes.
type Strays interface {
	// Strays returns the records found since the last call, and forgets
	// them.
	Strays() []Record
}

// Repairer is implemented by a ledger that sees what others write to it
// (an object edited or deleted by hand, a deposed leader's late write).
// Its readers answer no book that does not add up, so the leader saves
// again soon after such a write (see Inventory.Run), not only after its
// next listing.
type Repairer interface {
	// Repairs receives when someone else's write was seen since the last
	// receive.
	Repairs() <-chan struct{}
}

// Feed is the ledger as its readers see it.
type Feed interface {
	// Watch calls fn with the whole book once the feed has synced, then
	// after every change, until ctx ends. Calls are serial and may
	// coalesce several changes. A book may come without its renderings'
	// CAs (a follower's): what follows a feed serves answers, which carry
	// none. Each book's slices are fn's own, to keep and modify; the
	// renderings they point to are shared and never modified.
	Watch(ctx context.Context, fn func(Book))
}

// Memory is a Ledger and its Feed in the process's memory, for a
// deployment without a Kubernetes API. It promises nothing across
// restarts or replicas: a new process starts from an empty book.
type Memory struct {
	mu      sync.Mutex
	book    Book
	changed chan struct{}
}

// NewMemory returns an empty in-memory ledger.
func NewMemory() *Memory { return &Memory{changed: make(chan struct{})} }

// Load implements Ledger.
func (m *Memory) Load(context.Context) (Book, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.book.clone(), nil
}

// Save implements Ledger. Like the Kubernetes ledger it keeps no record's
// Contest, which it has nowhere to show.
func (m *Memory) Save(_ context.Context, b Book) error {
	b = b.clone()
	for i := range b.Clusters {
		b.Clusters[i].Contest = nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if reflect.DeepEqual(m.book, b) {
		return nil
	}
	m.book = b
	close(m.changed)
	m.changed = make(chan struct{})
	return nil
}

// Watch implements Feed: the memory is synced from the start.
func (m *Memory) Watch(ctx context.Context, fn func(Book)) {
	for {
		m.mu.Lock()
		b, changed := m.book.clone(), m.changed
		m.mu.Unlock()
		fn(b)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// clone copies the book's slices; the records' renderings are immutable
// and shared.
func (b Book) clone() Book {
	out := Book{Sources: append([]SourceRecord(nil), b.Sources...), Clusters: append([]Record(nil), b.Clusters...)}
	for i := range out.Sources {
		out.Sources[i].Recent = slices.Clone(out.Sources[i].Recent)
	}
	if out.Sources == nil {
		out.Sources = []SourceRecord{}
	}
	if out.Clusters == nil {
		out.Clusters = []Record{}
	}
	return out
}

// Sort orders the book as its fields document.
func (b *Book) Sort() {
	sort.Slice(b.Sources, func(i, j int) bool { return b.Sources[i].Name < b.Sources[j].Name })
	sort.Slice(b.Clusters, func(i, j int) bool {
		if b.Clusters[i].Source != b.Clusters[j].Source {
			return b.Clusters[i].Source < b.Clusters[j].Source
		}
		return b.Clusters[i].ID < b.Clusters[j].ID
	})
}
