// Package inventory keeps the last complete listing of every source and
// merges them into immutable, versioned snapshots.
//
// Each source has its own refresh loop. A listing that fails leaves the
// source's previous listing in place (marked stale): it is better to serve
// stale clusters than partial ones, because consumers take a cluster missing
// from a successful answer to mean that it has left. A source that has never
// completed a listing is reported as not synced, and consumers must not
// answer for it.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
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
	// Duplicate): PreferCloud (the default) or PreferRancher.
	Prefer Preference
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

// SourceState is what a snapshot says about one source.
type SourceState struct {
	Name     string           `json:"name"`
	Provider sources.Provider `json:"provider"`
	// Synced is true once the source has completed a listing.
	Synced bool `json:"synced"`
	// Stale is true when the latest listing failed and the snapshot holds
	// the last complete one.
	Stale bool `json:"stale"`
}

// Conflict is a cluster name listed more than once; every cluster with that
// name is kept out of the snapshot.
type Conflict struct {
	Name string `json:"name"`
	// Sources lists the source of each cluster with that name (a source may
	// appear twice when it listed the name twice).
	Sources []string `json:"sources"`
}

// Duplicate is a cluster listed under another name by a second source: the
// same server URL, or the same cloud cluster (CloudID). Only the preferred
// listing (Kept) is in the snapshot's Clusters; the duplicate is neither
// served nor given a Secret, and is not treated as gone either.
type Duplicate struct {
	Name       string `json:"name"`
	Source     string `json:"source"`
	KeptName   string `json:"keptName"`
	KeptSource string `json:"keptSource"`
	// Reason is "server" or "cloudID".
	Reason string `json:"reason"`
}

// Snapshot is an immutable view of the merged inventory. Callers must not
// modify it or anything it points to.
type Snapshot struct {
	// Version grows by one each time the content changes.
	Version uint64
	// Clusters from the last complete listing of every synced source, ready
	// or not, conflicts left out, sorted by name. They point into the
	// sources' listings, shared by the snapshots made from them.
	Clusters []*sources.Cluster
	// Sources in configuration order.
	Sources []SourceState
	// Conflicts sorted by name.
	Conflicts []Conflict
	// Duplicates sorted by name.
	Duplicates []Duplicate
}

// Present reports whether a cluster of that name is known to the snapshot
// in any form: served, not ready, in a name conflict or a duplicate. A
// cluster that is not present has left its source's last listing.
func (s *Snapshot) Present(name string) bool {
	i := sort.Search(len(s.Clusters), func(i int) bool { return s.Clusters[i].Name >= name })
	if i < len(s.Clusters) && s.Clusters[i].Name == name {
		return true
	}
	for _, c := range s.Conflicts {
		if c.Name == name {
			return true
		}
	}
	for _, d := range s.Duplicates {
		if d.Name == name {
			return true
		}
	}
	return false
}

// Source returns the state of the named source.
func (s *Snapshot) Source(name string) (SourceState, bool) {
	for _, st := range s.Sources {
		if st.Name == name {
			return st, true
		}
	}
	return SourceState{}, false
}

// Synced reports whether every source has completed a listing.
func (s *Snapshot) Synced() bool {
	for _, st := range s.Sources {
		if !st.Synced {
			return false
		}
	}
	return true
}

// SourceStatus is the live status of one source, for /status and logs.
type SourceStatus struct {
	SourceState
	Interval            string    `json:"interval"`
	LastAttempt         time.Time `json:"lastAttempt,omitzero"`
	LastSuccess         time.Time `json:"lastSuccess,omitzero"`
	LastDuration        string    `json:"lastDuration,omitempty"`
	LastError           string    `json:"lastError,omitempty"`
	ConsecutiveFailures int       `json:"consecutiveFailures"`
	// Clusters and NotReady count the last complete listing.
	Clusters int `json:"clusters"`
	NotReady int `json:"notReady"`
}

// Status is the live status of the inventory.
type Status struct {
	SnapshotVersion uint64         `json:"snapshotVersion"`
	Clusters        int            `json:"clusters"`
	Sources         []SourceStatus `json:"sources"`
	Conflicts       []Conflict     `json:"conflicts"`
	Duplicates      []Duplicate    `json:"duplicates"`
}

