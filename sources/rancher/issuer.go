package rancher

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// issuer mints the per-cluster tokens of a source whose clusters need them
// (clusterTokens perCluster, or ace true or auto: an authorized cluster
// endpoint accepts only tokens scoped to its cluster). After a restart it
// first revokes the tokens an earlier process of this deployment left
// (Adopt): Rancher returns a token's value only when it is created.
type issuer struct {
	tokens *tokenManager
	// mu guards adopted: whether the leftovers were revoked (done once,
	// retried until it succeeds).
	mu      sync.Mutex
	adopted bool
}

var _ sources.TokenIssuer = (*Source)(nil)

// newIssuer builds the source's issuer. Every Rancher source has one: a
// cluster can choose its authorized endpoint by label whatever the
// source's settings. It makes no request until a token is needed.
func (s *Source) newIssuer(ownerID string, client *http.Client, caPEM []byte) (*issuer, error) {
	if ownerID == "" {
		ownerID = "unset"
	}
	if client == nil {
		client = &http.Client{Transport: s.transport(caPEM), Timeout: s.timeout}
	}
	tm, err := newTokenManager(s.origin, client, func() (string, error) { return readToken(s.cfg.Token) },
		ownerID, s.cfg.TokenTTL.Std(), time.Now, s.log)
	if err != nil {
		return nil, fmt.Errorf("per-cluster tokens: %w", err)
	}
	tm.source = s.mapper.source
	return &issuer{tokens: tm}, nil
}

// IssueToken returns a token scoped to the cluster, minted or renewed as
// needed (sources.TokenIssuer).
func (s *Source) IssueToken(ctx context.Context, clusterID string) (string, error) {
	if s.issuer == nil {
		return "", fmt.Errorf("source %s issues no per-cluster tokens", s.mapper.source)
	}
	if err := s.issuer.adopt(ctx); err != nil {
		return "", fmt.Errorf("revoke the tokens an earlier process left: %w", err)
	}
	return s.issuer.tokens.Token(ctx, clusterID)
}

// adopt revokes the leftovers of earlier processes once.
func (i *issuer) adopt(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.adopted {
		return nil
	}
	if err := i.tokens.Adopt(ctx); err != nil {
		return err
	}
	i.adopted = true
	return nil
}

// NewTerm forgets every token the source holds and adopts again before
// its next token (sources.TermAware): the leader of the terms between
// revoked what this process minted before, and minted its own.
func (s *Source) NewTerm() {
	if s.issuer == nil {
		return
	}
	s.issuer.mu.Lock()
	defer s.issuer.mu.Unlock()
	s.issuer.adopted = false
	s.issuer.tokens.forgetAll()
}

var _ sources.TermAware = (*Source)(nil)

// ReleaseToken revokes the cluster's token (sources.TokenIssuer).
func (s *Source) ReleaseToken(ctx context.Context, clusterID string) error {
	if s.issuer == nil {
		return nil
	}
	return s.issuer.tokens.Release(ctx, clusterID)
}

// LiveTokens is the number of tokens the source minted and has not revoked.
func (s *Source) LiveTokens() int {
	if s.issuer == nil {
		return 0
	}
	return s.issuer.tokens.Live()
}
