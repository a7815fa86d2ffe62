package clustersecret

// The tokens a source issues per cluster (sources.TokenKeeper): a term
// begins by handing the issuers the tokens our Secrets hold; the tokens
// of a pass are issued concurrently; the Secrets that hold them afterwards
// are reported, and only then is anything replaced revoked.

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// authOf is the cluster's credentials: its source's, unless the
// configuration overrides them for the source.
func authOf(c *sources.Cluster, o *Options) sources.Auth {
	if ov, ok := o.Credentials[c.Source]; ok {
		switch {
		case ov.Exec != nil:
			return sources.Auth{Kind: sources.AuthExec, Exec: ov.Exec}
		case ov.BearerToken != nil:
			return sources.Auth{Kind: sources.AuthBearerToken, TokenRef: ov.BearerToken}
		}
	}
	return c.Auth
}

// issuedOf is the token a source issues for the cluster, or nil.
func issuedOf(c *sources.Cluster, o *Options) *sources.IssuedToken {
	if a := authOf(c, o); a.Kind == sources.AuthBearerToken && a.TokenRef != nil {
		return a.TokenRef.Issued
	}
	return nil
}

// issueConcurrency bounds the tokens being issued at once.
const issueConcurrency = 8

// keepers are the issuers whose tokens outlive the process, by source.
func (r *Reconciler) keepers() map[string]sources.TokenKeeper {
	out := map[string]sources.TokenKeeper{}
	for name, iss := range r.cfg.Issuers {
		if k, ok := iss.(sources.TokenKeeper); ok {
			out[name] = k
		}
	}
	return out
}

// adoptTokens begins the term of each keeper not adopted yet in this term:
// it hands it the tokens our Secrets of its source hold, read from the API
// (the cache keeps no config). One that fails is tried again next pass;
// meanwhile its clusters get no token, so their Secrets stay as they are.
func (r *Reconciler) adoptTokens(ctx context.Context) {
	r.termMu.Lock()
	defer r.termMu.Unlock()
	keepers := r.keepers()
	names := make([]string, 0, len(keepers))
	for name := range keepers {
		if !r.adopted[name] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		held, err := r.heldTokens(ctx, name)
		if err == nil {
			err = keepers[name].AdoptTokens(ctx, r.cfg.Installation, held)
		}
		if err != nil {
			r.logger.Warn("could not adopt the tokens our Secrets hold; their clusters' Secrets are left as they are until it succeeds",
				"source", name, "error", err.Error())
			continue
		}
		r.adopted[name] = true
	}
}

// newTerm makes the next pass adopt again (a new leadership term) and
// forgets the clusters parked in an earlier term: another leader may have
// written their Secrets since.
func (r *Reconciler) newTerm() {
	r.termMu.Lock()
	defer r.termMu.Unlock()
	r.adopted = map[string]bool{}
	r.parked = nil
}

// heldTokens reads the bearer tokens our Secrets of source hold, by the
// cluster's ID in the source, a page at a time.
func (r *Reconciler) heldTokens(ctx context.Context, source string) (map[string]string, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue, LabelOwner: r.cfg.OwnerID, LabelSource: source}).String()
	held := map[string]string{}
	opts := metav1.ListOptions{LabelSelector: sel, Limit: 500}
	for {
		list, err := r.secrets.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			s := &list.Items[i]
			var cfg struct {
				BearerToken string `json:"bearerToken"`
			}
			id := s.Annotations[AnnotationClusterID]
			if id == "" || json.Unmarshal(s.Data["config"], &cfg) != nil || cfg.BearerToken == "" {
				continue
			}
			held[id] = cfg.BearerToken
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return held, nil
		}
	}
}

// prefetchIssued issues the tokens of the clusters whose Secret needs
// one, issueConcurrency at a time, through resolve (which keeps them for
// the pass): on a first pass Rancher answers hundreds of creates.
func prefetchIssued(ctx context.Context, cs []*sources.Cluster, o *Options, resolve TokenResolver) {
	sem := make(chan struct{}, issueConcurrency)
	var wg sync.WaitGroup
	for _, c := range cs {
		iss := issuedOf(c, o)
		if iss == nil {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, _ = resolve(sources.SecretRef{Issued: iss}) // an error is Build's to report
		}()
	}
	wg.Wait()
}

// parkedToken stands in for the token of a cluster whose Secret cannot be
// written (a clash, see park): it never reaches a Secret.
const parkedToken = "<not issued: the cluster's Secret clashes>"

