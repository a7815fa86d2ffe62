// Package config loads, defaults and validates the service's one YAML
// configuration file. Secrets are never written in it, only referenced by
// file or environment variable, so the effective configuration can be
// logged as it is.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/appsetrefresh"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/aks"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/eks"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// Config is the whole configuration file.
type Config struct {
	Log       Log       `json:"log"`
	Server    Server    `json:"server"`
	Inventory Inventory `json:"inventory"`
	// Departure decides when a served cluster has left (the answer and the
	// Secrets follow the same decision).
	Departure Departure `json:"departure"`
	Sources   []Source  `json:"sources"`
	Secrets   Secrets   `json:"secrets"`
	// ApplicationSetRefresh wakes the ApplicationSets using our plugin.
	ApplicationSetRefresh ApplicationSetRefresh `json:"applicationSetRefresh"`
	Runtime               Runtime               `json:"runtime"`

	// Dir is the directory of the file; relative paths are taken from it.
	Dir string `json:"-"`
}

// Log configures log/slog.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `json:"level"`
	// Format is json or text.
	Format string `json:"format"`
}

// Server configures the HTTP listeners and the plugin API.
type Server struct {
	// Listen is the address of the plugin API.
	Listen string `json:"listen"`
	// OpsListen, when set, serves /healthz, /readyz, /metrics and /status on
	// a separate address instead of beside the API.
	OpsListen string `json:"opsListen,omitempty"`
	// PathPrefix is put before /api/v1/getparams.execute.
	PathPrefix string `json:"pathPrefix,omitempty"`
	// Tokens accepted as bearer tokens; two during a rotation.
	Tokens []sources.SecretRef `json:"tokens"`
	// TokenReloadInterval is how often token files are re-read.
	TokenReloadInterval Duration `json:"tokenReloadInterval"`
	// ShutdownTimeout bounds the wait for in-flight requests on SIGTERM.
	ShutdownTimeout Duration `json:"shutdownTimeout"`
}

// Runtime tunes the Go runtime.
type Runtime struct {
	// GCPercent is the garbage collector's target (what GOGC sets): how far
	// the heap may grow beyond the data that survived the last collection
	// before the next one, in percent. Nearly all of this service's heap is
	// the inventory and its encoding, which live until the next listing, so
	// Go's default of 100 would let the process hold twice the inventory;
	// the default here is 25. The GOGC environment variable, when set, wins.
	GCPercent int `json:"gcPercent"`
}

// Inventory holds the defaults of every source's refresh loop.
type Inventory struct {
	Interval Duration `json:"interval"`
	Timeout  Duration `json:"timeout"`
	// Jitter spreads refreshes by ± this fraction of the interval.
	Jitter float64 `json:"jitter"`
	// Prefer says which listing is served when a cluster is found twice
	// (through Rancher and through EKS/AKS): cloud or rancher.
	Prefer inventory.Preference `json:"prefer"`
}

// Departure is the rule that confirms a cluster's departure: absent from
// (or leaving in) AfterListings consecutive complete listings of its source
// and GracePeriod passed. A listing that makes more than MaxFraction of a
// source's served clusters missing at once (a mass drop: a lost role or
// subscription, more often than a mass deletion) is held: each of those
// needs HeldListings listings.
type Departure struct {
	AfterListings int      `json:"afterListings"`
	GracePeriod   Duration `json:"gracePeriod"`
	MaxFraction   float64  `json:"maxFraction"`
	HeldListings  int      `json:"heldListings"`
}

// Inventory returns the inventory's departure rule.
func (d Departure) Inventory() inventory.Departure {
	g := d.GracePeriod.Std()
	if g == 0 {
		g = -1 // explicitly none
	}
	return inventory.Departure{AfterListings: d.AfterListings, GracePeriod: g, MaxFraction: d.MaxFraction, HeldListings: d.HeldListings}
}

