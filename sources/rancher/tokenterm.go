package rancher

// A leadership term of the token manager: Adopt takes the tokens our
// Secrets hold, Written and Sweep revoke what they no longer hold, RevokeAll
// empties the installation at uninstall; and the marker that tells whose a
// token is.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// marker is who minted a token, as its description says: the only mark
// Rancher keeps (it ignores labels on create). owner is the deployment's
// owner id, install the installation (see Adopt), source the source's
// name; tokens of versions before 0.2.0 name neither install nor source,
// those of 0.2.0 no install.
type marker struct{ owner, install, source, cluster string }

const markerPrefix = "argocd-cluster-discovery "

// String is the description a token is created with.
func (k marker) String() string {
	s := markerPrefix + "owner=" + k.owner
	if k.install != "" {
		s += " install=" + k.install
	}
	if k.source != "" {
		s += " source=" + k.source
	}
	return s + " cluster=" + k.cluster
}

// parseMarker reads a description written by marker.String.
func parseMarker(desc string) (marker, bool) {
	rest, ok := strings.CutPrefix(desc, markerPrefix)
	if !ok {
		return marker{}, false
	}
	var k marker
	for f := range strings.FieldsSeq(rest) {
		key, v, _ := strings.Cut(f, "=")
		switch key {
		case "owner":
			k.owner = v
		case "install":
			k.install = v
		case "source":
			k.source = v
		case "cluster":
			k.cluster = v
		default:
			return marker{}, false
		}
	}
	return k, k.owner != "" && k.cluster != ""
}

// orphan is a token of this installation's source that no Secret held
// when the term began (an earlier process minted it and was stopped before
// writing it, or its Secret was rewritten since).
type orphan struct {
	cluster string
	since   time.Time // when Adopt found it
	expires time.Time // zero: never
}

// Written records that the cluster's Secret holds value: from then on, and
// a grace period later, Sweep revokes the tokens it replaced.
func (m *tokenManager) Written(clusterID, value string) {
	m.mu.Lock()
	e := m.clusters[clusterID]
	m.mu.Unlock()
	if e == nil {
		return
	}
	select {
	case e.lock <- struct{}{}:
	default:
		return // busy: the next pass says it again
	}
	defer e.unlock()
	if c := e.current; c != nil && c.value == value && c.written.IsZero() {
		c.written = m.now()
	}
}

// Sweep revokes what no Secret needs any more, a grace period after the
// cluster's Secret was seen holding the replacement: the tokens Token
// replaced, and the orphans Adopt found (for a cluster we hold no token
// of, a grace period after the term began). A token that cannot be
// revoked is kept for the next Sweep, or forgotten once expired.
func (m *tokenManager) Sweep(ctx context.Context) error {
	now := m.now()
	m.mu.Lock()
	ids := make([]string, 0, len(m.clusters))
	for id := range m.clusters {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if err := m.sweepCluster(ctx, id, now); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.findOrphans(ctx, now); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, m.sweepOrphans(ctx, now)...)
	if len(errs) > 0 {
		return fmt.Errorf("revoke replaced tokens: %d not revoked: %w", len(errs), errs[0])
	}
	return nil
}

// replaced reports whether the cluster's Secret was seen holding its
// current token for a grace period (or it has no entry any more).
func (m *tokenManager) replaced(e *clusterTokens, now time.Time) bool {
	return e == nil || e.current == nil || !e.current.written.IsZero() && !now.Before(e.current.written.Add(m.grace))
}

