package clustersecret

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Inventory is what the reconciler reads from sources/inventory.
type Inventory interface {
	SnapshotAndListings() (*inventory.Snapshot, map[string]time.Time)
	Subscribe() (<-chan struct{}, func())
	SubscribeListings() (<-chan struct{}, func())
}

// loader is an Inventory that loads a ledger at the start of each of the
// leader's terms (inventory.Inventory): until it has, its snapshot is
// the end of an earlier term, which another leader may have moved on
// from, and the reconciler writes nothing from it.
type loader interface{ Loaded() bool }

// Status is what /status shows of the reconciler.
type Status struct {
	Enabled bool   `json:"enabled"`
	DryRun  bool   `json:"dryRun"`
	Policy  Policy `json:"policy"`
	OwnerID string `json:"ownerID"`
	Leader  bool   `json:"leader"`
	// LeaseError is why the last read or write of the leader Lease failed
	// (a forbidden Lease, an API server out of reach), if it did.
	LeaseError   string    `json:"leaseError,omitempty"`
	LastPass     time.Time `json:"lastPass,omitzero"`
	LastDuration string    `json:"lastDuration,omitempty"`
	LastError    string    `json:"lastError,omitempty"`
	Created      int       `json:"created"`
	Updated      int       `json:"updated"`
	Deleted      int       `json:"deleted"`
	Unchanged    int       `json:"unchanged"`
	Held         []string  `json:"held"`
	Blocked      []string  `json:"blockedDeletions"`
	Clashes      []Clash   `json:"clashes"`
	Pending      []Pending `json:"pendingDeletions"`
}

// Reconciler applies plans to the Kubernetes API.
type Reconciler struct {
	cfg     Config
	secrets secretsClient
	// src is where a pass reads the cluster Secrets: the API (a LIST per
	// pass) or an informer's cache (WithInformer).
	src     secretSource
	own     ownWrites
	inv     Inventory
	logger  *slog.Logger
	metrics *metrics
	leader  atomic.Bool
	// countingDown is set when the last pass left a prune countdown that a
	// new listing would advance.
	countingDown atomic.Bool
	// readsTokens is set when the last pass read a token (a file, an
	// environment variable, a Secret, an issued token): a new listing then
	// makes a pass, so that a rotated or renewed token reaches the Secrets
	// within one listing (the token is part of the content compared).
	readsTokens atomic.Bool
	// released are the clusters (Identity) whose issued token was
	// released (departure confirmed, or Secret deleted), under relMu.
	relMu    sync.Mutex
	released map[string]bool
	// adopted are the token keepers (by source) that adopted the tokens
	// our Secrets hold in this leadership term, under termMu.
	termMu  sync.Mutex
	adopted map[string]bool
	// parked are the clusters whose Secret clashed in the last pass: no
	// token is issued for them (see park), under termMu.
	parked map[sources.IssuedToken]bool

	mu     sync.Mutex
	status Status
}

// secretsClient is the part of client-go we use.
type secretsClient interface {
	Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error)
	Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error)
}

