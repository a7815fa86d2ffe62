// Package inventory keeps the last complete listing of every source, moves
// each cluster along one lifecycle, and merges the sources into immutable,
// versioned snapshots that the plugin answer and the Secret reconciler both
// follow.
//
// Each source has its own refresh loop. A listing that fails leaves the
// source's previous listing in place (marked stale): it is better to serve
// stale clusters than partial ones. A source that has never completed a
// listing is reported as not synced, and until every source has, consumers
// answer nothing (the start-up barrier).
//
// The lifecycle (lifecycle.go): a cluster is served once it is ready or
// degraded with a good rendering, and stays served, with its last good
// rendering, through every phase but a confirmed departure: absent from (or
// leaving in) Departure.AfterListings consecutive complete listings and
// Departure.GracePeriod. A mass drop is held longer. Merging (merge.go)
// dedupes one cluster listed by two sources (dedupe.go: by the kind of
// source and the preference) before resolving name conflicts, and an
// established cluster keeps its name against a newcomer.
package inventory

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// SourceSpec is one configured source instance.
type SourceSpec struct {
	// Name is unique among the configured sources.
	Name string
	// Provider is the provider's name; it must not be empty.
	Provider sources.Provider
	// Kind is what the provider's upstream is to its clusters (its
	// sources.Registration's Kind). When one cluster is listed by two
	// sources, it ranks the source's listing (see Preference); an empty or
	// unknown kind ranks last.
	Kind   sources.Kind
	Source sources.Source
	// Interval between the end of one listing and the start of the next,
	// before jitter.
	Interval time.Duration
	// Timeout bounds one listing.
	Timeout time.Duration
	// TrustClusterLabels takes a tenant and a project that the clusters'
	// owners wrote (labels, tags) as written (the source's trust:
	// clusterLabels); otherwise only a tenant rule that admits the cluster
	// makes them count (see sources.Cluster.ApplyTenantRule).
	TrustClusterLabels bool
}

// Options tune an Inventory. The zero value of each field is replaced by a
// default.
type Options struct {
	Logger *slog.Logger
	// Registerer receives the inventory's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Jitter spreads refreshes: each wait is Interval × (1 ± Jitter).
	// Zero means DefaultJitter, negative none.
	// Default 0.1; negative means none.
	Jitter float64
	// Prefer decides which of two listings of one cluster is served (see
	// Duplicate): PreferCloud (the default) or PreferRancher. A listing
	// already served keeps being served whatever the preference.
	Prefer Preference
	// Departure decides when a served cluster has left; zero fields take
	// DefaultDeparture's.
	Departure Departure
	// Tenants scope clusters by tenant (project, namespaces, cluster
	// resources), for the answer and the Secrets alike.
	Tenants map[string]sources.TenantRule
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// JoinDelay, for an inventory that follows a ledger (Follow), is how
	// long after the leader established a cluster it is served: every
	// replica whose watch brought the record by then serves it at the same
	// time, so no replica's 200 drops what another's just gave Argo CD.
	// Zero or negative: at once.
	JoinDelay time.Duration
	// Ledger keeps the records: Run loads them before the first listing
	// and saves them after each. Nil keeps them in this process only.
	Ledger Ledger
	// Acknowledged, when set, reports whether an operator acknowledged the
	// departure of a cluster (by source and ID): a held mass drop then
	// stays held until each of its departures is acknowledged or the
	// cluster is seen leaving. Nil releases a held drop after
	// Departure.HeldListings listings.
	Acknowledged func(source, id string) bool
	// Pinned, when set, reports whether an operator pinned a cluster (by
	// source and ID; the pin label on its ClusterProfile), and whether it
	// can tell: a departure due while the cluster is pinned, or while
	// known is false, is not confirmed, and the cluster stays served. Nil:
	// no cluster is pinned.
	Pinned func(source, id string) (pinned, known bool)
	// DryRun confirms no departure: one that comes due stays served, is
	// logged and counted (SourceState.DryRunDepartures), so that a dry run
	// never takes a cluster out of the answer, and its Applications out of
	// Argo CD.
	DryRun bool
	// Seed, when set, returns the identities (Cluster.Key) of the clusters
	// of a source that were served before the ledger held any listing of it:
	// what a version without a ledger left behind, its cluster Secrets.
	// Until the ledger holds a complete listing of the source, a listing
	// that lacks a mass of them (Departure.MaxFraction, as a mass drop) is
	// refused: the source stays unsynced, the answer a 503, until they are
	// listed again or Seed no longer returns them (see seed.go).
	Seed func(ctx context.Context, source string) ([]string, error)
}

// Preference says which source wins when one cluster is listed twice.
type Preference string