func (m *tokenManager) sweepCluster(ctx context.Context, clusterID string, now time.Time) error {
	m.mu.Lock()
	e := m.clusters[clusterID]
	m.mu.Unlock()
	if e == nil {
		return nil
	}
	select {
	case e.lock <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer e.unlock()
	if e.gone || len(e.retiring) == 0 || !m.replaced(e, now) {
		return nil
	}
	return m.retire(ctx, clusterID, e, now, "replaced")
}

func (m *tokenManager) sweepOrphans(ctx context.Context, now time.Time) []error {
	m.mu.Lock()
	due := map[string]orphan{}
	for name, o := range m.orphans {
		if !now.Before(o.since.Add(m.grace)) && m.replaced(m.clusters[o.cluster], now) {
			due[name] = o
		}
	}
	m.mu.Unlock()
	var errs []error
	for name, o := range due {
		err := m.revoke(ctx, o.cluster, name, "orphan")
		if err != nil && (o.expires.IsZero() || now.Before(o.expires)) {
			errs = append(errs, err)
			continue
		}
		m.mu.Lock()
		delete(m.orphans, name)
		m.mu.Unlock()
	}
	return errs
}

// Adopt begins a leadership term. It forgets every token held (the leader
// of the terms between may have revoked them), lists this Rancher user's
// tokens and takes as each cluster's current token the one its Secret
// holds (held: the bearer values by cluster id), if Rancher still has it
// with this deployment's and source's marker, scoped to that cluster, not
// expired. The other tokens marked by this installation (install; or by
// no installation, from versions before it was marked) become orphans,
// revoked by Sweep once their grace period has passed. Nothing is revoked
// here: a refused mint later leaves every Secret with its working token.
// Other installations' tokens, anything else's and the listing token are
// never touched. Until Adopt succeeds in a term, Token fails.
func (m *tokenManager) Adopt(ctx context.Context, install string, held map[string]string) error {
	if install != "" && !markerValue(install) {
		return failed(upstream.KindConfig, opTokensList, errors.New("adopt tokens: invalid installation id"))
	}
	m.adopting.Lock()
	defer m.adopting.Unlock()
	m.mu.Lock()
	m.clusters, m.held, m.orphans, m.adopted, m.install = map[string]*clusterTokens{}, map[string]bool{}, map[string]orphan{}, false, install
	m.mu.Unlock()
	listed, err := m.list(ctx)
	if err != nil {
		return err
	}
	heldBy := make(map[string]string, len(held)) // token name → cluster
	for cluster, v := range held {
		if name, _, ok := strings.Cut(v, ":"); ok {
			heldBy[name] = cluster
		}
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range listed {
		k, ok := m.ours(t)
		if !ok {
			continue
		}
		if heldBy[t.Name] == t.ClusterID && !t.Expired && t.CreatedTS > 0 {
			h := &heldToken{name: t.Name, value: held[t.ClusterID], issued: time.UnixMilli(t.CreatedTS), ttl: m.ttl, written: now}
			if d := time.Duration(t.TTLMillis) * time.Millisecond; d > 0 {
				h.ttl = d
			}
			m.clusters[t.ClusterID] = &clusterTokens{lock: make(chan struct{}, 1), current: h}
			m.held[t.Name] = true
			continue
		}
		if k.install == install || k.install == "" {
			o := orphan{cluster: t.ClusterID, since: now}
			if t.TTLMillis > 0 && t.CreatedTS > 0 {
				o.expires = time.UnixMilli(t.CreatedTS).Add(time.Duration(t.TTLMillis) * time.Millisecond)
			}
			m.orphans[t.Name] = o
		}
	}
	m.adopted = true
	m.metrics.live.Set(float64(len(m.held)))
	m.log.Info("adopted the rancher tokens our Secrets hold", "adopted", len(m.held), "orphans", len(m.orphans), "revokeAfter", m.grace)
	return nil
}

// ours returns the marker of a listed token that this deployment's source
// minted (in any installation), scoped to the cluster its marker names.
func (m *tokenManager) ours(t rancherToken) (marker, bool) {
	if t.Name == "" || t.ClusterID == "" || !t.IsDerived || t.Current {
		return marker{}, false
	}
	k, ok := parseMarker(t.Description)
	return k, ok && k.owner == m.ownerID && k.cluster == t.ClusterID && (k.source == m.source || k.source == "")
}

// RevokeAll revokes every token this installation's source minted (the
// chart's uninstall hook), whether a Secret holds it or not, and returns
// how many it revoked.
func (m *tokenManager) RevokeAll(ctx context.Context, install string) (int, error) {
	listed, err := m.list(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, t := range listed {
		if k, ok := m.ours(t); !ok || k.install != install && k.install != "" {
			continue
		}
		if err := m.revoke(ctx, t.ClusterID, t.Name, "uninstall"); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("revoke tokens: %d not revoked: %w", len(errs), errs[0])
	}
	return n, nil
}

// list fetches every page of /v3/tokens, through the loop that pages
// /v3/clusters. A next link is requested on Rancher's origin: the listing
// token goes nowhere else.
func (m *tokenManager) list(ctx context.Context) ([]rancherToken, error) {
	var all []rancherToken
	pg := pager[*tokenCollection]{
		onOrigin: func(link string) (string, error) {
			u, err := url.Parse(link)
			if err != nil {
				return "", errors.New("invalid url")
			}
			u.Scheme, u.Host, u.User = m.origin.Scheme, m.origin.Host, nil
			return u.String(), nil
		},
		next: func(what, link string, col *tokenCollection) error {
			return m.do(ctx, opTokensList, what, http.MethodGet, link, nil, col)
		},
	}
	err := followPages(pg, opTokensList, "list tokens",
		func(col *tokenCollection) error { return pg.next("list tokens page 1", m.tokensURL, col) },
		func(what string, col *tokenCollection, err error) error {
			switch {
			case err != nil:
				return err
			case col.Type != "collection":
				return invalid(opTokensList, "%s: the answer is not a collection", what)
			}
			all = append(all, col.Data...)
			return nil
		})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// ambiguous reports whether a failed create may have created the token.
func ambiguous(err error) bool {
	switch upstream.KindOf(err) {
	case upstream.KindTimeout, upstream.KindNetwork, upstream.KindServer, upstream.KindCanceled, upstream.KindInvalidResponse:
		return true
	}
	return false
}

// findOrphans lists the tokens after an ambiguous create and takes those
// of this installation that nothing holds as orphans.
func (m *tokenManager) findOrphans(ctx context.Context, now time.Time) error {
	m.mu.Lock()
	relist := m.relist
	m.mu.Unlock()
	if !relist {
		return nil
	}
	m.adopting.Lock() // no create half done
	defer m.adopting.Unlock()
	listed, err := m.list(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range listed {
		k, ok := m.ours(t)
		if !ok || k.install != m.install && k.install != "" || m.held[t.Name] {
			continue
		}
		if _, known := m.orphans[t.Name]; !known {
			m.orphans[t.Name] = orphan{cluster: t.ClusterID, since: now}
		}
	}
	m.relist = false
	return nil
}
