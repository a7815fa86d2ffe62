package clustersecret

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

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

// DefaultDebounce is the default of Config.Debounce.
const DefaultDebounce = time.Second

// Defaults fills unset fields. New takes its configuration as given: a
// caller that leaves fields unset calls Defaults first, so that a value
// set (maxDeletions: 0) is never replaced.
func (c *Config) Defaults() {
	if c.Policy == "" {
		c.Policy = PolicyUpsertOnly
	}
	if c.Resync == 0 {
		c.Resync = 5 * time.Minute
	}
	if c.Debounce == 0 {
		c.Debounce = DefaultDebounce
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

// Validate returns every problem of the configuration, each with its path
// under path (the secrets section of the configuration file); it changes
// nothing. The configuration loader and New call it alike.
func (c *Config) Validate(path *field.Path) field.ErrorList {
	errs := c.Options.Validate(path)
	if !c.Policy.Valid() {
		errs = append(errs, field.NotSupported(path.Child("policy"), c.Policy, []Policy{PolicySync, PolicyUpsertOnly, PolicyCreateOnly}))
	}
	if c.Resync < time.Second {
		errs = append(errs, field.Invalid(path.Child("resync"), c.Resync.String(), "must be at least 1s"))
	}
	if c.Concurrency < 1 {
		errs = append(errs, field.Invalid(path.Child("concurrency"), c.Concurrency, "must be at least 1"))
	}
	prune := path.Child("prune")
	if c.Prune.AfterListings < 1 {
		errs = append(errs, field.Invalid(prune.Child("afterListings"), c.Prune.AfterListings, "must be at least 1 (one listing is never enough to confirm a departure)"))
	}
	if c.Prune.MaxDeletions < 0 {
		errs = append(errs, field.Invalid(prune.Child("maxDeletions"), c.Prune.MaxDeletions, "must be at least 0"))
	}
	if c.Prune.MaxDeletionsPercent < 0 || c.Prune.MaxDeletionsPercent > 100 {
		errs = append(errs, field.Invalid(prune.Child("maxDeletionsPercent"), c.Prune.MaxDeletionsPercent, "must be between 0 and 100"))
	}
	return errs
}
