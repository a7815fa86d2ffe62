package aks

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// caEntry is what the cache knows of one cluster's CA: the last
// successful read (ca, zero if none) and the last failed read since
// (failed, zero if none, with the reason).
type caEntry struct {
	ca      sources.CA
	fetched time.Time
	failed  time.Time
	reason  string
	// server is the cluster's API server when ca was read; operation is
	// whether a listing since saw the cluster in a provisioningState other
	// than Succeeded. The CA is read again, whatever its TTL, for another
	// server (the cluster deleted and created again under its id) and once
	// an operation ends (it may have rotated the certificates).
	server    string
	operation bool
}

// succeeded is the provisioningState of a cluster no operation is running
// on (compared case-insensitively).
const succeeded = "Succeeded"

// inOperation reports whether an operation is running on the cluster m.
func inOperation(m *mapped) bool { return !strings.EqualFold(m.state, succeeded) }

// caOutdated reports whether e's CA must be read again before its TTL
// for the cluster m: its server changed (whatever its state: a CA read for
// another server is never this one's), or an operation on it ended. It
// records in e an operation m is in.
func caOutdated(e *caEntry, m *mapped) bool {
	if e.server != m.cluster.Server {
		return true
	}
	if inOperation(m) {
		e.operation = true
		return false
	}
	return e.operation
}

// caTTL is the TTL of one cluster's CA: between 80% and 100% of ttl, fixed
// per cluster, so that the reads of clusters first seen together spread
// out instead of coming back as one burst every ttl.
func caTTL(ttl time.Duration, id string) time.Duration {
	sum := sha256.Sum256([]byte(id))
	frac := float64(binary.BigEndian.Uint32(sum[:4])) / (1 << 32)
	return ttl - time.Duration(float64(ttl)*0.2*frac)
}

// resolveCA sets the cluster's CA from the cache or from
// listClusterUserCredential. A read that fails keeps the expired CA when
// there is one for the same server, and otherwise marks the cluster not
// ready (the inventory keeps its last rendering, server and CA); failures are
// remembered for caErrorTTL so that a missing permission does not cost a
// call per cluster and listing. It returns an error only when ctx ends.
func (s *Source) resolveCA(ctx context.Context, m *mapped) error {
	now := s.now()
	s.mu.Lock()
	e, cached := s.cas[m.id]
	outdated := cached && !e.ca.IsZero() && caOutdated(&e, m)
	if cached {
		s.cas[m.id] = e
	}
	s.mu.Unlock()
	switch {
	case cached && !e.ca.IsZero() && !outdated && now.Sub(e.fetched) < caTTL(s.cfg.CATTL.Std(), m.id):
		s.metrics.caCache.WithLabelValues(caHit).Inc()
	case cached && !e.failed.IsZero() && now.Sub(e.failed) < s.cfg.CAErrorTTL.Std():
		s.metrics.caCache.WithLabelValues(caNegative).Inc()
	default:
		s.metrics.caCache.WithLabelValues(caMiss).Inc()
		ca, err := s.client.readCA(ctx, m.subscription, m.resourceGroup, m.azureName)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			// a CA read during an operation is read again when it ends
			e = caEntry{ca: ca, fetched: now, server: m.cluster.Server, operation: inOperation(m)}
		} else {
			e.failed, e.reason = now, err.Error()
			s.log.Warn("cannot read the cluster's CA", "cluster", m.cluster.Name, "resourceID", m.cluster.Annotations[AnnotationResourceID],
				"subscription", m.subscription, "error", e.reason, "keptExpiredCA", !e.ca.IsZero() && e.server == m.cluster.Server)
		}
		s.mu.Lock()
		s.cas[m.id] = e
		s.mu.Unlock()
	}
	switch {
	case e.ca.IsZero():
		m.cluster.Ready, m.notReadyKind = false, notReadyCA
		m.cluster.NotReadyReason = "CA unavailable: " + e.reason
		return nil
	case e.server != m.cluster.Server:
		m.cluster.Ready, m.notReadyKind = false, notReadyCA
		m.cluster.NotReadyReason = "CA unavailable for the new API server: " + e.reason
		return nil
	}
	m.cluster.CA = e.ca
	return nil
}

// forgetCAs drops the cached CAs of clusters no longer listed.
func (s *Source) forgetCAs(ids map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.cas {
		if !ids[id] {
			delete(s.cas, id)
		}
	}
}
