package clusterprofile

import (
	"crypto/sha256"
	"sync"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// written is the record each of this process's objects holds, as it
// loaded it or is writing it (put before the write is sent, forgotten if
// it fails), by the digest of its record annotation: the feed's
// informer takes a record it reads back from here instead of decoding a
// second copy of it (at 10,000 clusters ~30 MiB on the leader). The
// records held here are never modified once put, nor their renderings
// (see sources.Source), so the feed shares them. A follower writes
// nothing and decodes every record. Which digest an object holds is
// remembered with the object (stored.record), not here.
type written struct {
	mu    sync.RWMutex
	bySum map[[sha256.Size]byte]*writtenRecord
	// stale names the objects the feed saw holding a record this process
	// did not write (see edited), or deleted (see deleted)
	stale map[string]staleness
	// configMap is what the feed last saw the ConfigMap hold (see
	// storedSources; nil: deleted, or not ours), configMapSeen whether it
	// saw anything since the last takeConfigMap
	configMap     []byte
	configMapSeen bool
	// sources is what this process last wrote to the ConfigMap, loaded
	// from it, or is writing to it: the ConfigMap seen holding anything
	// else was written by someone else
	sources []byte
	// ours names the objects this process is deleting: their deletion is
	// not someone else's
	ours map[string]bool
	// repair is told of each write of someone else noted (see
	// Ledger.Repairs); nil until asked for
	repair chan struct{}
}

// sawConfigMap notes what the feed saw the ConfigMap hold (nil: deleted,
// or another owner's). A follower notes nothing.
func (w *written) sawConfigMap(stored []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.bySum == nil {
		return
	}
	w.configMap, w.configMapSeen = stored, true
	if string(stored) != string(w.sources) {
		w.tell()
	}
}

// wrote records what this process wrote (or loaded, or is writing) to the
// ConfigMap: sawConfigMap tells a repair when it sees anything else.
func (w *written) wrote(sources []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sources = sources
}

// deleting records that this process is deleting the object name: the
// deletion the feed sees next is noted (see deleted), not told as a
// repair.
func (w *written) deleting(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ours == nil {
		w.ours = map[string]bool{}
	}
	w.ours[name] = true
}

// notDeleted is deleting undone: the delete of name was not sent, or failed,
// and no event of it comes.
func (w *written) notDeleted(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.ours, name)
}

// repairs returns the channel tell sends on, made on the first call.
func (w *written) repairs() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.repair == nil {
		w.repair = make(chan struct{}, 1)
	}
	return w.repair
}

// tell asks for a repair, if anyone listens, without waiting: one asked
// for and not taken yet stands for any number. The caller holds w.mu.
func (w *written) tell() {
	select {
	case w.repair <- struct{}{}:
	default: // pending already, or nobody listens (a nil channel)
	}
}

// takeConfigMap returns what sawConfigMap noted last, if anything since
// the last call.
func (w *written) takeConfigMap() ([]byte, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.configMapSeen
	w.configMapSeen = false
	return w.configMap, seen
}

// staleness is what the feed saw someone else do to an object.
type staleness int

const (
	// staleEdited: the object holds a record this process did not write
	staleEdited staleness = iota + 1
	// staleDeleted: the object was deleted
	staleDeleted
)

// edited notes that the object name holds a record this process did not
// write: someone else's edit, or a deposed leader's late write. Once this
// process has loaded or written the ledger, its next save writes the
// object again: until then the object's record is not the one the sums
// hold (SumsKey), and no reader gets a new book. A follower notes
// nothing.
func (w *written) edited(name string) { w.note(name, staleEdited) }

// deleted notes that the object name was deleted: by someone else (kubectl
// delete, a deposed leader's late delete) or by this process's own save
// (which forgets the object itself). Once this process has loaded or
// written the ledger, its next save creates the object again if its book
// still holds the record: until then the objects do not add up to the
// counts (CountsKey), and no reader gets a new book. Someone else's
// deletion asks for a repair (see Ledger.Repairs), this process's own does
// not (see deleting). A follower notes nothing.
func (w *written) deleted(name string) { w.note(name, staleDeleted) }

// note remembers what happened to the object name, the latest news
// first: a deletion is not undone by an edit seen before it.
func (w *written) note(name string, what staleness) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.bySum == nil {
		return
	}
	if w.stale == nil {
		w.stale = map[string]staleness{}
	}
	w.stale[name] = what
	if w.ours[name] {
		// this process's own delete: its event, or the object as deleted,
		// whose record is forgotten once deleted (see Ledger.deleteAllBut)
		if what == staleDeleted {
			delete(w.ours, name)
		}
		return
	}
	w.tell()
}

// takeEdited returns the objects edited and deleted note, and forgets
// them.
func (w *written) takeEdited() map[string]staleness {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.stale
	w.stale = nil
	return out
}

// put remembers r, whose annotation has digest sum, in place of the
// record of digest old that its object held (zero: none known). A record
// of that digest already held is kept: it is the same record (a save puts
// every record, changed or not), and the feed's objects share it; a copy
// would hold each record twice once the next save ran.
func (w *written) put(old, sum [sha256.Size]byte, r inventory.Record, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.bySum == nil {
		w.bySum = map[[sha256.Size]byte]*writtenRecord{}
	}
	if old != sum {
		delete(w.bySum, old)
	}
	if _, ok := w.bySum[sum]; !ok {
		r.Acknowledged, r.Pin = false, false // read from the object, never from the record
		r.Contest = nil                      // the leader's, for this save's status only
		w.bySum[sum] = &writtenRecord{Record: &r, name: name}
	}
}

// writtenRecord is a record this process wrote or loaded, and the name of
// the object that holds it: another object holding the same record is
// not this process's (see Ledger.findStrays).
type writtenRecord struct {
	*inventory.Record
	name string
}

// forget drops the record of digest sum: its object is deleted, or a
// write of it failed.
func (w *written) forget(sum [sha256.Size]byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.bySum, sum)
}

// get returns the record whose annotation has digest sum, shared (the
// caller must not modify it), and the name of the object that holds it.
func (w *written) get(sum [sha256.Size]byte) (*inventory.Record, string, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	r, ok := w.bySum[sum]
	if !ok {
		return nil, "", false
	}
	return r.Record, r.name, true
}
