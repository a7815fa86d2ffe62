package config

import (
	"fmt"
	"math"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/rancher"
)

// Validate checks every field and returns every problem, each with its
// full path. It changes nothing.
func (c *Config) Validate() field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, c.validateLogAndRuntime()...)
	errs = append(errs, c.validateServer(field.NewPath("server"))...)
	errs = append(errs, c.validateInventory(field.NewPath("inventory"))...)
	errs = append(errs, c.validateDeparture(field.NewPath("departure"))...)
	errs = append(errs, c.validateLedger(field.NewPath("ledger"))...)
	errs = append(errs, c.validateSources(field.NewPath("sources"))...)
	errs = append(errs, c.validateSecrets(field.NewPath("secrets"))...)
	errs = append(errs, c.validateTenants(field.NewPath("secrets", "tenants"))...)
	errs = append(errs, c.validateAppSetRefresh(field.NewPath("applicationSetRefresh"))...)
	return errs
}

// check appends e when it is not nil.
func check(errs field.ErrorList, e *field.Error) field.ErrorList {
	if e != nil {
		return append(errs, e)
	}
	return errs
}

func (c *Config) validateLogAndRuntime() field.ErrorList {
	var errs field.ErrorList
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, field.NotSupported(field.NewPath("log", "level"), c.Log.Level, []string{"debug", "info", "warn", "error"}))
	}
	if c.Log.Format != "json" && c.Log.Format != "text" {
		errs = append(errs, field.NotSupported(field.NewPath("log", "format"), c.Log.Format, []string{"json", "text"}))
	}
	if c.Runtime.GCPercent < 1 || c.Runtime.GCPercent > 1000 {
		errs = append(errs, field.Invalid(field.NewPath("runtime", "gcPercent"), c.Runtime.GCPercent, "must be between 1 and 1000 (Go's own default is 100)"))
	}
	return errs
}

func (c *Config) validateServer(at *field.Path) field.ErrorList {
	var errs field.ErrorList
	s := &c.Server
	if s.Listen == "" && !c.offline {
		errs = append(errs, field.Required(at.Child("listen"), ""))
	}
	if s.OpsListen != "" && s.OpsListen == s.Listen {
		errs = append(errs, field.Invalid(at.Child("opsListen"), s.OpsListen, "must differ from server.listen (leave it empty to serve both on one address)"))
	}
	if _, err := generator.NormalizePrefix(s.PathPrefix); err != nil {
		errs = append(errs, field.Invalid(at.Child("pathPrefix"), s.PathPrefix, err.Error()))
	}
	if len(s.Tokens) == 0 && !c.offline {
		errs = append(errs, field.Required(at.Child("tokens"), "at least one token reference (file or env)"))
	}
	for i, t := range s.Tokens {
		if t.Issued != nil {
			errs = append(errs, field.Forbidden(at.Child("tokens").Index(i).Child("issued"), "set by sources only"))
		} else if t.Secret != nil {
			errs = append(errs, field.Forbidden(at.Child("tokens").Index(i).Child("secret"), "use file (a mounted Secret) or env"))
		} else if err := t.Validate(); err != nil {
			errs = append(errs, field.Invalid(at.Child("tokens").Index(i), field.OmitValueType{}, err.Error()))
		}
	}
	errs = check(errs, s.TokenReloadInterval.Validate(at.Child("tokenReloadInterval"), time.Second, 0))
	errs = check(errs, s.DrainDelay.Validate(at.Child("drainDelay"), 0, time.Minute))
	return check(errs, s.ShutdownTimeout.Validate(at.Child("shutdownTimeout"), time.Millisecond, 0))
}

func (c *Config) validateInventory(at *field.Path) field.ErrorList {
	var errs field.ErrorList
	inv := &c.Inventory
	errs = append(errs, listing(at, inv.Interval, inv.Timeout, false)...)
	return append(errs, inventory.ValidateSpread(at, inv.Jitter, inv.Prefer)...)
}

// listing checks an interval and a timeout as written at path: a value
// that does not parse is this file's problem, the range the inventory's
// (inventory.ValidateInterval, ValidateTimeout). With optional, an unset
// value (a source that keeps the inventory's) is not checked.
func listing(path *field.Path, interval, timeout sources.Duration, optional bool) field.ErrorList {
	var errs field.ErrorList
	for _, d := range []struct {
		name  string
		v     sources.Duration
		check func(*field.Path, time.Duration) *field.Error
	}{{"interval", interval, inventory.ValidateInterval}, {"timeout", timeout, inventory.ValidateTimeout}} {
		switch at := path.Child(d.name); {
		case optional && d.v.IsZero():
		case !d.v.Parsed():
			errs = check(errs, d.v.Validate(at, 0, 0))
		default:
			errs = check(errs, d.check(at, d.v.Std()))
		}
	}
	return errs
}

