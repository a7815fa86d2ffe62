package generator

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TokenSet holds the bearer tokens the plugin API accepts, read from files
// or environment variables. Several tokens are accepted at once so that a
// token can be rotated without downtime: add the new one, move Argo CD to
// it, remove the old one. Files are re-read by Run.
type TokenSet struct {
	refs   []sources.SecretRef
	logger *slog.Logger

	mu      sync.Mutex // serializes Reload
	last    [][32]byte // per ref; zero when never read
	digests atomic.Pointer[[][32]byte]
}

// NewTokenSet reads every reference once. A reference that cannot be read
// or is empty is an error (all of them are reported): the service must not
// start without its tokens.
func NewTokenSet(refs []sources.SecretRef, logger *slog.Logger) (*TokenSet, error) {
	if len(refs) == 0 {
		return nil, fmt.Errorf("no token configured")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := &TokenSet{refs: refs, logger: logger, last: make([][32]byte, len(refs))}
	var errs []error
	for i, ref := range refs {
		if ref.Secret != nil {
			errs = append(errs, fmt.Errorf("token %d: a Kubernetes Secret reference is not supported here; mount it as a file", i))
			continue
		}
		if err := ref.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("token %d: %w", i, err))
			continue
		}
		d, err := readToken(ref)
		if err != nil {
			errs = append(errs, fmt.Errorf("token %d: %w", i, err))
			continue
		}
		t.last[i] = d
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t.publish()
	return t, nil
}

// MinTokenLength is the shortest plugin token accepted: the token guards
// the list of every cluster, and is compared in constant time, not rate
// limited.
const MinTokenLength = 16

func readToken(ref sources.SecretRef) ([32]byte, error) {
	v, err := ref.ReadLocal()
	if err != nil {
		return [32]byte{}, err
	}
	if len(v) < MinTokenLength {
		return [32]byte{}, fmt.Errorf("%s holds %d characters: a plugin token needs at least %d (the chart generates 48 random ones; e.g. openssl rand -hex 24)",
			ref.String(), len(v), MinTokenLength)
	}
	return sha256.Sum256([]byte(v)), nil
}

// CheckToken reads a plugin token reference as the server does and
// returns why it cannot be used (never its value).
func CheckToken(ref sources.SecretRef) error {
	_, err := readToken(ref)
	return err
}

func (t *TokenSet) publish() {
	ds := make([][32]byte, len(t.last))
	copy(ds, t.last)
	t.digests.Store(&ds)
}

// Reload re-reads every reference. A reference that fails keeps its previous
// value, so a half-written file never locks Argo CD out; the error is
// returned and logged without any token content.
func (t *TokenSet) Reload() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var firstErr error
	changed := false
	for i, ref := range t.refs {
		d, err := readToken(ref)
		if err != nil {
			t.logger.Warn("cannot re-read plugin token; keeping the previous one", "ref", ref.String(), "error", err.Error())
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if d != t.last[i] {
			t.last[i] = d
			changed = true
			t.logger.Info("plugin token changed", "ref", ref.String())
		}
	}
	if changed {
		t.publish()
	}
	return firstErr
}

// Run re-reads the tokens every interval until ctx is cancelled.
func (t *TokenSet) Run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_ = t.Reload()
		}
	}
}

// Valid reports whether token is one of the accepted tokens. It compares
// fixed-size digests in constant time and checks every token, so neither
// the length nor the position of a match shows in the timing.
func (t *TokenSet) Valid(token string) bool {
	d := sha256.Sum256([]byte(token))
	ok := 0
	for _, want := range *t.digests.Load() {
		ok |= subtle.ConstantTimeCompare(d[:], want[:])
	}
	return ok == 1
}