// The preferences.
const (
	// PreferCloud serves the listing of a source of kind cloud (EKS, AKS)
	// of a cluster also found elsewhere (Argo CD then talks to the cloud
	// endpoint directly), then of kind file, then of kind manager.
	PreferCloud Preference = "cloud"
	// PreferRancher serves the listing of a source of kind manager
	// (Rancher, through its proxy), then of kind file, then of kind cloud.
	PreferRancher Preference = "rancher"
)

type sourceState struct {
	spec   SourceSpec
	status SourceStatus
	// life follows the source's clusters across complete listings.
	life    lifecycle
	trigger chan struct{}
	// retired: the source is not configured, only its records in the
	// ledger are (retired.go); ended: a retired source forgotten, its loop
	// returns.
	retired, ended bool
	// seeding: the ledger holds no complete listing of the source yet, and
	// its listings are checked against Options.Seed (seed.go).
	seeding bool
}

// Inventory runs the refresh loops and hands out snapshots.
type Inventory struct {
	logger  *slog.Logger
	jitter  float64
	prefer  Preference
	tenants map[string]sources.TenantRule
	now     func() time.Time
	metrics *metrics
	// follower: the inventory projects a ledger it does not write (see
	// Follow) and establishes nothing itself.
	follower bool
	// followed: a follower has restored a book (see Followed).
	followed bool
	// unsettled is why the ledger it follows could not be read yet (see
	// Book.Unsettled); "" once a book came
	unsettled string
	// loaded: no Run has started, or the latest (runs) has loaded the
	// ledger and its context has not ended (see Loaded)
	loaded bool
	runs   uint64
	ledger Ledger
	// rule and acked are every lifecycle's, kept for retired sources.
	rule   Departure
	acked  func(source, id string) bool
	pinned func(source, id string) (pinned, known bool)
	dryRun bool
	seed   func(ctx context.Context, source string) ([]string, error)
	// saveMu makes saves one at a time.
	saveMu sync.Mutex

	mu       sync.Mutex
	states   []*sourceState
	subs     map[int]subscriber
	nextID   int
	bySource map[string]*sourceState
	// departed remembers confirmed departures (see Departed).
	departed map[clusterKey]Departed
	// joinDelay is Options.JoinDelay; joinAt the earliest time a joining
	// cluster of the snapshot is due (zero: none), joinTimer publishes
	// again then.
	joinDelay time.Duration
	joinAt    time.Time
	joinTimer *time.Timer

	snap atomic.Pointer[Snapshot]
}

// DefaultJitter is the default of Options.Jitter.
const DefaultJitter = 0.1

// ValidateSpread checks a jitter and a preference, each problem with its
// path under path (inventory, in the configuration file): the loader and
// New call it alike.
func ValidateSpread(path *field.Path, jitter float64, prefer Preference) field.ErrorList {
	var errs field.ErrorList
	if jitter < 0 || jitter >= 1 {
		errs = append(errs, field.Invalid(path.Child("jitter"), jitter, "must be in [0, 1)"))
	}
	if prefer != PreferCloud && prefer != PreferRancher {
		errs = append(errs, field.NotSupported(path.Child("prefer"), prefer, []Preference{PreferCloud, PreferRancher}))
	}
	return errs
}

// MinInterval and MinTimeout are the shortest listing interval and
// listing timeout a source may have.
const (
	MinInterval = time.Second
	MinTimeout  = time.Millisecond
)

// ValidateInterval checks a listing interval at path (inventory.interval
// or sources[i].interval, in the configuration file): the loader and New
// call it alike.
func ValidateInterval(path *field.Path, d time.Duration) *field.Error {
	return atLeast(path, d, MinInterval)
}

// ValidateTimeout checks a listing timeout at path, as ValidateInterval
// does an interval.
func ValidateTimeout(path *field.Path, d time.Duration) *field.Error {
	return atLeast(path, d, MinTimeout)
}

func atLeast(path *field.Path, d, minimum time.Duration) *field.Error {
	if d < minimum {
		return field.Invalid(path, d.String(), "must be at least "+minimum.String())
	}
	return nil
}