// Secrets configures the Argo CD cluster Secret reconciler.
type Secrets struct {
	Enabled bool `json:"enabled"`
	// Namespace is Argo CD's namespace; we write only there.
	Namespace string `json:"namespace"`
	// OwnerID identifies this deployment on every Secret it writes.
	OwnerID string `json:"ownerID"`
	Prefix  string `json:"prefix"`
	// Policy is sync, upsert-only or create-only.
	Policy string `json:"policy"`
	DryRun bool   `json:"dryRun"`
	// Resync is the period of drift repair passes.
	Resync      Duration `json:"resync"`
	Concurrency int      `json:"concurrency"`
	// Client limits the Kubernetes client of the Secret reconciler and the
	// refresh trigger.
	Client Client `json:"client"`
	Prune  Prune  `json:"prune"`
	// Tenants maps a tenant to its AppProject and namespaces. The rules
	// scope the plugin answer too (its project is the Secret's), whether
	// Secrets are enabled or not.
	Tenants map[string]sources.TenantRule `json:"tenants,omitempty"`
	// Select limits which served clusters get a Secret, with the filters of
	// the plugin input (source, provider, tenant, region, labelSelector,
	// nameRegex); empty: every served cluster. A cluster that leaves the
	// selection is a departure for its Secret (the prune countdown), never
	// an immediate delete.
	Select map[string]json.RawMessage `json:"select,omitempty"`
	// Credentials overrides, per source name.
	Credentials    map[string]clustersecret.CredentialOverride `json:"credentials,omitempty"`
	LeaderElection LeaderElection                              `json:"leaderElection"`
	// Kubeconfig is used outside a cluster; empty means in-cluster
	// configuration, or $KUBECONFIG when set.
	Kubeconfig string `json:"kubeconfig,omitempty"`
}

// Client is the Kubernetes client's own rate limit (client-go's QPS and
// Burst). Requests beyond it wait in the client; the API server's Priority
// and Fairness still orders them among other clients' by the service
// account's priority level, so a cold sync queues there rather than
// starving other controllers. The defaults write 10,000 Secrets in about a
// minute; client-go's own (5/s, burst 10) would take over half an hour.
type Client struct {
	QPS   float32 `json:"qps"`
	Burst int     `json:"burst"`
}

// Prune bounds deletions.
type Prune struct {
	AfterListings       int      `json:"afterListings"`
	GracePeriod         Duration `json:"gracePeriod"`
	MaxDeletions        int      `json:"maxDeletions"`
	MaxDeletionsPercent float64  `json:"maxDeletionsPercent"`
}

// LeaderElection lets several replicas serve the API while one writes.
type LeaderElection struct {
	Enabled       bool     `json:"enabled"`
	LeaseName     string   `json:"leaseName"`
	LeaseDuration Duration `json:"leaseDuration"`
	RenewDeadline Duration `json:"renewDeadline"`
	RetryPeriod   Duration `json:"retryPeriod"`
}

// ApplicationSetRefresh configures the trigger that patches the
// ApplicationSets using our plugin with Argo CD's refresh annotation when
// the inventory or our cluster Secrets change. It reaches Kubernetes as the
// Secret reconciler does (secrets.kubeconfig), takes secrets.namespace as
// Argo CD's namespace, and elects a leader with secrets.leaderElection's
// settings on a Lease of its own, <leaseName>-appset-refresh.
type ApplicationSetRefresh struct {
	Enabled bool `json:"enabled"`
	// PluginConfigMap is the configMapRef.name of our plugin generator.
	PluginConfigMap string `json:"pluginConfigMap"`
	// Namespaces holding ApplicationSets: empty means secrets.namespace
	// (Argo CD's), ["*"] every namespace.
	Namespaces []string `json:"namespaces"`
	// Debounce is waited after a change before refreshing.
	Debounce Duration `json:"debounce"`
}

// Reconciler returns the reconciler's configuration.
func (s *Secrets) Reconciler() clustersecret.Config {
	return clustersecret.Config{
		Options: clustersecret.Options{Namespace: s.Namespace, OwnerID: s.OwnerID, Prefix: s.Prefix,
			Credentials: s.Credentials},
		Select: s.selector(),
		Policy: clustersecret.Policy(s.Policy), DryRun: s.DryRun, Resync: s.Resync.Std(), Concurrency: s.Concurrency,
		Prune: clustersecret.PruneOptions{AfterListings: s.Prune.AfterListings, GracePeriod: s.Prune.GracePeriod.Std(),
			MaxDeletions: s.Prune.MaxDeletions, MaxDeletionsPercent: s.Prune.MaxDeletionsPercent},
	}
}