func (c *Config) validateDeparture(at *field.Path) field.ErrorList {
	d := &c.Departure
	// the rule's checks are the inventory's, on the values as written
	// (a duration that does not parse is this file's problem)
	if err := d.GracePeriod.Validate(at.Child("gracePeriod"), 0, 0); err != nil {
		return field.ErrorList{err}
	}
	return inventory.Departure{AfterListings: d.AfterListings, GracePeriod: d.GracePeriod.Std(), MaxFraction: d.MaxFraction,
		HeldListings: d.HeldListings, MaxDeletions: d.MaxDeletions, MaxDeletionsPercent: d.MaxDeletionsPercent}.Validate(at)
}

func (c *Config) validateSources(at *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(c.Sources) == 0 {
		errs = append(errs, field.Required(at, "at least one source"))
	}
	names := map[string]int{}
	for i := range c.Sources {
		s := &c.Sources[i]
		si := at.Index(i)
		if s.undecoded {
			continue
		}
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(si.Child("name"), ""))
		case !sourceNameOK(s.Name):
			errs = append(errs, field.Invalid(si.Child("name"), s.Name, "use lower-case letters, digits and '-', at most 40 (it appears in cluster names and labels)"))
		default:
			if j, dup := names[s.Name]; dup {
				e := field.Duplicate(si.Child("name"), s.Name)
				e.Detail = "also the name of " + at.Index(j).String()
				errs = append(errs, e)
			} else {
				names[s.Name] = i
			}
		}
		errs = append(errs, listing(si, s.Interval, s.Timeout, true)...)
		if s.Trust != "" && s.Trust != TrustClusterLabels {
			errs = append(errs, field.NotSupported(si.Child("trust"), s.Trust, []string{TrustClusterLabels}))
		}
		errs = append(errs, c.validateSection(si, s)...)
	}
	return append(errs, c.validateNamePrefixes(at)...)
}

// validateSection checks that the source's provider is known and its
// section there, then the section, with the provider's own Validate.
func (c *Config) validateSection(at *field.Path, s *Source) field.ErrorList {
	reg := c.Registry()
	switch {
	case s.Provider == "":
		return field.ErrorList{field.Required(at.Child("provider"), "one of "+providerNames(reg))}
	case !reg.Has(s.Provider):
		return field.ErrorList{field.NotSupported(at.Child("provider"), s.Provider, reg.Names())}
	case s.Section == nil:
		return field.ErrorList{field.Required(at.Child(string(s.Provider)), "required for provider "+string(s.Provider))}
	}
	return s.Section.Validate(at.Child(string(s.Provider)))
}

// validateNamePrefixes requires one namePrefix per Rancher source:
// Rancher display names and ids repeat across servers.
func (c *Config) validateNamePrefixes(at *field.Path) field.ErrorList {
	var errs field.ErrorList
	prefixes := map[string]int{}
	for i, s := range c.Sources {
		rc, ok := s.Section.(*rancher.Config)
		if !ok {
			continue
		}
		p := rc.NamePrefix
		if j, dup := prefixes[p]; dup {
			errs = append(errs, field.Invalid(at.Index(i).Child("rancher", "namePrefix"), p,
				fmt.Sprintf("also the prefix of sources[%d]: Rancher display names and ids repeat across servers, give each Rancher source its own namePrefix", j)))
		}
		prefixes[p] = i
	}
	return errs
}

// EffectiveInterval is the source's interval, or the inventory's.
func (c *Config) EffectiveInterval(s *Source) time.Duration {
	if !s.Interval.IsZero() {
		return s.Interval.Std()
	}
	return c.Inventory.Interval.Std()
}

// EffectiveTimeout is the source's timeout, or the inventory's.
func (c *Config) EffectiveTimeout(s *Source) time.Duration {
	if !s.Timeout.IsZero() {
		return s.Timeout.Std()
	}
	return c.Inventory.Timeout.Std()
}

