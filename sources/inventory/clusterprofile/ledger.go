package clusterprofile

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Ledger is an inventory.Ledger and inventory.Feed on the Kubernetes API.
// Save writes only what changed since the last Load or Save: steady state
// writes nothing.
type Ledger struct {
	// dyn reads whole objects (Load); raw writes them without decoding
	// the answers (a cold start writes two per cluster); meta is the
	// feed's, which needs only the metadata (the record is an
	// annotation); core reads and writes the ConfigMap.
	dyn  dynamic.Interface
	raw  rest.Interface
	meta metadata.Interface
	core kubeclient.Interface
	opts Options
	now  func() time.Time

	mu sync.Mutex
	// known is what this process last read or wrote, by identity; nil
	// until the first Load.
	known   map[string]*stored
	sources []byte

	// written shares the leader's records with its own feed
	written written
	// strays are the records of objects this process neither loaded nor
	// wrote, found by a save (see findStrays), for the inventory to take
	strays []inventory.Record
	// doomed are objects holding the record of an identity another object
	// holds too, found by Load, for the next save to delete
	doomed []doomedObject
	// intern shares the strings and label sets of the records the feed
	// decodes
	intern feedInterner
	// cur follows whether the feed's last book is the ledger's (Current)
	cur currency
}

// stored is what we know to be stored of one ClusterProfile.
type stored struct {
	name string
	// meta and status are digests of what was written (zero: unknown), so
	// that remembering 10,000 objects costs 640 KB, not their JSON.
	meta   [sha256.Size]byte
	status [sha256.Size]byte
	// record is the digest of its record annotation (zero: unknown), the
	// key of its record in written
	record [sha256.Size]byte
	marks  *marks // of the conditions written last; nil: none
}

// Load implements inventory.Ledger: it lists this installation's
// ClusterProfiles and reads the source records. An object whose record
// cannot be read fails the load: a leader must not start from a book
// with a hole in it.
func (l *Ledger) Load(ctx context.Context) (inventory.Book, error) {
	list, err := l.profiles().List(ctx, metav1.ListOptions{LabelSelector: l.selector()})
	if err != nil {
		return inventory.Book{}, fmt.Errorf("list clusterprofiles: %w", err)
	}
	b := inventory.Book{Clusters: make([]inventory.Record, 0, len(list.Items))}
	known := make(map[string]*stored, len(list.Items))
	var doomed []doomedObject
	in := sources.NewInterner()
	for i := range list.Items {
		obj := &list.Items[i]
		r, err := recordOf(obj)
		if err != nil {
			return inventory.Book{}, err
		}
		if known[identity(r.Source, r.ID)] != nil {
			// a second object of one identity (one restored from a
			// backup under the name of a former display name): the book
			// takes the first, the next save deletes this one
			doomed = append(doomed, doomedOf(obj))
			continue
		}
		internRecord(in, &r) // a new leader's records share what they have in common
		b.Clusters = append(b.Clusters, r)
		s := l.storedOf(obj, &r)
		s.record = sha256.Sum256([]byte(obj.GetAnnotations()[AnnotationRecord]))
		known[identity(r.Source, r.ID)] = s
		l.written.put([sha256.Size]byte{}, s.record, r, s.name)
	}
	srcs, raw, err := l.loadSources(ctx)
	if err != nil {
		return inventory.Book{}, err
	}
	b.Sources = srcs
	b.Sort()
	l.mu.Lock()
	l.known, l.sources, l.doomed = known, raw, doomed
	l.written.wrote(raw)
	l.mu.Unlock()
	return b, nil
}

// storedOf is what obj, holding r, stores: the parts of the desired object
// it already matches count as written, so that a new leader rewrites
// nothing that is as it would write it.
func (l *Ledger) storedOf(obj *unstructured.Unstructured, r *inventory.Record) *stored {
	s := &stored{name: obj.GetName(), marks: marksOf(obj)}
	d, err := desiredObject(&l.opts, s.name, r, s.marks, l.now())
	if err != nil {
		return s
	}
	if metaMatches(obj, d.object) {
		s.meta = sha256.Sum256(d.meta)
	}
	var want any
	if json.Unmarshal(d.status, &want) == nil && reflect.DeepEqual(want, obj.Object["status"]) {
		s.status = sha256.Sum256(d.status)
	}
	return s
}

// metaMatches reports whether obj has the labels, record and spec of
// want (labels of others are left alone).
func metaMatches(obj, want *unstructured.Unstructured) bool {
	have := obj.GetLabels()
	for k, v := range want.GetLabels() {
		if have[k] != v {
			return false
		}
	}
	for _, k := range []string{LabelSource, LabelProvider, LabelTenant, LabelPhase} {
		if _, ok := want.GetLabels()[k]; !ok && have[k] != "" {
			return false
		}
	}
	for k, v := range want.GetAnnotations() {
		if obj.GetAnnotations()[k] != v {
			return false
		}
	}
	return reflect.DeepEqual(obj.Object["spec"], want.Object["spec"])
}

