package clustersecret

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Config of the reconciler.
type Config struct {
	Options
	Policy Policy
	// DryRun computes and logs every plan and writes nothing.
	DryRun bool
	// Resync is the period of passes without a snapshot change (drift
	// repair: someone edited or deleted one of our Secrets).
	Resync time.Duration
	// Debounce waits this long after a snapshot change before a pass, so
	// that a burst of changes makes one pass.
	Debounce time.Duration
	// Concurrency bounds the writes in flight.
	Concurrency int
	// Select limits which served clusters get a Secret (nil: all). A
	// cluster leaving the selection is a departure for its Secret, under
	// the prune countdown, never an immediate delete.
	Select func(*sources.Cluster) bool
	Prune  PruneOptions
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.Policy == "" {
		c.Policy = PolicyUpsertOnly
	}
	if c.Resync == 0 {
		c.Resync = 5 * time.Minute
	}
	if c.Debounce == 0 {
		c.Debounce = time.Second
	}
	if c.Concurrency == 0 {
		c.Concurrency = 8
	}
	if c.Prune.AfterListings == 0 {
		c.Prune.AfterListings = 3
	}
	if c.Prune.MaxDeletions == 0 {
		c.Prune.MaxDeletions = 5
	}
	if c.Prune.MaxDeletionsPercent == 0 {
		c.Prune.MaxDeletionsPercent = 10
	}
}

// Validate checks the configuration; field names are those of the
// secrets section of the configuration file.
func (c *Config) Validate() error {
	if err := c.Options.Validate(); err != nil {
		return err
	}
	switch {
	case !c.Policy.Valid():
		return fmt.Errorf("policy %q: must be sync, upsert-only or create-only", c.Policy)
	case c.Resync < time.Second:
		return fmt.Errorf("resync: must be at least 1s")
	case c.Concurrency < 1:
		return fmt.Errorf("concurrency: must be at least 1")
	case c.Prune.AfterListings < 1:
		return fmt.Errorf("prune.afterListings: must be at least 1")
	case c.Prune.MaxDeletions < 0 || c.Prune.MaxDeletionsPercent < 0 || c.Prune.MaxDeletionsPercent > 100:
		return fmt.Errorf("prune.maxDeletions/maxDeletionsPercent: out of range")
	}
	return nil
}

// Inventory is what the reconciler reads from sources/inventory.
type Inventory interface {
	SnapshotAndListings() (*inventory.Snapshot, map[string]time.Time)
	Subscribe() (<-chan struct{}, func())
	SubscribeListings() (<-chan struct{}, func())
}

