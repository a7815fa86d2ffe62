// Package config loads, defaults and validates the service's one YAML
// configuration file. Secrets are never written in it, only referenced by
// file or environment variable, so the effective configuration can be
// logged as it is.
package config

import (
	"encoding/json"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/appsetrefresh"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Config is the whole configuration file.
type Config struct {
	Log       Log       `json:"log"`
	Server    Server    `json:"server"`
	Inventory Inventory `json:"inventory"`
	// Departure decides when a served cluster has left (the answer and the
	// Secrets follow the same decision).
	Departure Departure `json:"departure"`
	// Ledger is where the inventory keeps its records.
	Ledger  Ledger   `json:"ledger"`
	Sources []Source `json:"sources"`
	Secrets Secrets  `json:"secrets"`
	// ApplicationSetRefresh wakes the ApplicationSets using our plugin.
	ApplicationSetRefresh ApplicationSetRefresh `json:"applicationSetRefresh"`
	Runtime               Runtime               `json:"runtime"`

	// Dir is the directory of the file; relative paths are taken from it.
	Dir string `json:"-"`
	// Warnings are the deprecated keys the file used, and what the
	// configuration cannot check (hybridWarnings), one line each.
	Warnings []string `json:"-"`

	registry *sources.Registry
	// offline: the file is loaded for a command that serves nothing (see
	// Offline); the server section may be left out.
	offline bool
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
	TokenReloadInterval sources.Duration `json:"tokenReloadInterval"`
	// DrainDelay is how long the process goes on answering after SIGTERM,
	// with /readyz 503, before it stops accepting connections: the time
	// the Service takes to stop sending requests to a pod being deleted
	// (0: none, the default outside the chart).
	DrainDelay sources.Duration `json:"drainDelay,omitzero"`
	// ShutdownTimeout bounds the wait for in-flight requests on SIGTERM,
	// after DrainDelay.
	ShutdownTimeout sources.Duration `json:"shutdownTimeout"`
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
	Interval sources.Duration `json:"interval"`
	Timeout  sources.Duration `json:"timeout"`
	// Jitter spreads refreshes by ± this fraction of the interval.
	Jitter float64 `json:"jitter"`
	// Prefer says which listing is served when a cluster is found twice
	// (through Rancher and through EKS/AKS): cloud or rancher.
	Prefer inventory.Preference `json:"prefer"`
}

// The kinds of ledger.
const (
	LedgerMemory     = "memory"
	LedgerKubernetes = "kubernetes"
)

// Ledger is where the inventory keeps what decides an answer: which
// clusters are served, departing, held or established.
type Ledger struct {
	// Kind is memory (this process only: what make run and a single
	// replica without a Kubernetes API use) or kubernetes (one
	// ClusterProfile per cluster in Namespace, written by the leader: every
	// replica answers the same, and a restart resumes where it was).
	Kind string `json:"kind"`
	// Namespace of the ClusterProfiles; empty means secrets.namespace.
	Namespace string `json:"namespace,omitempty"`
	// ConfigMap holds the per-source records; empty means
	// argocd-cluster-discovery-ledger-<secrets.ownerID> and a short hash.
	ConfigMap string `json:"configMap,omitempty"`
}

// EffectiveLedgerNamespace is the namespace of the ledger's objects.
func (c *Config) EffectiveLedgerNamespace() string {
	if c.Ledger.Namespace != "" {
		return c.Ledger.Namespace
	}
	return c.Secrets.Namespace
}

// Departure is the rule that confirms a cluster's departure: absent from
// (or leaving in) AfterListings consecutive complete listings of its source
// and GracePeriod passed. A listing that makes more than MaxFraction of a
// source's served clusters missing at once (a mass drop: a lost role or
// subscription, more often than a mass deletion) is held: each of those
// needs HeldListings listings.
type Departure struct {
	AfterListings int              `json:"afterListings"`
	GracePeriod   sources.Duration `json:"gracePeriod"`
	MaxFraction   float64          `json:"maxFraction"`
	HeldListings  int              `json:"heldListings"`
	// MaxDeletions and MaxDeletionsPercent are the answer's breaker: one
	// listing confirms at most max(MaxDeletions, MaxDeletionsPercent % of a
	// source's served clusters) departures; more are held.
	MaxDeletions        int     `json:"maxDeletions"`
	MaxDeletionsPercent float64 `json:"maxDeletionsPercent"`
}

// Inventory returns the inventory's departure rule.
func (d Departure) Inventory() inventory.Departure {
	g, pct := d.GracePeriod.Std(), d.MaxDeletionsPercent
	if g == 0 {
		g = -1 // written as 0: none, not the inventory's default
	}
	if pct == 0 {
		pct = -1
	}
	return inventory.Departure{AfterListings: d.AfterListings, GracePeriod: g, MaxFraction: d.MaxFraction, HeldListings: d.HeldListings,
		MaxDeletions: d.MaxDeletions, MaxDeletionsPercent: pct}
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
	Resync      sources.Duration `json:"resync"`
	Concurrency int              `json:"concurrency"`
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
	// ArgoCDVersion is the version of the Argo CD these Secrets are for
	// (e.g. 3.4.2), when the operator states it: a hub with both agent
	// clusters and the Secrets we write needs 3.4.0 or later.
	ArgoCDVersion string `json:"argocdVersion,omitempty"`

	// match is Select parsed (nil: every cluster), set by Parse.
	match func(*sources.Cluster) bool
}

// Client is the Kubernetes client's own rate limit (client-go's QPS and
// Burst). Requests beyond it wait in the client; the API server's Priority
// and Fairness still orders them among other clients' by the service
// account's priority level, so a cold sync queues there rather than
// starving other controllers. The defaults write 10,000 Secrets in about a
// minute; client-go's own (5/s, burst 10) would take over half an hour.
// The ledger's client (ledger.kind kubernetes) has twice this rate: a cold
// start writes two requests per cluster to it.
type Client struct {
	QPS   float32 `json:"qps"`
	Burst int     `json:"burst"`
}

// Prune bounds deletions.
type Prune struct {
	AfterListings       int              `json:"afterListings"`
	GracePeriod         sources.Duration `json:"gracePeriod"`
	MaxDeletions        int              `json:"maxDeletions"`
	MaxDeletionsPercent float64          `json:"maxDeletionsPercent"`
}

// LeaderElection lets several replicas serve the API while one writes.
type LeaderElection struct {
	Enabled   bool   `json:"enabled"`
	LeaseName string `json:"leaseName"`
	// LeaseDuration is a whole number of seconds: the Lease records whole
	// seconds, and another replica takes it after those.
	LeaseDuration sources.Duration `json:"leaseDuration"`
	RenewDeadline sources.Duration `json:"renewDeadline"`
	RetryPeriod   sources.Duration `json:"retryPeriod"`
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
	Debounce sources.Duration `json:"debounce"`
}

// Refresh turns the applicationSetRefresh section into the trigger's
// configuration: no namespace means Argo CD's (secrets.namespace), and
// with the Secret reconciler on, our Secrets wake the trigger too.
func (c *Config) Refresh() appsetrefresh.Config {
	r := c.ApplicationSetRefresh
	out := appsetrefresh.Config{
		PluginConfigMap: r.PluginConfigMap, Namespaces: r.Namespaces, Debounce: r.Debounce.Std(),
		DryRun: c.Secrets.DryRun, // --dry-run writes nothing Argo CD reads
	}
	if len(out.Namespaces) == 0 {
		out.Namespaces = []string{c.Secrets.Namespace}
	}
	if c.Secrets.Enabled {
		out.SecretsNamespace = c.Secrets.Namespace
		out.SecretsSelector = clustersecret.OwnedSelector(c.Secrets.OwnerID)
	}
	return out
}

// Reconciler returns the reconciler's configuration.
func (s *Secrets) Reconciler() clustersecret.Config {
	return clustersecret.Config{
		Options: clustersecret.Options{Namespace: s.Namespace, OwnerID: s.OwnerID, Prefix: s.Prefix,
			Credentials: s.Credentials},
		Select: s.match,
		Policy: clustersecret.Policy(s.Policy), DryRun: s.DryRun, Resync: s.Resync.Std(), Concurrency: s.Concurrency,
		Debounce: clustersecret.DefaultDebounce,
		Prune: clustersecret.PruneOptions{AfterListings: s.Prune.AfterListings, GracePeriod: s.Prune.GracePeriod.Std(),
			MaxDeletions: s.Prune.MaxDeletions, MaxDeletionsPercent: s.Prune.MaxDeletionsPercent},
	}
}

// Default returns the configuration with every default set and no source.
// The defaults of the reconciler and of the departure rule are theirs,
// read here rather than written twice.
func Default() Config {
	rc := clustersecret.Config{}
	rc.Defaults()
	dep := inventory.DefaultDeparture()
	return Config{
		Log: Log{Level: "info", Format: "json"},
		Server: Server{
			Listen:              ":8080",
			TokenReloadInterval: sources.D(10 * time.Second),
			ShutdownTimeout:     sources.D(25 * time.Second),
		},
		Inventory: Inventory{Interval: sources.D(time.Minute), Timeout: sources.D(30 * time.Second), Jitter: inventory.DefaultJitter, Prefer: inventory.PreferCloud},
		Departure: Departure{AfterListings: dep.AfterListings, GracePeriod: sources.D(dep.GracePeriod),
			MaxFraction: dep.MaxFraction, HeldListings: dep.HeldListings, MaxDeletions: dep.MaxDeletions, MaxDeletionsPercent: dep.MaxDeletionsPercent},
		Secrets: Secrets{
			Namespace: "argocd", Prefix: clustersecret.DefaultPrefix, Policy: string(rc.Policy), Resync: sources.D(rc.Resync),
			Concurrency: rc.Concurrency, Client: Client{QPS: 200, Burst: 400},
			Prune: Prune{AfterListings: rc.Prune.AfterListings, GracePeriod: sources.D(rc.Prune.GracePeriod),
				MaxDeletions: rc.Prune.MaxDeletions, MaxDeletionsPercent: rc.Prune.MaxDeletionsPercent},
			LeaderElection: LeaderElection{Enabled: true, LeaseName: "argocd-cluster-discovery",
				LeaseDuration: sources.D(15 * time.Second), RenewDeadline: sources.D(10 * time.Second), RetryPeriod: sources.D(2 * time.Second)},
		},
		ApplicationSetRefresh: ApplicationSetRefresh{PluginConfigMap: "argocd-cluster-discovery", Debounce: sources.D(2 * time.Second)},
		Ledger:                Ledger{Kind: LedgerMemory},
		Runtime:               Runtime{GCPercent: 25},
	}
}

// JSON renders the effective configuration for the start-up log. The
// configuration holds references to secrets, never their values.
func (c *Config) JSON() json.RawMessage {
	b, _ := json.Marshal(c)
	return b
}

// Registry returns the providers the configuration was parsed with.
func (c *Config) Registry() *sources.Registry {
	if c.registry == nil {
		return Providers()
	}
	return c.registry
}