// selector returns the Select filter's match, nil for every cluster (or a
// filter Validate rejects).
func (s *Secrets) selector() func(*sources.Cluster) bool {
	if len(s.Select) == 0 {
		return nil
	}
	f, err := generator.ParseParameters(s.Select)
	if err != nil {
		return nil
	}
	return f.Match
}

// Source is one source instance. Exactly the section named by Provider is
// set.
type Source struct {
	Name     string           `json:"name"`
	Provider sources.Provider `json:"provider"`
	// Interval and Timeout override the inventory defaults.
	Interval Duration        `json:"interval,omitempty"`
	Timeout  Duration        `json:"timeout,omitempty"`
	Static   *static.Config  `json:"static,omitempty"`
	EKS      *eks.Config     `json:"eks,omitempty"`
	AKS      *aks.Config     `json:"aks,omitempty"`
	Rancher  *rancher.Config `json:"rancher,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("30s").
// A value that does not parse is kept and reported by Validate, so that the
// error names its field.
type Duration struct {
	d   time.Duration
	bad string
}

// D makes a Duration.
func D(d time.Duration) Duration { return Duration{d: d} }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.d.String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		*d = Duration{bad: string(b)}
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		*d = Duration{bad: s}
		return nil
	}
	*d = Duration{d: v}
	return nil
}

// Std returns the time.Duration.
func (d Duration) Std() time.Duration { return d.d }

func (d Duration) unset() bool { return d.d == 0 && d.bad == "" }

// Default returns the configuration with every default set and no source.
func Default() Config {
	return Config{
		Log: Log{Level: "info", Format: "json"},
		Server: Server{
			Listen:              ":8080",
			TokenReloadInterval: D(10 * time.Second),
			ShutdownTimeout:     D(25 * time.Second),
		},
		Inventory: Inventory{Interval: D(time.Minute), Timeout: D(30 * time.Second), Jitter: 0.1, Prefer: inventory.PreferCloud},
		Departure: Departure{AfterListings: inventory.DefaultDeparture().AfterListings, GracePeriod: D(inventory.DefaultDeparture().GracePeriod),
			MaxFraction: inventory.DefaultDeparture().MaxFraction, HeldListings: inventory.DefaultDeparture().HeldListings},
		Secrets: Secrets{
			Namespace: "argocd", Prefix: "cluster", Policy: string(clustersecret.PolicyUpsertOnly), Resync: D(5 * time.Minute),
			Concurrency: 8, Client: Client{QPS: 200, Burst: 400}, Prune: Prune{AfterListings: 3, MaxDeletions: 5, MaxDeletionsPercent: 10},
			LeaderElection: LeaderElection{Enabled: true, LeaseName: "argocd-cluster-discovery",
				LeaseDuration: D(15 * time.Second), RenewDeadline: D(10 * time.Second), RetryPeriod: D(2 * time.Second)},
		},
		ApplicationSetRefresh: ApplicationSetRefresh{PluginConfigMap: "argocd-cluster-discovery", Debounce: D(2 * time.Second)},
		Runtime:               Runtime{GCPercent: 25},
	}
}

// Load reads path, applies defaults and validates. Unknown keys are errors.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := Parse(raw, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse is Load for bytes already read; dir resolves relative paths.
func Parse(raw []byte, dir string) (*Config, error) {
	cfg := Default()
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	cfg.Dir = dir
	for i := range cfg.Sources {
		s := &cfg.Sources[i]
		if s.Interval.unset() {
			s.Interval = cfg.Inventory.Interval
		}
		if s.Timeout.unset() {
			s.Timeout = cfg.Inventory.Timeout
		}
	}
	for i := range cfg.Server.Tokens {
		if f := cfg.Server.Tokens[i].File; f != "" && !filepath.IsAbs(f) {
			cfg.Server.Tokens[i].File = filepath.Join(dir, f)
		}
	}
	if k := cfg.Secrets.Kubeconfig; k != "" && !filepath.IsAbs(k) {
		cfg.Secrets.Kubeconfig = filepath.Join(dir, k)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Validate checks every field and returns all problems at once, each
// naming its field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	// duration reports an unparsable duration and returns false.
	duration := func(field string, d Duration) bool {
		if d.bad != "" {
			bad(field, "%s is not a duration such as \"30s\" or \"5m\"", d.bad)
			return false
		}
		return true
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if c.Log.Format != "json" && c.Log.Format != "text" {
		bad("log.format", "%q is not one of json, text", c.Log.Format)
	}
	if c.Server.Listen == "" {
		bad("server.listen", "required")
	}
	if c.Runtime.GCPercent < 1 || c.Runtime.GCPercent > 1000 {
		bad("runtime.gcPercent", "%d is not between 1 and 1000 (Go's own default is 100)", c.Runtime.GCPercent)
	}
	if c.Server.OpsListen != "" && c.Server.OpsListen == c.Server.Listen {
		bad("server.opsListen", "must differ from server.listen (leave it empty to serve both on one address)")
	}
	if _, err := generator.NormalizePrefix(c.Server.PathPrefix); err != nil {
		bad("server.pathPrefix", "%v", err)
	}
	if len(c.Server.Tokens) == 0 {
		bad("server.tokens", "at least one token reference (file or env) is required")
	}
	for i, t := range c.Server.Tokens {
		if t.Secret != nil {
			bad(fmt.Sprintf("server.tokens[%d]", i), "use file (a mounted Secret) or env")
		} else if err := t.Validate(); err != nil {
			bad(fmt.Sprintf("server.tokens[%d]", i), "%v", err)
		}
	}
	if duration("server.tokenReloadInterval", c.Server.TokenReloadInterval) && c.Server.TokenReloadInterval.Std() < time.Second {
		bad("server.tokenReloadInterval", "must be at least 1s")
	}
	if duration("server.shutdownTimeout", c.Server.ShutdownTimeout) && c.Server.ShutdownTimeout.Std() <= 0 {
		bad("server.shutdownTimeout", "must be positive")
	}
	if duration("inventory.interval", c.Inventory.Interval) && c.Inventory.Interval.Std() < time.Second {
		bad("inventory.interval", "must be at least 1s")
	}
	if duration("inventory.timeout", c.Inventory.Timeout) && c.Inventory.Timeout.Std() <= 0 {
		bad("inventory.timeout", "must be positive")
	}
	if c.Inventory.Jitter < 0 || c.Inventory.Jitter >= 1 {
		bad("inventory.jitter", "must be in [0, 1)")
	}
	if c.Inventory.Prefer != inventory.PreferCloud && c.Inventory.Prefer != inventory.PreferRancher {
		bad("inventory.prefer", "%q is not one of cloud, rancher", c.Inventory.Prefer)
	}
	c.validateDeparture(bad, duration)
	if len(c.Sources) == 0 {
		bad("sources", "at least one source is required")
	}
	names := map[string]int{}
	for i, s := range c.Sources {
		at := fmt.Sprintf("sources[%d]", i)
		if s.Name == "" {
			bad(at+".name", "required")
		} else if !sourceNameOK(s.Name) {
			bad(at+".name", "%q: use lower-case letters, digits and '-' (it appears in cluster names and labels)", s.Name)
		} else if j, dup := names[s.Name]; dup {
			bad(at+".name", "%q is already used by sources[%d]", s.Name, j)
		}
		names[s.Name] = i
		if duration(at+".interval", s.Interval) && s.Interval.Std() < time.Second {
			bad(at+".interval", "must be at least 1s")
		}
		if duration(at+".timeout", s.Timeout) && s.Timeout.Std() <= 0 {
			bad(at+".timeout", "must be positive")
		}
		c.validateSection(bad, at, &c.Sources[i])
	}
	prefixes := map[string]int{}
	for i, s := range c.Sources {
		if s.Provider != sources.ProviderRancher || s.Rancher == nil {
			continue
		}
		if j, dup := prefixes[s.Rancher.NamePrefix]; dup {
			bad(fmt.Sprintf("sources[%d].rancher.namePrefix", i), "%q is also the prefix of sources[%d]: Rancher display names and ids repeat across servers, give each Rancher source its own namePrefix", s.Rancher.NamePrefix, j)
		}
		prefixes[s.Rancher.NamePrefix] = i
	}
	c.validateSecrets(bad, duration, names)
	c.validateAppSetRefresh(bad, duration)
	return errors.Join(errs...)
}

func (c *Config) validateDeparture(bad func(field, format string, args ...any), duration func(string, Duration) bool) {
	d := c.Departure
	if d.AfterListings < 1 {
		bad("departure.afterListings", "%d: must be at least 1 (one listing is never enough to confirm a departure)", d.AfterListings)
	}
	if duration("departure.gracePeriod", d.GracePeriod) && d.GracePeriod.Std() < 0 {
		bad("departure.gracePeriod", "must not be negative")
	}
	if d.MaxFraction <= 0 || d.MaxFraction > 1 {
		bad("departure.maxFraction", "%v: must be above 0 and at most 1", d.MaxFraction)
	}
	if d.HeldListings < d.AfterListings {
		bad("departure.heldListings", "%d: must be at least departure.afterListings (%d)", d.HeldListings, d.AfterListings)
	}
}

func (c *Config) validateSecrets(bad func(field, format string, args ...any), duration func(string, Duration) bool, sourceNames map[string]int) {
	s := &c.Secrets
	for _, f := range []struct {
		name string
		d    Duration
	}{{"secrets.resync", s.Resync}, {"secrets.prune.gracePeriod", s.Prune.GracePeriod},
		{"secrets.leaderElection.leaseDuration", s.LeaderElection.LeaseDuration},
		{"secrets.leaderElection.renewDeadline", s.LeaderElection.RenewDeadline},
		{"secrets.leaderElection.retryPeriod", s.LeaderElection.RetryPeriod}} {
		duration(f.name, f.d)
	}
	if len(s.Select) > 0 {
		if _, err := generator.ParseParameters(s.Select); err != nil {
			msg := strings.TrimPrefix(err.Error(), "input.parameters")
			bad("secrets.select"+strings.TrimSuffix(strings.SplitN(msg, ":", 2)[0], ""), "%s", strings.TrimSpace(strings.SplitN(msg+":", ":", 2)[1]))
		}
	}
	if s.Client.QPS <= 0 || s.Client.QPS > 10000 {
		bad("secrets.client.qps", "%v: must be above 0 and at most 10000", s.Client.QPS)
	}
	if s.Client.Burst < 1 || float32(s.Client.Burst) < s.Client.QPS {
		bad("secrets.client.burst", "%d: must be at least 1 and at least qps", s.Client.Burst)
	}
	for name := range s.Credentials {
		if _, ok := sourceNames[name]; !ok {
			bad("secrets.credentials."+name, "no source of that name is configured")
		}
	}
	if !s.Enabled {
		return
	}
	rc := s.Reconciler()
	if err := rc.Validate(); err != nil {
		bad("secrets", "%v", err)
	}
	le := s.LeaderElection
	if le.Enabled && (le.LeaseName == "" || le.RenewDeadline.Std() >= le.LeaseDuration.Std() || le.RetryPeriod.Std() <= 0) {
		bad("secrets.leaderElection", "needs a leaseName and retryPeriod < renewDeadline < leaseDuration")
	}
}

func (c *Config) validateAppSetRefresh(bad func(field, format string, args ...any), duration func(string, Duration) bool) {
	r := &c.ApplicationSetRefresh
	if duration("applicationSetRefresh.debounce", r.Debounce) && (r.Debounce.Std() < 100*time.Millisecond || r.Debounce.Std() > 10*time.Minute) {
		bad("applicationSetRefresh.debounce", "must be between 100ms and 10m")
	}
	if !r.Enabled {
		return
	}
	if errs := validation.IsDNS1123Subdomain(r.PluginConfigMap); len(errs) > 0 {
		bad("applicationSetRefresh.pluginConfigMap", "%q is not a ConfigMap name", r.PluginConfigMap)
	}
	for i, ns := range r.Namespaces {
		at := fmt.Sprintf("applicationSetRefresh.namespaces[%d]", i)
		if ns == appsetrefresh.AllNamespaces {
			if len(r.Namespaces) > 1 {
				bad(at, "%q (every namespace) must be the only entry", ns)
			}
		} else if len(validation.IsDNS1123Label(ns)) > 0 {
			bad(at, "%q is not a namespace name", ns)
		}
	}
	if c.Secrets.Enabled {
		return // the settings below were checked as the reconciler's
	}
	if len(validation.IsDNS1123Label(c.Secrets.Namespace)) > 0 {
		bad("secrets.namespace", "%q is not a namespace name (applicationSetRefresh takes it as Argo CD's namespace)", c.Secrets.Namespace)
	}
	le := c.Secrets.LeaderElection
	if le.Enabled && (le.LeaseName == "" || le.RenewDeadline.Std() >= le.LeaseDuration.Std() || le.RetryPeriod.Std() <= 0) {
		bad("secrets.leaderElection", "needs a leaseName and retryPeriod < renewDeadline < leaseDuration (applicationSetRefresh uses it)")
	}
}

// validateSection checks that exactly the provider's section is set, and
// validates it (after its defaults) with errors named from the file's root.
func (c *Config) validateSection(bad func(field, format string, args ...any), at string, s *Source) {
	sections := map[sources.Provider]bool{
		sources.ProviderStatic: s.Static != nil, sources.ProviderEKS: s.EKS != nil, sources.ProviderAKS: s.AKS != nil,
		sources.ProviderRancher: s.Rancher != nil,
	}
	for p, set := range sections {
		if set && p != s.Provider {
			bad(at+"."+string(p), "only allowed with provider %s", p)
		}
	}
	var err error
	switch s.Provider {
	case sources.ProviderStatic:
		if s.Static == nil {
			bad(at+".static", "required for provider static")
		}
		return // the static source validates its clusters when it is built
	case sources.ProviderEKS:
		if s.EKS == nil {
			bad(at+".eks", "required for provider eks")
			return
		}
		s.EKS.Default()
		err = s.EKS.Validate()
	case sources.ProviderAKS:
		if s.AKS == nil {
			bad(at+".aks", "required for provider aks")
			return
		}
		s.AKS.Default()
		err = s.AKS.Validate()
	case sources.ProviderRancher:
		if s.Rancher == nil {
			bad(at+".rancher", "required for provider rancher")
			return
		}
		s.Rancher.Default()
		if s.Rancher.Token.File != "" && !filepath.IsAbs(s.Rancher.Token.File) {
			s.Rancher.Token.File = filepath.Join(c.Dir, s.Rancher.Token.File)
		}
		if s.Rancher.CAFile != "" && !filepath.IsAbs(s.Rancher.CAFile) {
			s.Rancher.CAFile = filepath.Join(c.Dir, s.Rancher.CAFile)
		}
		err = s.Rancher.Validate()
	default:
		bad(at+".provider", "%q is not one of static, rancher, eks, aks", s.Provider)
		return
	}
	if err == nil {
		return
	}
	// the section names fields relative to itself: root them here
	for _, line := range strings.Split(err.Error(), "\n") {
		field, msg, ok := strings.Cut(line, ":")
		if !ok {
			bad(at+"."+string(s.Provider), "%s", line)
			continue
		}
		bad(at+"."+string(s.Provider)+"."+field, "%s", strings.TrimSpace(msg))
	}
}

func sourceNameOK(s string) bool {
	if len(s) > 40 || strings.HasPrefix(s, "-") || strings.HasSuffix(s, "-") {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// JSON renders the effective configuration for the start-up log. The
// configuration holds references to secrets, never their values.
func (c *Config) JSON() json.RawMessage {
	b, _ := json.Marshal(c)
	return b
}