// park records the clusters of this pass that have an issued token but no
// Secret of ours and cannot get one (ch.unwritable): the token minted for
// them is released at once (no Secret holds it), and while they clash the
// passes that follow issue none. Under create-only it also parks the
// clusters whose Secret would need an update (ch.frozen): their token is
// not renewed, since nothing would write the new one. A parked cluster whose clash is gone is
// dropped from the creates and updates of that pass (planned with the
// stand-in, which never reaches a Secret), and gets its token and Secret
// at the next pass.
func (r *Reconciler) park(ctx context.Context, ch *Changes, parked map[sources.IssuedToken]bool) {
	isParked := func(d *Desired) bool {
		iss := issuedOf(d.cluster, d.opts)
		if iss == nil || !parked[*iss] {
			return false
		}
		r.logger.Info("a cluster's Secret no longer clashes; it is written with its own token next pass", "cluster", d.Cluster)
		return true
	}
	ch.Create = slices.DeleteFunc(ch.Create, func(d Desired) bool { return isParked(&d) })
	ch.Update = slices.DeleteFunc(ch.Update, func(u Update) bool { return u.Want != nil && isParked(u.Want) })
	next := map[sources.IssuedToken]bool{}
	for _, d := range ch.unwritable {
		iss := issuedOf(d.cluster, d.opts)
		next[*iss] = true
		if parked[*iss] || r.cfg.DryRun {
			continue
		}
		if k := r.cfg.Issuers[iss.Source]; k != nil {
			if err := k.ReleaseToken(ctx, iss.Cluster); err != nil {
				r.logger.Warn("could not release the token of a cluster whose Secret clashes; trying again next pass",
					"cluster", d.Cluster, "error", err.Error())
				delete(next, *iss)
			}
		}
	}
	for _, d := range ch.frozen {
		// its Secret holds the token it was created with: renewing would
		// mint tokens nothing writes (and revoking the old one is not ours
		// to do while the Secret holds it)
		iss := issuedOf(d.cluster, d.opts)
		next[*iss] = true
		if !parked[*iss] {
			r.logger.Warn("policy create-only never updates a Secret: this cluster's token is not renewed and stops working when it expires (tokenTTL); use upsert-only",
				"cluster", d.Cluster)
		}
	}
	r.termMu.Lock()
	r.parked = next
	r.termMu.Unlock()
}

// parkedNow returns the clusters parked by the last pass.
func (r *Reconciler) parkedNow() map[sources.IssuedToken]bool {
	r.termMu.Lock()
	defer r.termMu.Unlock()
	return r.parked
}

// confirmTokens tells each keeper which of its clusters' Secrets hold the
// token issued this pass (written, or up to date), then lets it revoke
// what they replaced.
func (r *Reconciler) confirmTokens(ctx context.Context, holding []Desired, resolve TokenResolver) {
	keepers := r.keepers()
	if len(keepers) == 0 || r.cfg.DryRun {
		return
	}
	for _, d := range holding {
		iss := issuedOf(d.cluster, d.opts)
		if iss == nil || keepers[iss.Source] == nil {
			continue
		}
		if v, err := resolve(sources.SecretRef{Issued: iss}); err == nil {
			keepers[iss.Source].TokenWritten(iss.Cluster, v)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(keepers)) {
		if err := keepers[name].SweepTokens(ctx); err != nil {
			r.logger.Warn("could not revoke the tokens our Secrets no longer hold; trying again next pass", "source", name, "error", err.Error())
		}
	}
}

// releaseDeparted tells the token issuers that the clusters whose
// departure the inventory confirmed need their tokens no longer. Each
// cluster is released once while it is in the snapshot's departures.
func (r *Reconciler) releaseDeparted(ctx context.Context, snap *inventory.Snapshot) {
	if len(r.cfg.Issuers) == 0 || r.cfg.DryRun {
		return
	}
	seen := make(map[string]bool, len(snap.Departed))
	for _, d := range snap.Departed {
		iss, ok := r.cfg.Issuers[d.Source]
		if !ok {
			continue
		}
		id := Identity(d.Source, d.ID)
		seen[id] = true
		if err := r.releaseOnce(ctx, iss, id, d.ID); err != nil {
			r.logger.Warn("could not release the token of a departed cluster; retrying next pass", "cluster", d.Name, "error", err.Error())
		}
	}
	r.relMu.Lock()
	defer r.relMu.Unlock()
	for id := range r.released {
		if !seen[id] {
			delete(r.released, id)
		}
	}
}

// releaseDeleted releases the issued token of the cluster whose Secret s
// was deleted.
func (r *Reconciler) releaseDeleted(ctx context.Context, s *Record) {
	src := s.Label(LabelSource)
	iss, ok := r.cfg.Issuers[src]
	if !ok {
		return
	}
	id, _ := s.Annotation(AnnotationClusterID)
	if id == "" {
		return
	}
	if err := r.releaseOnce(ctx, iss, Identity(src, id), id); err != nil {
		r.logger.Warn("could not release the token of a deleted cluster Secret", "secret", s.Name, "error", err.Error())
	}
}

// releaseOnce releases the token of cluster (its Identity, and its ID in
// the source) unless it was released already.
func (r *Reconciler) releaseOnce(ctx context.Context, iss sources.TokenIssuer, identity, id string) error {
	r.relMu.Lock()
	done := r.released[identity]
	r.relMu.Unlock()
	if done {
		return nil
	}
	if err := iss.ReleaseToken(ctx, id); err != nil {
		return err
	}
	r.relMu.Lock()
	r.released[identity] = true
	r.relMu.Unlock()
	return nil
}