// Status is what /status shows of the reconciler.
type Status struct {
	Enabled      bool      `json:"enabled"`
	DryRun       bool      `json:"dryRun"`
	Policy       Policy    `json:"policy"`
	OwnerID      string    `json:"ownerID"`
	Leader       bool      `json:"leader"`
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

	mu     sync.Mutex
	status Status

	// release returns the memory of a pass that planned releaseAfter
	// writes or more to the operating system, releaseDelay after it
	// (debug.FreeOSMemory, 1,000, 3 s; see New).
	release      func()
	releaseAfter int
	releaseDelay time.Duration
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
func New(cfg Config, client kubernetes.Interface, inv Inventory, logger *slog.Logger, reg prometheus.Registerer, opts ...Option) (*Reconciler, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	r := &Reconciler{cfg: cfg, secrets: client.CoreV1().Secrets(cfg.Namespace), inv: inv, logger: logger.With("component", "clustersecret"), metrics: m,
		// A cold sync of 10,000 Secrets builds and sends ~100 MB that the
		// runtime would hand back to the system over minutes, keeping the
		// pod's RSS at its start-up peak; the delay lets the watch events
		// of the pass's writes (which replace what it holds of them) come.
		release: debug.FreeOSMemory, releaseAfter: 1000, releaseDelay: 3 * time.Second}
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
		writes := func() int { // the plan is not kept while waiting
			ch, err := r.Pass(ctx)
			if err != nil && ctx.Err() == nil {
				r.logger.Error("reconcile pass failed; nothing was deleted", "error", err.Error())
			}
			return ch.Writes()
		}()
		if writes >= r.releaseAfter {
			r.logger.Debug("returning a large pass's memory to the operating system", "writes", writes)
			time.AfterFunc(r.releaseDelay, r.release)
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
				if !r.countingDown.Load() {
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
	snap, listings := r.inv.SnapshotAndListings()
	if !snap.Synced() {
		// the start-up barrier: a source that has not listed yet could
		// claim any cluster (a duplicate, a name conflict)
		r.logger.Debug("not every source has listed yet; writing nothing")
		return Changes{}, nil, nil
	}
	resolve := r.tokenResolver(ctx)
	var desired []Desired
	held, deselected := map[string]bool{}, map[string]bool{}
	var heldNames []string
	for i := range snap.Clusters {
		c := snap.Clusters[i]
		if r.cfg.Select != nil && !r.cfg.Select(c) {
			deselected[Identity(c.Source, c.Key())] = true
			continue
		}
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
	if ch.Writes() > 0 {
		r.logger.Info("applying plan", "plan", ch.String())
	}
	err = r.apply(ctx, &ch, resolve)
	r.report(&ch)
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

// tokenResolver reads token references, each once per pass. A Secret
// reference is read from Argo CD's namespace. It is safe for concurrent
// use (apply renders the Secrets it writes with it).
func (r *Reconciler) tokenResolver(ctx context.Context) TokenResolver {
	cache := map[string]string{}
	var mu sync.Mutex
	return func(ref sources.SecretRef) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		key := ref.String()
		if v, ok := cache[key]; ok {
			return v, nil
		}
		var v string
		switch {
		case ref.File != "":
			b, err := os.ReadFile(ref.File)
			if err != nil {
				return "", err
			}
			v = string(b)
		case ref.Env != "":
			v = os.Getenv(ref.Env)
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
			return "", fmt.Errorf("empty token")
		}
		cache[key] = v
		return v, nil
	}
}

// apply writes the changes with bounded concurrency, rendering each desired
// Secret it writes with resolve (so that only the Secrets in flight are
// held). It stops starting writes as soon as ctx ends (for example when the
// leader lease is lost).
func (r *Reconciler) apply(ctx context.Context, ch *Changes, resolve TokenResolver) error {
	var mu sync.Mutex
	clash := func(c Clash) {
		mu.Lock()
		defer mu.Unlock()
		ch.Clashes = append(ch.Clashes, c)
	}
	var ops []func(context.Context) error
	for _, d := range ch.Create {
		ops = append(ops, func(ctx context.Context) error {
			s, err := d.Render(resolve)
			if err != nil {
				return fmt.Errorf("create secret %s: %w", d.name, err)
			}
			return r.create(ctx, s, clash)
		})
	}
	for _, u := range ch.Update {
		ops = append(ops, func(ctx context.Context) error { return r.update(ctx, u, resolve) })
	}
	for _, s := range ch.Delete {
		ops = append(ops, func(ctx context.Context) error { return r.delete(ctx, s) })
	}
	sem := make(chan struct{}, r.cfg.Concurrency)
	errs := make([]error, len(ops))
	var wg sync.WaitGroup
	for i, op := range ops {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			errs[i] = op(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// create writes s. A Secret of that name that the plan did not see (it is
// not labelled as a cluster Secret) makes the API refuse the create; if it
// is not ours it is reported through clash and left alone.
func (r *Reconciler) create(ctx context.Context, s *corev1.Secret, clash func(Clash)) error {
	created, err := r.secrets.Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := r.secrets.Get(ctx, s.Name, metav1.GetOptions{})
		switch {
		case gerr != nil:
		case !Owned(cur, r.cfg.OwnerID):
			r.metrics.writes.WithLabelValues("skipped_foreign").Inc()
			r.logger.Warn("a Secret we do not own has this name; leaving it alone", "secret", s.Name, "cluster", s.Annotations[AnnotationCluster])
			clash(Clash{Cluster: s.Annotations[AnnotationCluster], Secret: s.Name, By: "name"})
		case cur.Labels[LabelSecretType] == "cluster":
			r.own.wrote(cur) // ours, not in the cache yet: not created again
		}
		return nil // ours (another writer was faster) or foreign: nothing to do now
	}
	if err != nil {
		return fmt.Errorf("create secret %s: %w", s.Name, err)
	}
	r.own.wrote(created)
	r.metrics.writes.WithLabelValues("created").Inc()
	return nil
}

// update applies u to the Secret of u.Old: for a content update it merges
// the desired Secret (rendered with resolve, under u.Old's name) into it,
// for a countdown it sets the countdown annotations on it if it is still
// the version planned from. The Secret is the one u.Old holds when read
// from the API, else it is read first; on a conflict it is read again
// (a countdown is then left to the next pass). Nothing is written if
// nothing changes, or if the Secret is no longer ours for that cluster.
func (r *Reconciler) update(ctx context.Context, u Update, resolve TokenResolver) error {
	var want *corev1.Secret
	if u.Want != nil {
		w, err := u.Want.Render(resolve)
		if err != nil {
			return fmt.Errorf("update secret %s: %w", u.Old.Name, err)
		}
		want = w
		want.Name = u.Old.Name // in place: an upgrade or a rename keeps the Secret
	}
	var next *corev1.Secret
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := u.Old.full
		if !first || fresh == nil {
			var err error
			if fresh, err = r.secrets.Get(ctx, u.Old.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		switch {
		case want == nil && first:
			next = onFresh(u.Old, u.Countdown, fresh) // nil if changed since the plan: the next pass decides
		case !Owned(fresh, r.cfg.OwnerID) || want == nil || fresh.Annotations[AnnotationClusterID] != want.Annotations[AnnotationClusterID] &&
			fresh.Annotations[AnnotationClusterID] != "":
			next = nil // no longer ours or another cluster's, or a countdown: the next pass decides
		default:
			next = merge(fresh, want)
			if sameContent(fresh, next) {
				next = nil
			}
		}
		first = false
		if next == nil {
			return nil
		}
		updated, err := r.secrets.Update(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			r.own.wrote(updated)
		}
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil // deleted meanwhile; the next pass recreates it
	case err != nil:
		return fmt.Errorf("update secret %s: %w", u.Old.Name, err)
	case next != nil:
		r.metrics.writes.WithLabelValues("updated").Inc()
	}
	return nil
}

// delete removes s only if it is still exactly the Secret the plan saw.
func (r *Reconciler) delete(ctx context.Context, s *Record) error {
	uid, rv := s.UID, s.ResourceVersion
	err := r.secrets.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil // gone already, or changed since we looked: the next pass decides
	case err != nil:
		return fmt.Errorf("delete secret %s: %w", s.Name, err)
	}
	r.own.deleted(s.Name, uid)
	r.metrics.writes.WithLabelValues("deleted").Inc()
	r.logger.Info("deleted cluster Secret", "secret", s.Name, "cluster", s.cluster)
	return nil
}
