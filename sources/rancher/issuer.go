package rancher

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// issuer mints the per-cluster tokens of a source whose clusters need them
// (clusterTokens perCluster, or an authorized cluster endpoint, which
// accepts only tokens scoped to its cluster), and keeps them across
// restarts and leader changes through the Secrets that hold them (see
// tokenManager).
type issuer struct {
	tokens *tokenManager
}

var _ sources.TokenKeeper = (*Source)(nil)

// newIssuer builds the source's issuer and registers its metrics with reg
// (nil: none). Every Rancher source has one. It makes no request until a
// term begins.
func (s *Source) newIssuer(ownerID string, client *http.Client, caPEM []byte, reg prometheus.Registerer) (*issuer, error) {
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
	if tm.metrics, err = registerTokenMetrics(reg); err != nil {
		return nil, fmt.Errorf("register token metrics: %w", err)
	}
	tm.source, tm.grace = s.mapper.source, s.cfg.TokenGracePeriod.Std()
	return &issuer{tokens: tm}, nil
}

// IssueToken returns a token scoped to the cluster: the one adopted or
// minted in this term, renewed as needed (sources.TokenIssuer).
func (s *Source) IssueToken(ctx context.Context, clusterID string) (string, error) {
	if s.issuer == nil {
		return "", fmt.Errorf("source %s issues no per-cluster tokens", s.mapper.source)
	}
	return s.issuer.tokens.Token(ctx, clusterID)
}

// AdoptTokens begins a leadership term (sources.TokenKeeper): see
// tokenManager.Adopt.
func (s *Source) AdoptTokens(ctx context.Context, installation string, held map[string]string) error {
	if s.issuer == nil {
		return nil
	}
	if err := s.issuer.tokens.Adopt(ctx, installation, held); err != nil {
		return fmt.Errorf("adopt the tokens our secrets hold: %w", err)
	}
	return nil
}

// TokenWritten records that the cluster's Secret holds value
// (sources.TokenKeeper).
func (s *Source) TokenWritten(clusterID, value string) {
	if s.issuer != nil {
		s.issuer.tokens.Written(clusterID, value)
	}
}

// SweepTokens revokes the replaced tokens and the orphans whose grace
// period has passed (sources.TokenKeeper).
func (s *Source) SweepTokens(ctx context.Context) error {
	if s.issuer == nil {
		return nil
	}
	return s.issuer.tokens.Sweep(ctx)
}

// RevokeTokens revokes every token this installation's source minted,
// whether a Secret holds it or not, and returns how many (the chart's
// uninstall hook; sources.TokenKeeper).
func (s *Source) RevokeTokens(ctx context.Context, installation string) (int, error) {
	if s.issuer == nil {
		return 0, nil
	}
	return s.issuer.tokens.RevokeAll(ctx, installation)
}

// ReleaseToken revokes the cluster's token (sources.TokenIssuer).
func (s *Source) ReleaseToken(ctx context.Context, clusterID string) error {
	if s.issuer == nil {
		return nil
	}
	return s.issuer.tokens.Release(ctx, clusterID)
}

// LiveTokens is the number of tokens the source adopted or minted and has
// not revoked.
func (s *Source) LiveTokens() int {
	if s.issuer == nil {
		return 0
	}
	return s.issuer.tokens.Live()
}
