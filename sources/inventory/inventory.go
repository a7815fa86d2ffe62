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
// dedupes one cluster listed by two sources before resolving name
// conflicts, and an established cluster keeps its name against a newcomer.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// SourceSpec is one configured source instance.
type SourceSpec struct {
	// Name is unique among the configured sources.
	Name     string
	Provider sources.Provider
	Source   sources.Source
	// Interval between the end of one listing and the start of the next,
	// before jitter.
	Interval time.Duration
	// Timeout bounds one listing.
	Timeout time.Duration
}

// Options tune an Inventory. The zero value of each field is replaced by a
// default.
type Options struct {
	Logger *slog.Logger
	// Registerer receives the inventory's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Jitter spreads refreshes: each wait is Interval × (1 ± Jitter).
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
}

// Preference says which source wins when one cluster is listed twice.
type Preference string

// The preferences.
const (
	// PreferCloud serves the EKS/AKS listing of a cluster also found in
	// Rancher: Argo CD then talks to the cloud endpoint directly.
	PreferCloud Preference = "cloud"
	// PreferRancher serves the Rancher listing (through Rancher's proxy).
	PreferRancher Preference = "rancher"
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

type sourceState struct {
	spec   SourceSpec
	status SourceStatus
	// life follows the source's clusters across complete listings.
	life    lifecycle
	trigger chan struct{}
}

// Inventory runs the refresh loops and hands out snapshots.
type Inventory struct {
	logger  *slog.Logger
	jitter  float64
	prefer  Preference
	tenants map[string]sources.TenantRule
	now     func() time.Time
	metrics *metrics

	mu       sync.Mutex
	states   []*sourceState
	subs     map[int]subscriber
	nextID   int
	bySource map[string]*sourceState
	// departed remembers confirmed departures (see Departed).
	departed map[clusterKey]Departed

	snap atomic.Pointer[Snapshot]
}

// New checks the specs and returns an inventory whose first snapshot has
// every source unsynced. Nothing runs until Run or RefreshAll is called.
func New(specs []SourceSpec, opts Options) (*Inventory, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Jitter == 0 {
		opts.Jitter = 0.1
	}
	if opts.Jitter < 0 {
		opts.Jitter = 0
	}
	if opts.Jitter >= 1 {
		return nil, fmt.Errorf("jitter %v: must be below 1", opts.Jitter)
	}
	switch opts.Prefer {
	case "":
		opts.Prefer = PreferCloud
	case PreferCloud, PreferRancher:
	default:
		return nil, fmt.Errorf("prefer %q: must be %s or %s", opts.Prefer, PreferCloud, PreferRancher)
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
	inv := &Inventory{logger: opts.Logger, jitter: opts.Jitter, prefer: opts.Prefer, tenants: opts.Tenants, now: opts.Now,
		metrics: m, subs: map[int]subscriber{}, bySource: map[string]*sourceState{}, departed: map[clusterKey]Departed{}}
	seen := map[string]bool{}
	for i, spec := range specs {
		switch {
		case spec.Name == "":
			return nil, fmt.Errorf("source %d: no name", i)
		case seen[spec.Name]:
			return nil, fmt.Errorf("source %s: name used twice", spec.Name)
		case !spec.Provider.Valid():
			return nil, fmt.Errorf("source %s: unknown provider %q", spec.Name, spec.Provider)
		case spec.Source == nil:
			return nil, fmt.Errorf("source %s: no implementation", spec.Name)
		case spec.Interval <= 0:
			return nil, fmt.Errorf("source %s: interval must be positive", spec.Name)
		case spec.Timeout <= 0:
			return nil, fmt.Errorf("source %s: timeout must be positive", spec.Name)
		}
		seen[spec.Name] = true
		st := &sourceState{spec: spec, trigger: make(chan struct{}, 1), life: lifecycle{rule: departure, tracked: map[string]*tracked{}}}
		st.status.Name, st.status.Provider, st.status.Interval = spec.Name, spec.Provider, spec.Interval.String()
		inv.states = append(inv.states, st)
		inv.bySource[spec.Name] = st
		m.initSource(spec.Name)
	}
	inv.snap.Store(inv.merge(0, opts.Now()))
	return inv, nil
}

// Snapshot returns the current snapshot. It never returns nil.
func (inv *Inventory) Snapshot() *Snapshot { return inv.snap.Load() }

type subscriber struct {
	ch chan struct{}
	// listings: told after every successful listing, changed or not.
	listings bool
}

// Subscribe returns a channel that receives a value after the snapshot
// changes. Notifications coalesce: a slow subscriber sees one value for
// several changes and should read Snapshot afterwards. Call cancel to stop.
func (inv *Inventory) Subscribe() (<-chan struct{}, func()) {
	return inv.subscribe(false)
}

// SubscribeListings is Subscribe, also told after every successful listing
// that changed nothing: for consumers that count listings (the Secret
// reconciler's prune countdown).
func (inv *Inventory) SubscribeListings() (<-chan struct{}, func()) {
	return inv.subscribe(true)
}

func (inv *Inventory) subscribe(listings bool) (<-chan struct{}, func()) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	id := inv.nextID
	inv.nextID++
	ch := make(chan struct{}, 1)
	inv.subs[id] = subscriber{ch: ch, listings: listings}
	return ch, func() {
		inv.mu.Lock()
		defer inv.mu.Unlock()
		delete(inv.subs, id)
	}
}

// Trigger asks the named source's loop to refresh now instead of waiting
// for its interval. It reports whether the source exists.
func (inv *Inventory) Trigger(name string) bool {
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
// countdown) never counts a listing the snapshot does not reflect.
func (inv *Inventory) SnapshotAndListings() (*Snapshot, map[string]time.Time) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	listings := make(map[string]time.Time, len(inv.states))
	for _, st := range inv.states {
		if st.status.Synced {
			listings[st.spec.Name] = st.status.LastSuccess
		}
	}
	return inv.snap.Load(), listings
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

// Run lists every source now and then at its interval until ctx is
// cancelled. It returns once every loop has stopped.
func (inv *Inventory) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, st := range inv.states {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inv.loop(ctx, st)
		}()
	}
	wg.Wait()
}