func (c *Config) validateSecrets(at *field.Path) field.ErrorList {
	var errs field.ErrorList
	s := &c.Secrets
	for _, d := range []struct {
		path *field.Path
		d    sources.Duration
	}{{at.Child("resync"), s.Resync}, {at.Child("prune", "gracePeriod"), s.Prune.GracePeriod}} {
		// only that it is a duration: its range is the reconciler's to
		// check (Reconciler().Validate), not written twice
		errs = check(errs, d.d.Validate(d.path, math.MinInt64, 0))
	}
	if len(s.Select) > 0 {
		if f, err := c.parseSelect(); err != nil {
			errs = append(errs, selectError(at.Child("select"), err))
		} else {
			s.match = f.Match // not a change of the configuration: its parsed form
		}
	}
	if s.Client.QPS <= 0 || s.Client.QPS > 10000 {
		errs = append(errs, field.Invalid(at.Child("client", "qps"), s.Client.QPS, "must be above 0 and at most 10000"))
	}
	if s.Client.Burst < 1 || float32(s.Client.Burst) < s.Client.QPS {
		errs = append(errs, field.Invalid(at.Child("client", "burst"), s.Client.Burst, "must be at least 1 and at least qps"))
	}
	for name := range s.Credentials {
		if !c.hasSource(name) {
			e := field.NotFound(at.Child("credentials").Key(name), name)
			e.Detail = "no source of that name is configured"
			errs = append(errs, e)
		}
	}
	for i := range c.Sources {
		src := &c.Sources[i]
		_, overridden := s.Credentials[src.Name]
		if o, ok := src.Section.(sources.OwnerChosenServers); ok && overridden && o.OwnerChoosesServers() {
			errs = append(errs, field.Forbidden(at.Child("credentials").Key(src.Name),
				"the source's cluster owners choose their servers (Rancher's authorized cluster endpoint with ace true or auto, an ARO cluster's domain): each cluster gets a token of its own, never one credential sent to every server"))
		}
	}
	if s.Enabled {
		rc := s.Reconciler()
		errs = append(errs, rc.Validate(at)...)
	}
	if s.Enabled || c.ApplicationSetRefresh.Enabled {
		errs = append(errs, c.validateLeaderElection(at.Child("leaderElection"))...)
	}
	return append(errs, c.validateHybridHub(at)...)
}

// hybridMinimum is the first Argo CD that honours skip-reconcile on a
// cluster Secret (argo-cd commit ed6d2c525e, controller/sharding/cache.go).
var hybridMinimum = version.MustParseGeneric("3.4.0")

// hybridWhy is what a hybrid hub before Argo CD 3.4.0 does wrong.
const hybridWhy = "a hub with agent clusters and the Secrets this service writes needs Argo CD 3.4.0 or later: " +
	"before it, Argo CD ignores argocd.argoproj.io/skip-reconcile on cluster Secrets and its application controller reconciles the agents' Applications too"

// agentSources names the sources whose clusters are reached through the
// Argo CD agent (sources.ThroughAgents).
func (c *Config) agentSources() []string {
	var out []string
	for i := range c.Sources {
		if ta, ok := c.Sources[i].Section.(sources.ThroughAgents); ok && ta.ThroughAgents() {
			out = append(out, c.Sources[i].Name)
		}
	}
	return out
}

// validateHybridHub checks secrets.argocdVersion and what it allows: a hub
// with agent clusters (a source with auth agent) and the Secrets we write
// needs Argo CD 3.4.0 or later (see hybridWarnings when unstated), and an
// agent source takes no credentials override.
func (c *Config) validateHybridHub(at *field.Path) field.ErrorList {
	s := &c.Secrets
	var errs field.ErrorList
	agents := c.agentSources()
	for _, name := range agents {
		if _, ok := s.Credentials[name]; ok {
			errs = append(errs, field.Forbidden(at.Child("credentials").Key(name),
				"the source's clusters are reached through the Argo CD agent, with the agents' Secrets: no Secret of ours, no credentials"))
		}
	}
	if s.ArgoCDVersion == "" {
		return errs
	}
	v, err := version.ParseGeneric(s.ArgoCDVersion)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(at.Child("argocdVersion"), s.ArgoCDVersion, "not a version such as 3.4.2"))
	case s.Enabled && len(agents) > 0 && v.LessThan(hybridMinimum):
		errs = append(errs, field.Invalid(at.Child("argocdVersion"), s.ArgoCDVersion, hybridWhy))
	}
	return errs
}

// hybridWarnings warns of a hub with agent clusters and the Secrets we
// write whose Argo CD version is not stated, so not checked.
func (c *Config) hybridWarnings() []string {
	agents := c.agentSources()
	if !c.Secrets.Enabled || len(agents) == 0 || c.Secrets.ArgoCDVersion != "" {
		return nil
	}
	return []string{fmt.Sprintf("sources %s reach their clusters through the Argo CD agent and secrets.enabled is on: %s "+
		"(set secrets.argocdVersion to have it checked)", strings.Join(agents, ", "), hybridWhy)}
}

