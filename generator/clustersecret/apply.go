package clustersecret

// Applying a plan: the writes, each guarded by the API server, and what
// an update writes.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
)

// apply writes the changes with bounded concurrency, rendering each desired
// Secret it writes with resolve (so that only the Secrets in flight are
// held). It stops starting writes as soon as ctx ends (for example when the
// leader lease is lost). It returns the desired Secrets with an issued
// token that their Secret now holds: up to date, created or updated.
func (r *Reconciler) apply(ctx context.Context, ch *Changes, resolve TokenResolver) ([]Desired, error) {
	var mu sync.Mutex
	clash := func(c Clash) {
		mu.Lock()
		defer mu.Unlock()
		ch.Clashes = append(ch.Clashes, c)
	}
	holding := slices.Clone(ch.upToDate)
	holds := func(d Desired) {
		if d.cluster == nil || issuedOf(d.cluster, d.opts) == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		holding = append(holding, d)
	}
	var ops []func(context.Context) error
	for _, d := range ch.Create {
		ops = append(ops, func(ctx context.Context) error {
			s, err := d.Render(resolve)
			if err != nil {
				return fmt.Errorf("create secret %s: %w", d.name, err)
			}
			created, err := r.create(ctx, s, clash)
			if created {
				holds(d)
			}
			return err
		})
	}
	for _, u := range ch.Update {
		ops = append(ops, func(ctx context.Context) error {
			ok, err := r.update(ctx, u, resolve)
			if ok {
				holds(*u.Want)
			}
			return err
		})
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
			return holding, ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := lease.Check(ctx); err != nil { // cancelled, or frozen past the lease
				errs[i] = err
				return
			}
			errs[i] = op(ctx)
		}()
	}
	wg.Wait()
	return holding, errors.Join(errs...)
}

// create writes s and reports whether it did. A Secret of that name that
// the plan did not see (it is not labelled as a cluster Secret) makes the
// API refuse the create; if it is not ours it is reported through clash
// and left alone.
func (r *Reconciler) create(ctx context.Context, s *corev1.Secret, clash func(Clash)) (bool, error) {
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
		return false, nil // ours (another writer was faster) or foreign: nothing to do now
	}
	if err != nil {
		return false, fmt.Errorf("create secret %s: %w", s.Name, err)
	}
	r.own.wrote(created)
	r.metrics.writes.WithLabelValues("created").Inc()
	return true, nil
}

// update applies u to the Secret of u.Old: for a content update it merges
// the desired Secret (rendered with resolve, under u.Old's name) into it,
// for a countdown it sets the countdown annotations on it if it is still
// the version planned from. The Secret is the one u.Old holds when read
// from the API, else it is read first; on a conflict it is read again
// (a countdown is then left to the next pass). Nothing is written if
// nothing changes, or if the Secret is no longer ours for that cluster.
// It reports whether the Secret holds the desired content afterwards.
func (r *Reconciler) update(ctx context.Context, u Update, resolve TokenResolver) (bool, error) {
	var want *corev1.Secret
	if u.Want != nil {
		w, err := u.Want.Render(resolve)
		if err != nil {
			return false, fmt.Errorf("update secret %s: %w", u.Old.Name, err)
		}
		want = w
		want.Name = u.Old.Name // in place: an upgrade or a rename keeps the Secret
	}
	var next *corev1.Secret
	first, held := true, false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh, holds := u.Old.full, false
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
			next, holds = merge(fresh, want), true
			held = holds
			if sameContent(fresh, next) {
				next = nil
			}
		}
		if next == nil {
			return nil
		}
		if !first { // a retry: the lease may have passed since apply checked it
			if err := lease.Check(ctx); err != nil {
				return err
			}
		}
		first = false
		updated, err := r.secrets.Update(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			r.own.wrote(updated)
		}
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil // deleted meanwhile; the next pass recreates it
	case err != nil:
		return false, fmt.Errorf("update secret %s: %w", u.Old.Name, err)
	case next != nil:
		r.metrics.writes.WithLabelValues("updated").Inc()
	}
	return held, nil
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
	r.releaseDeleted(ctx, s)
	r.metrics.writes.WithLabelValues("deleted").Inc()
	r.logger.Info("deleted cluster Secret", "secret", s.Name, "cluster", s.cluster)
	return nil
}

// merge returns cur with the keys, labels and annotations we own set as in
// want: propagated labels and annotations that left upstream are removed,
// anything a person added is kept, and a prune countdown is cleared.
func merge(cur, want *corev1.Secret) *corev1.Secret {
	out := cur.DeepCopy()
	if out.Data == nil {
		out.Data = map[string][]byte{}
	}
	for _, k := range ownedDataKeys {
		if v, ok := want.Data[k]; ok {
			out.Data[k] = v
		} else {
			delete(out.Data, k)
		}
	}
	out.Labels = mergeMap(out.Labels, want.Labels, cur.Annotations[AnnotationLabels])
	out.Annotations = mergeMap(out.Annotations, want.Annotations, cur.Annotations[AnnotationAnnotations])
	delete(out.Annotations, AnnotationMissingSince)
	delete(out.Annotations, AnnotationMissingListings)
	delete(out.Annotations, AnnotationMissingListing)
	if _, ok := want.Labels[LabelState]; !ok {
		delete(out.Labels, LabelState)
	}
	return out
}

func mergeMap(cur, want map[string]string, previouslyPropagated string) map[string]string {
	out := maps.Clone(cur)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range strings.Split(previouslyPropagated, ",") {
		if _, keep := want[k]; !keep && k != "" {
			delete(out, k)
		}
	}
	maps.Copy(out, want)
	return out
}

// sameContent compares what we write, not resourceVersion: a pass that
// changes nothing makes no write.
func sameContent(a, b *corev1.Secret) bool {
	return maps.EqualFunc(a.Data, b.Data, bytes.Equal) &&
		maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations)
}

// onFresh returns fresh, the Secret as read from the API, with the prune
// countdown annotations set to countdown (none: cleared), if fresh is still
// the version old was read from; nil otherwise (it changed since the plan,
// and the next pass decides).
func onFresh(old *Record, countdown map[string]string, fresh *corev1.Secret) *corev1.Secret {
	if fresh.UID != old.UID || fresh.ResourceVersion != old.ResourceVersion {
		return nil
	}
	out := fresh.DeepCopy()
	for _, k := range countdownAnnotations {
		delete(out.Annotations, k)
	}
	if len(countdown) > 0 && out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	maps.Copy(out.Annotations, countdown)
	return out
}