type sourceState struct {
	spec   SourceSpec
	status SourceStatus
	// clusters is the last complete listing; nil until the first success.
	clusters []sources.Cluster
	trigger  chan struct{}
}

// Inventory runs the refresh loops and hands out snapshots.
type Inventory struct {
	logger  *slog.Logger
	jitter  float64
	prefer  Preference
	metrics *metrics

	mu     sync.Mutex
	states []*sourceState
	subs   map[int]subscriber
	nextID int

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
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	inv := &Inventory{logger: opts.Logger, jitter: opts.Jitter, prefer: opts.Prefer, metrics: m, subs: map[int]subscriber{}}
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
		st := &sourceState{spec: spec, trigger: make(chan struct{}, 1)}
		st.status.Name, st.status.Provider, st.status.Interval = spec.Name, spec.Provider, spec.Interval.String()
		inv.states = append(inv.states, st)
		m.initSource(spec.Name)
	}
	inv.snap.Store(inv.merge(0))
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
	out := Status{SnapshotVersion: snap.Version, Clusters: len(snap.Clusters), Conflicts: snap.Conflicts, Duplicates: snap.Duplicates}
	for _, st := range inv.states {
		out.Sources = append(out.Sources, st.status)
	}
	if out.Conflicts == nil {
		out.Conflicts = []Conflict{}
	}
	if out.Duplicates == nil {
		out.Duplicates = []Duplicate{}
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
	start := time.Now()
	clusters, err := st.spec.Source.Clusters(lctx)
	cancel()
	took := time.Since(start)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("timed out after %s: %w", st.spec.Timeout, err)
	}
	if err == nil {
		clusters, err = prepare(st.spec, clusters)
	}
	if err != nil {
		err = fmt.Errorf("source %s: list clusters: %w", st.spec.Name, err)
	}
	inv.record(st, clusters, err, start, took)
	return err
}

