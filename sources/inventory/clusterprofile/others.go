package clusterprofile

import (
	"context"
	"crypto/sha256"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// What others write to the ledger's objects (an edit or delete by hand, a
// deposed leader's late write, an object restored from a backup): the
// leader's feed notes it (see written) and asks for a repair (see
// Repairs): the leader's next save, a second later, puts the ledger back
// as its book says, or takes a record it did not know.

// forgetEdited forgets what is stored of the objects someone else edited
// or deleted (see written.edited, written.deleted), so that this save
// writes them as they should be: an edited object is applied again, a
// deleted one created again (a create, so that a name someone else took
// meanwhile is not taken over). So for the ConfigMap: this save writes
// it again unless it holds what this save would write. The caller holds
// l.mu.
func (l *Ledger) forgetEdited() (unknown []string) {
	if stored, seen := l.written.takeConfigMap(); seen && string(stored) != string(l.sources) {
		// someone else's write or delete (or an event of one of ours
		// overtaken by a later save: then this save writes it again,
		// unchanged)
		l.sources = stored
		l.written.wrote(stored)
	}
	stale := l.written.takeEdited()
	if len(stale) == 0 {
		return nil
	}
	for id, s := range l.known {
		switch stale[s.name] {
		case staleEdited:
			s.meta = [sha256.Size]byte{}
		case staleDeleted:
			delete(l.known, id)
		}
		delete(stale, s.name)
	}
	for name, what := range stale {
		if what == staleEdited {
			unknown = append(unknown, name)
		}
	}
	return unknown
}

// findStrays reads the objects named, edited by someone else and unknown
// to this process (see forgetEdited), and takes the records of those
// that are this installation's as known: the inventory takes them as a
// restart would load them (Strays), and the next save keeps or deletes
// them as it does any other. An object whose record cannot be read is
// left: the feed logs it, and no reader takes a book until it is fixed
// or deleted, as Load refuses it. The caller holds l.mu.
func (l *Ledger) findStrays(ctx context.Context, names []string) []error {
	var errs []error
	for _, name := range names {
		obj, err := l.profiles().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			l.written.edited(name) // the next save reads it again
			errs = append(errs, fmt.Errorf("get clusterprofile %s: %w", name, err))
			continue
		}
		if obj.GetLabels()[LabelOwner] != l.opts.OwnerID || obj.GetLabels()[LabelManager] != Manager {
			continue
		}
		r, err := recordOf(obj)
		if err != nil {
			continue
		}
		if s := l.known[identity(r.Source, r.ID)]; s != nil {
			if s.name != name {
				// a second object of a known identity: the leader's is the
				// record, this one would never add up
				l.doomed = append(l.doomed, doomedOf(obj))
				errs = append(errs, l.deleteDoomed(ctx)...)
			}
			continue
		}
		s := l.storedOf(obj, &r)
		s.record = sha256.Sum256([]byte(obj.GetAnnotations()[AnnotationRecord]))
		l.known[identity(r.Source, r.ID)] = s
		l.written.put([sha256.Size]byte{}, s.record, r, name)
		l.strays = append(l.strays, r)
	}
	return errs
}

// Repairs implements inventory.Repairer: it receives when this process's
// feed (see Watch), once this process has loaded a record from the ledger
// or written one, sees someone else's write: a ClusterProfile of this
// installation holding a record this process did not write, deleted
// other than by this process's save, or the ConfigMap holding other
// source records than this process wrote. The leader's next save puts
// them back (see forgetEdited).
func (l *Ledger) Repairs() <-chan struct{} { return l.written.repairs() }

// Strays implements inventory.Strays: the records of objects of this
// installation that a save found and this process neither loaded nor
// wrote (a deposed leader's late create, an object restored from a
// backup).
func (l *Ledger) Strays() []inventory.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.strays
	l.strays = nil
	return out
}

// doomedObject is an object of ours that a save deletes (see
// Ledger.doomed): its name, and the uid and resource version it was
// read with, so that an object written since is not deleted.
type doomedObject struct{ name, uid, resourceVersion string }

func doomedOf(obj metav1.Object) doomedObject {
	return doomedObject{name: obj.GetName(), uid: string(obj.GetUID()), resourceVersion: obj.GetResourceVersion()}
}

// deleteDoomed deletes the doomed objects, each as it was read, and
// keeps those whose delete failed for the next save. The caller holds
// l.mu.
func (l *Ledger) deleteDoomed(ctx context.Context) []error {
	doomed := l.doomed
	l.doomed = nil
	failed := make([]bool, len(doomed))
	for i := range failed {
		failed[i] = true // until deleted: forEach may not call fn at all
	}
	errs := forEach(ctx, len(doomed), Writers, func(i int) error {
		d := doomed[i]
		err := l.deleteProfile(ctx, d.name, types.UID(d.uid), d.resourceVersion)
		switch {
		case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err): // deleted, or no longer as read
			failed[i] = false
			return nil
		default:
			return fmt.Errorf("delete clusterprofile %s, a second object of its identity: %w", d.name, err)
		}
	})
	for i, d := range doomed {
		if failed[i] {
			l.doomed = append(l.doomed, d)
		}
	}
	return errs
}

// deleteProfile deletes the ClusterProfile name if it is still the object
// uid at resourceVersion rv, recorded as this process's own deletion (see
// written.deleting) so that its event asks for no repair.
func (l *Ledger) deleteProfile(ctx context.Context, name string, uid types.UID, rv string) error {
	l.written.deleting(name)
	err := l.profiles().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if err != nil {
		l.written.notDeleted(name)
	}
	return err
}

// deleteAsWritten deletes the object of s if it still holds the record
// this process wrote or loaded, and as it was read right before: never an
// object another leader has written since (a deposed leader's late save,
// its lease checked before a network delay). An object that holds another
// record is not deleted this time, and its record is taken as known, so
// that a leader whose record someone edited by hand deletes it at its next
// save. Its caller touches nothing else of s (see forEach).
func (l *Ledger) deleteAsWritten(ctx context.Context, s *stored) error {
	obj, err := l.meta.Resource(Resource).Namespace(l.opts.Namespace).Get(ctx, s.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get clusterprofile %s to delete it: %w", s.name, err)
	case obj.GetLabels()[LabelOwner] != l.opts.OwnerID || obj.GetLabels()[LabelManager] != Manager:
		return nil // ours is gone: the name holds someone else's object, never ours to delete
	}
	if sum := sha256.Sum256([]byte(obj.GetAnnotations()[AnnotationRecord])); s.record != ([sha256.Size]byte{}) && sum != s.record {
		l.written.forget(s.record)
		s.record = sum
		return fmt.Errorf("clusterprofile %s holds a record this process did not write (another leader's, or an edit): not deleted", s.name)
	}
	if err := lease.Check(ctx); err != nil { // again: a read went before
		return err
	}
	err = l.deleteProfile(ctx, s.name, obj.GetUID(), obj.GetResourceVersion())
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("clusterprofile %s was written while it was deleted: not deleted", s.name)
	default:
		return fmt.Errorf("delete clusterprofile %s: %w", s.name, err)
	}
}
