package clustersecret

import (
	"fmt"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
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
	// Issuers mint the tokens of clusters whose Auth references an
	// IssuedToken, by source name.
	Issuers map[string]sources.TokenIssuer
	// Installation identifies this installation in what an issuer mints
	// (sources.TokenKeeper), so that two installations with one owner id
	// on one upstream account never revoke each other's tokens.
	Installation string
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