// RefreshAll lists every source once, concurrently, and returns the joined
// errors of the listings that failed. It is what `discover` uses.
func (inv *Inventory) RefreshAll(ctx context.Context) error {
	errs := make([]error, len(inv.states))
	var wg sync.WaitGroup
	for i, st := range inv.states {
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
	clusters, err := st.spec.Source.Clusters(lctx)
	cancel()
	took := inv.now().Sub(start)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("timed out after %s: %w", st.spec.Timeout, err)
	}
	if err == nil {
		clusters, err = prepare(st.spec, clusters, inv.tenants)
	}
	if err != nil {
		err = fmt.Errorf("source %s: list clusters: %w", st.spec.Name, err)
	}
	inv.record(st, clusters, err, start, took)
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
		c.ApplyTenantRule(tenants)
		if srv, err := sources.NormalizeServer(c.Server); err != nil {
			c.Ready, c.NotReadyReason = false, "invalid server: "+err.Error()
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

func (inv *Inventory) record(st *sourceState, clusters []sources.Cluster, err error, start time.Time, took time.Duration) {
	var res listed
	inv.mu.Lock()
	s := &st.status
	s.LastAttempt = start
	s.LastDuration = took.Round(time.Millisecond).String()
	inv.metrics.duration.WithLabelValues(st.spec.Name).Observe(took.Seconds())
	if err != nil {
		s.LastError = err.Error()
		s.ConsecutiveFailures++
		s.Stale = s.Synced
		inv.metrics.errors.WithLabelValues(st.spec.Name).Inc()
	} else {
		res = st.life.apply(st.spec.Name, clusters, start)
		for _, d := range res.departed {
			inv.departed[clusterKey{d.Source, d.ID}] = d
		}
		for i := range clusters {
			delete(inv.departed, clusterKey{st.spec.Name, clusters[i].Key()})
		}
		s.Served, s.Absent = len(st.life.served), 0
		byPhase := map[sources.Phase]int{}
		for _, c := range st.life.served {
			byPhase[c.Phase]++
		}
		s.Absent = byPhase[sources.PhaseAbsent] + byPhase[sources.PhaseLeaving]
		for _, p := range sources.Phases() {
			if p != sources.PhasePending {
				inv.metrics.served.WithLabelValues(st.spec.Name, string(p)).Set(float64(byPhase[p]))
			}
		}
		inv.metrics.departures.WithLabelValues(st.spec.Name).Add(float64(len(res.departed)))
		inv.metrics.held.WithLabelValues(st.spec.Name).Set(float64(st.life.held))
		s.LastError, s.ConsecutiveFailures, s.Stale = "", 0, false
		s.Synced, s.LastSuccess = true, start
		s.Clusters, s.NotReady = len(clusters), 0
		for _, c := range clusters {
			if !c.Ready {
				s.NotReady++
			}
		}
		inv.metrics.lastSuccess.WithLabelValues(st.spec.Name).Set(float64(start.Unix()))
		inv.metrics.clusters.WithLabelValues(st.spec.Name, "true").Set(float64(s.Clusters - s.NotReady))
		inv.metrics.clusters.WithLabelValues(st.spec.Name, "false").Set(float64(s.NotReady))
		inv.metrics.synced.WithLabelValues(st.spec.Name).Set(1)
	}
	inv.metrics.failures.WithLabelValues(st.spec.Name).Set(float64(s.ConsecutiveFailures))
	inv.metrics.stale.WithLabelValues(st.spec.Name).Set(boolFloat(s.Stale))

	prev := inv.snap.Load()
	next := inv.merge(prev.Version, start)
	changed := !sameContent(prev, next)
	if changed {
		next.Version = prev.Version + 1
		inv.metrics.version.Set(float64(next.Version))
		inv.metrics.conflicts.Set(float64(len(next.Conflicts)))
		inv.metrics.duplicates.Set(float64(len(next.Duplicates)))
	}
	// Stored even unchanged, under the same version: prev points into the
	// listings it was merged from, and keeping it would keep a listing the
	// lifecycle has replaced (~2 MiB per 5,000 clusters) for as long as
	// nothing changes.
	inv.snap.Store(next)
	for _, sub := range inv.subs {
		if changed || (sub.listings && err == nil) {
			select {
			case sub.ch <- struct{}{}:
			default:
			}
		}
	}
	failures, stale, held, served := s.ConsecutiveFailures, s.Stale, st.life.held, s.Served
	inv.mu.Unlock()

	log := inv.logger.With("source", st.spec.Name, "provider", string(st.spec.Provider), "took", took.Round(time.Millisecond).String())
	if err != nil {
		log.Warn("listing failed; keeping the last complete listing", "error", err.Error(), "consecutiveFailures", failures, "stale", stale)
	} else {
		log.Debug("listing complete", "clusters", len(clusters))
	}
	if res.newlyHeld > 0 {
		log.Warn("mass drop: many served clusters missing from one listing; holding their departure",
			"missing", res.newlyHeld, "share", fraction(res.newlyHeld, served+len(res.departed)), "heldDepartures", held)
	}
	for _, d := range res.departed {
		log.Info("cluster departure confirmed; no longer served", "cluster", d.Name, "id", d.ID)
	}
	if changed {
		for _, c := range newConflicts(prev, next) {
			inv.logger.Error("cluster name listed more than once; serving only the established cluster, if any",
				"cluster", c.Name, "sources", strings.Join(c.Sources, ","), "keptSource", c.KeptSource)
		}
		for _, d := range newDuplicates(prev, next) {
			inv.logger.Warn("cluster listed twice; serving one listing", "cluster", d.Name, "source", d.Source,
				"served", d.KeptName, "servedSource", d.KeptSource, "sameBy", d.Reason)
		}
		inv.logger.Info("snapshot changed", "version", next.Version, "clusters", len(next.Clusters),
			"conflicts", len(next.Conflicts), "duplicates", len(next.Duplicates))
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