// New returns a reconciler writing in cfg.Namespace through client. Without
// WithInformer it lists the cluster Secrets on every pass (for tools and
// tests that make single passes).
func New(cfg Config, client kubeclient.Interface, inv Inventory, logger *slog.Logger, reg prometheus.Registerer, opts ...Option) (*Reconciler, error) {
	if errs := cfg.Validate(nil); len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration: %w", errs.ToAggregate())
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	r := &Reconciler{cfg: cfg, released: map[string]bool{}, adopted: map[string]bool{}, secrets: client.CoreV1().Secrets(cfg.Namespace), inv: inv, logger: logger.With("component", "clustersecret"), metrics: m}
	r.src = apiSource{secrets: r.secrets, namespace: cfg.Namespace}
	r.status = Status{Enabled: true, DryRun: cfg.DryRun, Policy: cfg.Policy, OwnerID: cfg.OwnerID}
	for _, o := range opts {
		if err := o(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Status returns the reconciler's status.
func (r *Reconciler) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.status
	st.Leader = r.leader.Load()
	return st
}

// Run makes a pass once the cache of cluster Secrets has synced, after
// every snapshot change (debounced), after every complete listing while a
// prune countdown is running (so that it counts listings, not resyncs),
// and every Resync (drift repair), until ctx ends. Run it only while
// holding the leader lease: when ctx is cancelled, writes in flight are
// abandoned and no new one starts.
func (r *Reconciler) Run(ctx context.Context) {
	if !r.src.synced() {
		r.logger.Info("waiting for the cache of cluster Secrets to sync before the first pass")
		if !cache.WaitForCacheSync(ctx.Done(), r.src.synced) {
			return
		}
	}
	changes, cancelChanges := r.inv.Subscribe()
	defer cancelChanges()
	listings, cancelListings := r.inv.SubscribeListings()
	defer cancelListings()
	resync := time.NewTicker(r.cfg.Resync)
	defer resync.Stop()
	for {
		if _, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			r.logger.Error("reconcile pass failed; nothing was deleted", "error", err.Error())
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-resync.C:
				break wait
			case <-changes:
			case <-listings:
				if !r.countingDown.Load() && !r.readsTokens.Load() {
					continue // an unchanged listing: nothing to do
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(r.cfg.Debounce):
			}
			drain(changes)
			drain(listings)
			break
		}
	}
}

func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// Pass reconciles once and returns the changes it planned.
func (r *Reconciler) Pass(ctx context.Context) (Changes, error) {
	start := time.Now()
	ch, held, err := r.pass(ctx)
	took := time.Since(start)
	r.metrics.passDuration.Observe(took.Seconds())
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &r.status
	st.LastPass, st.LastDuration = start, took.Round(time.Millisecond).String()
	if err != nil {
		st.LastError = err.Error()
		r.metrics.passes.WithLabelValues("error").Inc()
		return ch, err
	}
	r.metrics.passes.WithLabelValues("success").Inc()
	r.metrics.lastSuccess.Set(float64(start.Unix()))
	st.LastError = ""
	st.Created, st.Updated, st.Deleted, st.Unchanged = len(ch.Create), len(ch.Update), len(ch.Delete), ch.Unchanged
	st.Held, st.Clashes, st.Pending = held, ch.Clashes, ch.Pending
	st.Blocked = nil
	for _, s := range ch.Blocked {
		st.Blocked = append(st.Blocked, s.Name)
	}
	r.metrics.clashes.Set(float64(len(ch.Clashes)))
	r.metrics.blocked.Set(float64(len(ch.Blocked)))
	r.metrics.pending.Set(float64(len(ch.Pending)))
	advancing := false
	for _, p := range ch.Pending {
		advancing = advancing || p.Held == ""
	}
	r.countingDown.Store(advancing)
	return ch, nil
}

func (r *Reconciler) pass(ctx context.Context) (Changes, []string, error) {
	if err := ctx.Err(); err != nil {
		return Changes{}, nil, err // the lease is lost: not even a plan
	}
	if !r.src.synced() {
		return Changes{}, nil, errors.New("the cache of cluster secrets has not synced yet; writing nothing")
	}
	if l, ok := r.inv.(loader); ok && !l.Loaded() {
		r.logger.Debug("the ledger is not loaded in this term yet; writing nothing")
		return Changes{}, nil, nil
	}
	snap, listings := r.inv.SnapshotAndListings()
	if len(snap.Waiting()) > 0 {
		// the start-up barrier: a source that has not listed yet could
		// claim any cluster (a duplicate, a name conflict)
		r.logger.Debug("not every source has listed yet; writing nothing")
		return Changes{}, nil, nil
	}
	parked := r.parkedNow()
	resolve, read := r.tokenResolver(ctx, parked)
	defer func() { r.readsTokens.Store(read()) }()
	r.releaseDeparted(ctx, snap)
	held, deselected := map[string]bool{}, map[string]bool{}
	selected := make([]*sources.Cluster, 0, len(snap.Clusters))
	for _, c := range snap.Clusters {
		// an agent's cluster has the Secret the agent's tooling wrote: none
		// of ours (one written before its source moved to agent mode counts
		// down as a deselected cluster's does)
		if r.cfg.Select != nil && !r.cfg.Select(c) || c.Auth.Kind == sources.AuthAgent {
			deselected[Identity(c.Source, c.Key())] = true
			continue
		}
		selected = append(selected, c)
	}
	if !r.cfg.DryRun {
		r.adoptTokens(ctx)
		prefetchIssued(ctx, selected, &r.cfg.Options, resolve) // a cluster that gets no Secret gets no token
	}
	var desired []Desired
	var heldNames []string
	for _, c := range selected {
		d, err := Build(c, &r.cfg.Options, resolve)
		if err != nil {
			held[Identity(c.Source, c.Key())] = true
			heldNames = append(heldNames, c.Name)
			r.logger.Warn("cluster Secret not written this pass", "cluster", c.Name, "error", err.Error())
			continue
		}
		desired = append(desired, d.Compact()) // rendered again if written
	}
	cur, observed, err := r.src.list(ctx)
	if err != nil {
		return Changes{}, heldNames, err
	}
	ch := Plan(Input{
		Desired: desired, Current: r.own.view(cur, observed), Snapshot: snap, Listings: listings, Held: held, Deselected: deselected,
		OwnerID: r.cfg.OwnerID, Policy: r.cfg.Policy, Prune: r.cfg.Prune, Now: time.Now(),
	})
	if r.cfg.DryRun {
		r.report(&ch)
		r.logger.Info("dry run: plan computed, nothing written", "plan", ch.String())
		return ch, heldNames, nil
	}
	r.park(ctx, &ch, parked)
	if ch.Writes() > 0 {
		r.logger.Info("applying plan", "plan", ch.String())
	}
	holding, err := r.apply(ctx, &ch, resolve)
	r.report(&ch)
	r.confirmTokens(ctx, holding, resolve)
	return ch, heldNames, err
}

func (r *Reconciler) report(ch *Changes) {
	for _, c := range ch.Clashes {
		r.logger.Warn("a Secret we do not own has this cluster's "+c.By+"; leaving it alone", "cluster", c.Cluster, "secret", c.Secret)
	}
	if len(ch.Blocked) > 0 {
		r.logger.Error("deletion breaker tripped: deleting nothing this pass", "wouldDelete", len(ch.Blocked),
			"maxDeletions", r.cfg.Prune.MaxDeletions, "maxDeletionsPercent", r.cfg.Prune.MaxDeletionsPercent)
	}
}

// tokenResolver reads token references, each once per pass (a failure
// too). A Secret reference is read from Argo CD's namespace. It is safe
// for concurrent use, and reads different references concurrently (the
// issued tokens of a pass, apply's renders). read reports whether any
// token was read.
func (r *Reconciler) tokenResolver(ctx context.Context, parked map[sources.IssuedToken]bool) (resolve TokenResolver, read func() bool) {
	type entry struct {
		once sync.Once
		v    string
		err  error
	}
	cache := map[string]*entry{}
	var mu sync.Mutex
	var ok atomic.Bool
	return func(ref sources.SecretRef) (string, error) {
		key := ref.String()
		mu.Lock()
		e := cache[key]
		if e == nil {
			e = &entry{}
			cache[key] = e
		}
		mu.Unlock()
		e.once.Do(func() {
			if ref.Issued != nil && parked[*ref.Issued] {
				e.v = parkedToken
				return
			}
			if e.v, e.err = r.readToken(ctx, ref); e.err == nil {
				ok.Store(true)
			}
		})
		return e.v, e.err
	}, ok.Load
}

// readToken reads the token ref points at.
func (r *Reconciler) readToken(ctx context.Context, ref sources.SecretRef) (string, error) {
	var v string
	switch {
	case ref.File != "" || ref.Env != "":
		return ref.ReadLocal()
	case ref.Issued != nil && r.cfg.DryRun:
		// a dry run writes nothing, upstream included: no token is
		// minted (the plan then shows such Secrets as updates)
		v = "<issued at write>"
	case ref.Issued != nil:
		iss, ok := r.cfg.Issuers[ref.Issued.Source]
		if !ok {
			return "", fmt.Errorf("source %s issues no tokens", ref.Issued.Source)
		}
		tok, err := iss.IssueToken(ctx, ref.Issued.Cluster)
		if err != nil {
			return "", fmt.Errorf("issue token: %w", err)
		}
		v = tok
	case ref.Secret != nil:
		s, err := r.secrets.Get(ctx, ref.Secret.Name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("get secret %s: %w", ref.Secret.Name, err)
		}
		b, ok := s.Data[ref.Secret.Key]
		if !ok {
			return "", fmt.Errorf("secret %s has no key %s", ref.Secret.Name, ref.Secret.Key)
		}
		v = string(b)
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return "", errors.New("empty token")
	}
	return v, nil
}