// prepare copies a listing's clusters, stamps each with its source,
// normalizes servers and marks clusters that cannot be used as not ready.
// What the clusters point to (labels, annotations, auth, namespaces) is
// shared with the source, never modified by either side (see
// sources.Source), so it is not copied: at 10,000 clusters copies would
// cost ~8 MiB.
func prepare(spec SourceSpec, in []sources.Cluster) ([]sources.Cluster, error) {
	out := make([]sources.Cluster, len(in))
	for i := range in {
		c := &out[i]
		*c = in[i]
		if c.Name == "" {
			return nil, fmt.Errorf("cluster %d has no name", i)
		}
		c.Source, c.Provider = spec.Name, spec.Provider
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
	sources.SortByName(out)
	return out, nil
}

func (inv *Inventory) record(st *sourceState, clusters []sources.Cluster, err error, start time.Time, took time.Duration) {
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
		st.clusters = clusters
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
	next := inv.merge(prev.Version)
	changed := !sameContent(prev, next)
	if changed {
		next.Version = prev.Version + 1
		inv.snap.Store(next)
		inv.metrics.version.Set(float64(next.Version))
		inv.metrics.conflicts.Set(float64(len(next.Conflicts)))
		inv.metrics.duplicates.Set(float64(len(next.Duplicates)))
	}
	for _, sub := range inv.subs {
		if changed || (sub.listings && err == nil) {
			select {
			case sub.ch <- struct{}{}:
			default:
			}
		}
	}
	failures, stale := s.ConsecutiveFailures, s.Stale
	inv.mu.Unlock()

	log := inv.logger.With("source", st.spec.Name, "provider", string(st.spec.Provider), "took", took.Round(time.Millisecond).String())
	if err != nil {
		log.Warn("listing failed; keeping the last complete listing", "error", err.Error(), "consecutiveFailures", failures, "stale", stale)
	} else {
		log.Debug("listing complete", "clusters", len(clusters))
	}
	if changed {
		for _, c := range newConflicts(prev, next) {
			inv.logger.Error("cluster name listed more than once; serving none of them", "cluster", c.Name, "sources", strings.Join(c.Sources, ","))
		}
		for _, d := range newDuplicates(prev, next) {
			inv.logger.Warn("cluster listed twice; serving one listing", "cluster", d.Name, "source", d.Source,
				"served", d.KeptName, "servedSource", d.KeptSource, "sameBy", d.Reason)
		}
		inv.logger.Info("snapshot changed", "version", next.Version, "clusters", len(next.Clusters),
			"conflicts", len(next.Conflicts), "duplicates", len(next.Duplicates))
	}
}

// merge builds a snapshot from the last complete listing of each source.
// The caller holds inv.mu (or is New).
func (inv *Inventory) merge(version uint64) *Snapshot {
	snap := &Snapshot{Version: version}
	byName := map[string][]*sources.Cluster{}
	for _, st := range inv.states {
		snap.Sources = append(snap.Sources, st.status.SourceState)
		for i := range st.clusters {
			c := &st.clusters[i]
			byName[c.Name] = append(byName[c.Name], c)
		}
	}
	for name, cs := range byName {
		if len(cs) == 1 {
			snap.Clusters = append(snap.Clusters, cs[0])
			continue
		}
		conflict := Conflict{Name: name}
		for _, c := range cs {
			conflict.Sources = append(conflict.Sources, c.Source)
		}
		sort.Strings(conflict.Sources)
		snap.Conflicts = append(snap.Conflicts, conflict)
	}
	snap.Clusters, snap.Duplicates = dedupe(snap.Clusters, inv.prefer)
	sort.Slice(snap.Clusters, func(i, j int) bool { return snap.Clusters[i].Name < snap.Clusters[j].Name }) // names are unique here
	sort.Slice(snap.Conflicts, func(i, j int) bool { return snap.Conflicts[i].Name < snap.Conflicts[j].Name })
	return snap
}

// dedupe keeps one listing per cluster: clusters sharing a server URL or a
// CloudID are one cluster, and the listing of the preferred kind of source
// is kept (then the first by source and name, so the choice is stable).
func dedupe(cs []*sources.Cluster, prefer Preference) ([]*sources.Cluster, []Duplicate) {
	rank := func(c *sources.Cluster) int {
		cloud := c.Provider == sources.ProviderEKS || c.Provider == sources.ProviderAKS
		switch {
		case prefer == PreferCloud && cloud, prefer == PreferRancher && c.Provider == sources.ProviderRancher:
			return 0
		case c.Provider == sources.ProviderStatic:
			return 1
		}
		return 2
	}
	sort.SliceStable(cs, func(i, j int) bool {
		ri, rj := rank(cs[i]), rank(cs[j])
		if ri != rj {
			return ri < rj
		}
		if cs[i].Source != cs[j].Source {
			return cs[i].Source < cs[j].Source
		}
		return cs[i].Name < cs[j].Name
	})
	byServer := map[string]*sources.Cluster{}
	byCloud := map[string]*sources.Cluster{}
	kept := make([]*sources.Cluster, 0, len(cs))
	var dups []Duplicate
	for _, c := range cs {
		first, reason := byServer[c.Server], "server"
		if first == nil && c.CloudID != "" {
			first, reason = byCloud[c.CloudID], "cloudID"
		}
		if first != nil {
			dups = append(dups, Duplicate{Name: c.Name, Source: c.Source, KeptName: first.Name, KeptSource: first.Source, Reason: reason})
			continue
		}
		byServer[c.Server] = c
		if c.CloudID != "" {
			byCloud[c.CloudID] = c
		}
		kept = append(kept, c)
	}
	sort.Slice(dups, func(i, j int) bool { return dups[i].Name < dups[j].Name })
	return kept, dups
}

func sameContent(a, b *Snapshot) bool {
	return reflect.DeepEqual(a.Sources, b.Sources) &&
		reflect.DeepEqual(a.Conflicts, b.Conflicts) &&
		reflect.DeepEqual(a.Duplicates, b.Duplicates) &&
		len(a.Clusters) == len(b.Clusters) &&
		(len(a.Clusters) == 0 || reflect.DeepEqual(a.Clusters, b.Clusters))
}

func newConflicts(prev, next *Snapshot) []Conflict {
	var out []Conflict
	for _, c := range next.Conflicts {
		if !slices.ContainsFunc(prev.Conflicts, func(p Conflict) bool { return p.Name == c.Name }) {
			out = append(out, c)
		}
	}
	return out
}

func newDuplicates(prev, next *Snapshot) []Duplicate {
	var out []Duplicate
	for _, d := range next.Duplicates {
		if !slices.Contains(prev.Duplicates, d) {
			out = append(out, d)
		}
	}
	return out
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