// Writers is how many writes of objects a save has in flight. A cold
// start writes two per cluster; one at a time, the apiserver's latency,
// not the client's rate limit, would bound it (~20 s for 2,000 clusters).
const Writers = 16

// StatusWriters is how many status writes a save has in flight: fewer
// than Writers. The statuses are for other readers (the answer waits for
// the objects, not for them), and on a cold start they share the
// apiserver with the cluster Secrets, which Argo CD needs to reach the
// clusters. A status apply costs the apiserver about twice an object's
// create; with 16 in flight a 10,000-cluster cold start wrote its last
// Secret after ~90 s and its last status after ~100 s, with 4 after ~55 s
// and ~80 s (cmd/loadgen -secrets, this repository's bench machine). The
// next save waits for the statuses (l.mu): after many statuses changed at
// once, its newcomers and departures are written that much later.
const StatusWriters = 4

// Save implements inventory.Ledger: it creates the ClusterProfiles of new
// records, applies those that changed, deletes those whose record is gone
// (a confirmed departure), then writes the source records and counts when
// they changed (only once every object is written: see CountsKey and
// SumsKey), then
// the statuses that changed. Writes of one step run Writers at a time,
// statuses StatusWriters. It goes on past a failed object and returns
// every error.
func (l *Ledger) Save(ctx context.Context, b inventory.Book) error {
	l.mu.Lock()
	loaded := l.known != nil
	l.mu.Unlock()
	if !loaded {
		if _, err := l.Load(ctx); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	unknown := l.forgetEdited()
	now := l.now()
	sl := newSaveLog()
	errs := l.deleteDoomed(ctx)
	errs = append(errs, l.save(ctx, b, now, sl)...)
	errs = append(errs, l.findStrays(ctx, unknown)...)
	sl.log(ctx, l.opts.Logger, len(b.Clusters), len(errs))
	return errors.Join(errs...)
}

// save is Save's work, counted in sl. The caller holds l.mu.
func (l *Ledger) save(ctx context.Context, b inventory.Book, now time.Time, sl *saveLog) []error {
	prev := sl.start
	want, statuses, errs := l.putAll(ctx, b.Clusters, now, sl)
	sl.objects = lap(&prev)
	errs = append(errs, l.deleteAllBut(ctx, want, sl)...)
	sl.deletes = lap(&prev)
	if len(errs) > 0 {
		// the counts are written only once every object is: until then a
		// reader keeps the last complete save
		return errs
	}
	if err := l.saveSources(ctx, b.Sources, countsOf(b.Clusters), l.sumsOf(b.Clusters), sl); err != nil {
		return []error{err}
	}
	lap(&prev) // the source records: their time is the total's
	// the status is for other readers (conditions, the access provider);
	// the record is the ledger: the answer does not wait for the status
	errs = forEach(ctx, len(statuses), StatusWriters, func(i int) error {
		r := statuses[i]
		s := l.known[identity(r.Source, r.ID)]
		d, err := desiredObject(&l.opts, s.name, r, s.marks, now)
		if err != nil {
			return err
		}
		if err := l.putStatus(ctx, s, d); err != nil {
			return err
		}
		sl.statuses.Add(1)
		return nil
	})
	sl.statusesTook = lap(&prev)
	return errs
}

// sumsOf sums the digests of the records' annotations as written, by
// source (see SumsKey). Every record is known once its put succeeded. The
// caller holds l.mu.
func (l *Ledger) sumsOf(records []inventory.Record) map[string]uint64 {
	out := map[string]uint64{}
	for i := range records {
		if s := l.known[identity(records[i].Source, records[i].ID)]; s != nil {
			out[records[i].Source] += recordSum(s.record)
		}
	}
	return out
}

// putAll puts the object of every record (see put) and returns the
// identities of the records, those whose status must be written, and the
// errors. It keeps what each put leaves (the object now known, whether its
// status is due), not the objects: at 10,000 clusters they would hold ~90
// MiB of JSON until the statuses are written. The caller holds l.mu.
func (l *Ledger) putAll(ctx context.Context, records []inventory.Record, now time.Time, sl *saveLog) (map[string]bool, []*inventory.Record, []error) {
	type result struct {
		s                  *stored
		created, statusDue bool
	}
	results := make([]result, len(records))
	errs := forEach(ctx, len(records), Writers, func(i int) error {
		r := &records[i]
		s := l.known[identity(r.Source, r.ID)]
		d, created, err := l.put(ctx, s, r, now, sl)
		if err != nil {
			return err
		}
		if created != nil {
			s = created
		}
		results[i] = result{s: s, created: created != nil, statusDue: s.status != sha256.Sum256(d.status)}
		return nil
	})
	want := make(map[string]bool, len(records))
	var statuses []*inventory.Record
	for i := range records {
		r, res := &records[i], results[i]
		want[identity(r.Source, r.ID)] = true
		switch {
		case res.s == nil: // failed
			continue
		case res.created:
			l.known[identity(r.Source, r.ID)] = res.s
		}
		if res.statusDue {
			statuses = append(statuses, r)
		}
	}
	return want, statuses, errs
}

// deleteAllBut deletes the known objects whose identity is not in want:
// confirmed departures. The caller holds l.mu.
func (l *Ledger) deleteAllBut(ctx context.Context, want map[string]bool, sl *saveLog) []error {
	var gone []string
	for id := range l.known {
		if !want[id] {
			gone = append(gone, id)
		}
	}
	deleted := make([]bool, len(gone))
	errs := forEach(ctx, len(gone), Writers, func(i int) error {
		if err := l.deleteAsWritten(ctx, l.known[gone[i]]); err != nil {
			return err
		}
		deleted[i] = true
		sl.deleted.Add(1)
		return nil
	})
	for i, id := range gone {
		if deleted[i] {
			l.written.forget(l.known[id].record)
			delete(l.known, id)
		}
	}
	return errs
}

// ours reports whether the ClusterProfile name is this installation's
// object of r: our owner label, and a record of r's identity.
func (l *Ledger) ours(ctx context.Context, name string, r *inventory.Record) bool {
	obj, err := l.profiles().Get(ctx, name, metav1.GetOptions{})
	if err != nil || obj.GetLabels()[LabelOwner] != l.opts.OwnerID || obj.GetLabels()[LabelManager] != Manager {
		return false
	}
	have, err := recordOf(obj)
	return err == nil && have.Source == r.Source && have.ID == r.ID
}

// forEach runs fn for 0 … n-1, limit at a time, and returns the errors.
// Each call must touch only what belongs to its index. None starts once
// the leader's lease may have passed to another process (lease.Check).
func forEach(ctx context.Context, n, limit int, fn func(i int) error) []error {
	errs := make([]error, n)
	var g errgroup.Group
	g.SetLimit(limit)
	for i := range n {
		g.Go(func() error {
			if errs[i] = lease.Check(ctx); errs[i] == nil {
				errs[i] = fn(i)
			}
			return nil
		})
	}
	_ = g.Wait()
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// put writes the ClusterProfile of r, but for its status, if it is new or
// changed, and returns what r's object should be. s is what is known of
// it (nil: nothing, so it is created, and put returns what is now known);
// put updates s, and nothing else of the ledger, so that puts of other
// records may run alongside.
func (l *Ledger) put(ctx context.Context, s *stored, r *inventory.Record, now time.Time, sl *saveLog) (*desired, *stored, error) {
	name := objectName(l.opts.OwnerID, r)
	var prev *marks
	if s != nil {
		name, prev = s.name, s.marks
	}
	d, err := desiredObject(&l.opts, name, r, prev, now)
	if err != nil {
		return nil, nil, err
	}
	d.name = name
	// known before the write is sent: the feed may see the object first, and
	// decodes a record it cannot find (3 MiB at a cold start of 10,000)
	var old [sha256.Size]byte
	if s != nil {
		old = s.record
	}
	l.written.put(old, d.record, *r, name)
	var created *stored
	if s == nil {
		// create, never apply, an object we do not know: a name taken by
		// an object that is not ours fails instead of being taken over
		body, err := d.object.MarshalJSON()
		if err != nil {
			return nil, nil, fmt.Errorf("encode clusterprofile %s: %w", name, err)
		}
		err = l.write(ctx, l.raw.Post(), "", body)
		switch {
		case err == nil:
			sl.created.Add(1)
			created = &stored{name: name, meta: sha256.Sum256(d.meta)} // just created: the object is as desired
		case apierrors.IsAlreadyExists(err) && l.ours(ctx, name, r):
			// a create that timed out on our side but was made: adopt it,
			// and apply what it should hold
			created = &stored{name: name}
		default:
			l.written.forget(d.record)
			return nil, nil, fmt.Errorf("create clusterprofile %s: %w", name, err)
		}
		s = created
	}
	if s.meta != sha256.Sum256(d.meta) {
		if err := l.apply(ctx, name, "", d.meta); err != nil {
			l.written.forget(d.record) // the object holds the record before d's, or d's: decoded either way
			s.record = [sha256.Size]byte{}
			return nil, nil, fmt.Errorf("apply clusterprofile %s: %w", name, err)
		}
		sl.applied.Add(1)
		s.meta = sha256.Sum256(d.meta)
	}
	s.record = d.record
	return d, created, nil
}

// putStatus applies the status of d's object and remembers it in s, what
// is known of the object.
func (l *Ledger) putStatus(ctx context.Context, s *stored, d *desired) error {
	name := s.name
	body, err := statusApply(l.opts.Namespace, name, d.status)
	if err != nil {
		return err
	}
	if err := l.apply(ctx, name, "status", body); err != nil {
		return fmt.Errorf("apply status of clusterprofile %s: %w", name, err)
	}
	s.status = sha256.Sum256(d.status)
	m := d.marks // a copy: s must not keep d's JSON
	s.marks = &m
	return nil
}

var (
	_ inventory.Ledger = (*Ledger)(nil)
	_ inventory.Strays = (*Ledger)(nil)
)