// New checks the specs and returns an inventory whose first snapshot has
// every source unsynced. Nothing runs until Run or RefreshAll is called.
func New(specs []SourceSpec, opts Options) (*Inventory, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Jitter = orNone(opts.Jitter, DefaultJitter)
	if opts.Prefer == "" {
		opts.Prefer = PreferCloud
	}
	if errs := ValidateSpread(field.NewPath("inventory"), opts.Jitter, opts.Prefer); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	departure, err := opts.Departure.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	inv := &Inventory{loaded: true, logger: opts.Logger, jitter: opts.Jitter, prefer: opts.Prefer, tenants: opts.Tenants, now: opts.Now,
		ledger: opts.Ledger, joinDelay: opts.JoinDelay, rule: departure, acked: opts.Acknowledged, pinned: opts.Pinned, dryRun: opts.DryRun, seed: opts.Seed, metrics: m, subs: map[int]subscriber{}, bySource: map[string]*sourceState{}, departed: map[clusterKey]Departed{}}
	seen := map[string]bool{}
	for i, spec := range specs {
		switch {
		case spec.Name == "":
			return nil, fmt.Errorf("source %d: no name", i)
		case seen[spec.Name]:
			return nil, fmt.Errorf("source %s: name used twice", spec.Name)
		case spec.Provider == "":
			return nil, fmt.Errorf("source %s: no provider", spec.Name)
		case spec.Source == nil:
			return nil, fmt.Errorf("source %s: no implementation", spec.Name)
		}
		at := field.NewPath("sources").Index(i)
		for _, e := range []*field.Error{ValidateInterval(at.Child("interval"), spec.Interval), ValidateTimeout(at.Child("timeout"), spec.Timeout)} {
			if e != nil {
				return nil, fmt.Errorf("source %s: %w", spec.Name, e)
			}
		}
		seen[spec.Name] = true
		st := &sourceState{spec: spec, trigger: make(chan struct{}, 1), life: lifecycle{rule: departure, acked: opts.Acknowledged, pinned: opts.Pinned, dryRun: opts.DryRun, interval: spec.Interval,
			budget: time.Duration(float64(spec.Interval) * (1 - opts.Jitter)), tracked: map[string]*Record{}}}
		st.status.Name, st.status.Provider, st.status.Interval = spec.Name, spec.Provider, spec.Interval.String()
		inv.states = append(inv.states, st)
		inv.bySource[spec.Name] = st
		m.initSource(spec.Name)
	}
	inv.snap.Store(inv.merge(0, opts.Now()))
	return inv, nil
}

// Acknowledged reports whether the record of the cluster with that
// identity says its departure was acknowledged: what a follower of the
// ledger offers the leader's inventory as Options.Acknowledged.
func (inv *Inventory) Acknowledged(source, id string) bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	r := inv.tracked(source, id)
	return r != nil && r.Acknowledged
}

// Pinned reports whether the record of the cluster with that identity
// says an operator pinned it: what a follower of the ledger offers the
// leader's inventory as Options.Pinned. Until it holds a book read from
// the ledger it cannot tell: known is false, and the leader confirms no
// departure meanwhile (a new leader lists while its view starts, or while
// the ledger a save cut short does not add up: Snapshot.Unsettled).
func (inv *Inventory) Pinned(source, id string) (pinned, known bool) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if !inv.followed || inv.unsettled != "" {
		return false, false
	}
	r := inv.tracked(source, id)
	return r != nil && r.Pin, true
}

// tracked returns the record of the cluster with that identity, nil when
// there is none. The caller holds inv.mu.
func (inv *Inventory) tracked(source, id string) *Record {
	if st := inv.bySource[source]; st != nil {
		return st.life.tracked[id]
	}
	return nil
}

// Followed reports whether an inventory that follows a ledger has read it
// at least once: until then it knows nothing, not even which sources have
// listed.
func (inv *Inventory) Followed() bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.followed
}

// UseLedger sets the ledger Run loads and saves (see Options.Ledger). Call
// it before Run.
func (inv *Inventory) UseLedger(l Ledger) { inv.ledger = l }

// UseSeed sets what names the clusters served before the ledger (see
// Options.Seed). Call it before Run.
func (inv *Inventory) UseSeed(seed func(ctx context.Context, source string) ([]string, error)) {
	inv.seed = seed
}

// Snapshot returns the current snapshot. It never returns nil.
func (inv *Inventory) Snapshot() *Snapshot { return inv.snap.Load() }

// Trigger asks the named source's loop to refresh now instead of waiting
// for its interval. It reports whether the source exists.
func (inv *Inventory) Trigger(name string) bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, st := range inv.states {
		if st.spec.Name == name {
			select {
			case st.trigger <- struct{}{}:
			default:
			}
			return true
		}
	}
	return false
}

// SnapshotAndListings returns the current snapshot together with, per
// source, the start time of the successful listing it holds. Both are read
// at once, so a consumer counting listings (the Secret reconciler's prune
// countdown) never counts a listing the snapshot does not reflect. A
// source synced only by what the ledger held (a new leader before its
// first listing of it) has no entry: its snapshot part is the last term's,
// and counting it would count a listing nobody made.
func (inv *Inventory) SnapshotAndListings() (*Snapshot, map[string]time.Time) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	listings := make(map[string]time.Time, len(inv.states))
	for _, st := range inv.states {
		if st.status.Synced && !st.status.LastSuccess.IsZero() {
			listings[st.spec.Name] = st.status.LastSuccess
		}
	}
	return inv.snap.Load(), listings
}