// selectError is a problem of secrets.select, which has the plugin
// input's filters and their errors ("input.parameters.tenant[1]: ..."): at
// the key it names, if any.
func selectError(at *field.Path, err error) *field.Error {
	msg := strings.TrimPrefix(err.Error(), "input.parameters")
	if sub, detail, ok := strings.Cut(msg, ": "); ok && (sub == "" || strings.HasPrefix(sub, ".")) {
		return field.Invalid(joinPath(at, sub), field.OmitValueType{}, detail)
	}
	return field.Invalid(at, field.OmitValueType{}, msg)
}

// validateLeaderElection checks the Lease settings the reconciler and the
// refresh trigger share.
func (c *Config) validateLeaderElection(at *field.Path) field.ErrorList {
	var errs field.ErrorList
	le := &c.Secrets.LeaderElection
	for _, d := range []struct {
		name string
		d    sources.Duration
	}{{"leaseDuration", le.LeaseDuration}, {"renewDeadline", le.RenewDeadline}, {"retryPeriod", le.RetryPeriod}} {
		errs = check(errs, d.d.Validate(at.Child(d.name), 0, 0))
	}
	if le.Enabled && (le.LeaseName == "" || le.RenewDeadline.Std() >= le.LeaseDuration.Std() || le.RetryPeriod.Std() <= 0) {
		errs = append(errs, field.Invalid(at, field.OmitValueType{}, "needs a leaseName and retryPeriod < renewDeadline < leaseDuration"))
	}
	// the Lease records whole seconds (leaseDurationSeconds), and the other
	// replica waits only those: a fraction more would let both lead
	if d := le.LeaseDuration.Std(); le.Enabled && le.LeaseDuration.Parsed() && (d < time.Second || d%time.Second != 0) {
		errs = append(errs, field.Invalid(at.Child("leaseDuration"), le.LeaseDuration.String(),
			"must be a whole number of seconds, at least 1s: the Lease records whole seconds, and another replica takes it after those"))
	}
	return errs
}

func (c *Config) validateLedger(at *field.Path) field.ErrorList {
	var errs field.ErrorList
	l := &c.Ledger
	switch l.Kind {
	case LedgerMemory:
	case LedgerKubernetes:
		if msgs := validation.IsDNS1123Label(c.EffectiveLedgerNamespace()); len(msgs) > 0 {
			errs = append(errs, field.Invalid(at.Child("namespace"), c.EffectiveLedgerNamespace(), strings.Join(msgs, "; ")))
		}
		if l.ConfigMap != "" {
			if msgs := validation.IsDNS1123Subdomain(l.ConfigMap); len(msgs) > 0 {
				errs = append(errs, field.Invalid(at.Child("configMap"), l.ConfigMap, strings.Join(msgs, "; ")))
			}
		}
		if msgs := validation.IsValidLabelValue(c.Secrets.OwnerID); c.Secrets.OwnerID == "" || len(msgs) > 0 {
			errs = append(errs, field.Required(field.NewPath("secrets", "ownerID"),
				"the kubernetes ledger labels its objects with the owner id: set a label value unique to this installation"))
		}
	default:
		errs = append(errs, field.NotSupported(at.Child("kind"), l.Kind, []string{LedgerMemory, LedgerKubernetes}))
	}
	return errs
}

func (c *Config) hasSource(name string) bool {
	for _, s := range c.Sources {
		if s.Name == name {
			return true
		}
	}
	return false
}

func (c *Config) validateAppSetRefresh(at *field.Path) field.ErrorList {
	var errs field.ErrorList
	r := &c.ApplicationSetRefresh
	// the range is this file's policy; the trigger only needs it positive
	debounce := r.Debounce.Validate(at.Child("debounce"), 100*time.Millisecond, 10*time.Minute)
	errs = check(errs, debounce)
	if !r.Enabled {
		return errs
	}
	rc := c.Refresh()
	for _, e := range rc.Validate(at) {
		switch {
		case debounce != nil && e.Field == debounce.Field: // reported above
		case len(r.Namespaces) == 0 && e.Field == at.Child("namespaces").Index(0).String():
			// the namespace taken from secrets.namespace
			errs = append(errs, field.Invalid(field.NewPath("secrets", "namespace"), c.Secrets.Namespace,
				e.Detail+" (applicationSetRefresh takes it as Argo CD's namespace)"))
		default:
			errs = append(errs, e)
		}
	}
	return errs
}

func sourceNameOK(s string) bool {
	if len(s) > 40 || strings.HasPrefix(s, "-") || strings.HasSuffix(s, "-") {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

// parseSelect parses secrets.select with the plugin input's filters.
func (c *Config) parseSelect() (generator.Filter, error) {
	return generator.ParseParameters(c.Secrets.Select, c.Registry().Names())
}
