// Command argocd-cluster-discovery discovers Kubernetes clusters and serves
// them to Argo CD through the ApplicationSet plugin generator API.
//
//	argocd-cluster-discovery serve --config FILE [--listen ADDR]
//	argocd-cluster-discovery discover --config FILE [--input JSON]
//	argocd-cluster-discovery validate --config FILE
//	argocd-cluster-discovery revoke-tokens --config FILE [--ignore-errors]
//	argocd-cluster-discovery version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/klog/v2"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/memrelease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := usageText()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stderr, nil)
	case "discover":
		return cmdDiscover(ctx, args[1:], stdout, stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "revoke-tokens":
		return cmdRevokeTokens(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "argocd-cluster-discovery %s (%s)\n", version, runtime.Version())
		return 0
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
	return 2
}

// loading is how a command loads its configuration.
type loading struct {
	// offline, when set and true once the flags are parsed, loads the
	// file for a command that serves nothing (config.Offline).
	offline func() bool
	// logs are the command's --log-level and --log-format, applied over
	// the file's log section.
	logs *logFlags
}

// loadConfig declares --config on fs, parses args and loads the
// configuration. done says the command ends here with code: 0 after -h
// (the command's usage on stdout), 2 for bad usage or configuration.
func loadConfig(fs *flag.FlagSet, args []string, stderr io.Writer, how loading) (cfg *config.Config, code int, done bool) {
	path := configFlag(fs)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // -h is answered below, bad flags by their error line
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(os.Stdout, commandUsage(fs))
		return nil, 0, true
	} else if err != nil {
		fmt.Fprintf(stderr, "%s", commandUsage(fs))
		return nil, 2, true
	}
	if *path == "" {
		fmt.Fprintf(stderr, "--config is required\n%s", commandUsage(fs))
		return nil, 2, true
	}
	purpose := config.Serve
	if how.offline != nil && how.offline() {
		purpose = config.Offline
	}
	cfg, err := config.LoadFor(*path, purpose)
	if err != nil {
		fmt.Fprintf(stderr, "invalid configuration:\n%v\n", err)
		return nil, 2, true
	}
	how.logs.apply(&cfg.Log)
	for _, w := range cfg.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	return cfg, 0, false
}

func newLogger(cfg config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// routeKlog makes client-go, which logs through klog, log through logger:
// in the configured format and level instead of klog's own lines on
// stderr. klog is process-wide; serve calls this once.
func routeKlog(logger *slog.Logger) {
	klog.SetSlogLogger(logger.With("component", "client-go"))
}

// buildInventory builds every configured source and the inventory over
// them. Building reads what a source needs at start (a static file, a CA
// file), so an error here is a configuration error.
func buildInventory(cfg *config.Config, logger *slog.Logger, reg prometheus.Registerer, issuers map[string]sources.TokenIssuer) (*inventory.Inventory, error) {
	specs, err := buildSpecs(cfg, logger, reg, issuers)
	if err != nil {
		return nil, err
	}
	return inventory.New(specs, inventoryOptions(cfg, logger, reg))
}

// buildSpecs builds every configured source; the error names every
// source that failed.
func buildSpecs(cfg *config.Config, logger *slog.Logger, reg prometheus.Registerer, issuers map[string]sources.TokenIssuer) ([]inventory.SourceSpec, error) {
	specs := make([]inventory.SourceSpec, 0, len(cfg.Sources))
	var errs []error
	for i := range cfg.Sources {
		sc := &cfg.Sources[i]
		r, ok := cfg.Registry().Lookup(sc.Provider)
		if !ok || sc.Section == nil {
			errs = append(errs, fmt.Errorf("sources[%d] (%s): provider %q is not available", i, sc.Name, sc.Provider))
			continue
		}
		// each instance registers the same metric names under its own
		// constant source label
		var sreg prometheus.Registerer
		if reg != nil {
			sreg = prometheus.WrapRegistererWith(prometheus.Labels{"source": sc.Name}, reg)
		}
		src, err := sc.Section.NewSource(sources.SourceOptions{Name: sc.Name, Logger: logger.With("source", sc.Name), Registerer: sreg,
			OwnerID: cfg.Secrets.OwnerID, TokenBindings: tokenBindings(cfg), Agents: agentSecrets(cfg)})
		if err != nil {
			errs = append(errs, fmt.Errorf("sources[%d] (%s): %w", i, sc.Name, err))
			continue
		}
		if iss, ok := src.(sources.TokenIssuer); ok && issuers != nil {
			issuers[sc.Name] = iss
		}
		trust := sc.Trust == config.TrustClusterLabels
		if trust {
			logger.Warn("source trusts its clusters' owners: a tenant or project in a cluster's labels or tags is taken as written, so whoever may label a cluster chooses its tenant and AppProject",
				"source", sc.Name)
		}
		specs = append(specs, inventory.SourceSpec{Name: sc.Name, Provider: sc.Provider, Kind: r.Kind(), Source: src,
			Interval: cfg.EffectiveInterval(sc), Timeout: cfg.EffectiveTimeout(sc), TrustClusterLabels: trust})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return specs, nil
}

// joinDelay is how long after the leader established a cluster every
// replica's answer gives it (inventory.Options.JoinDelay): far above the
// ledger's watch latency, so that replicas start serving a newcomer
// together, and small against the time Argo CD takes to act on it.
const joinDelay = time.Second

func inventoryOptions(cfg *config.Config, logger *slog.Logger, reg prometheus.Registerer) inventory.Options {
	jitter := cfg.Inventory.Jitter
	if jitter == 0 {
		jitter = -1 // written as 0: none, not the inventory's default
	}
	return inventory.Options{Logger: logger, Registerer: reg, Jitter: jitter, Prefer: cfg.Inventory.Prefer,
		Departure: cfg.Departure.Inventory(), Tenants: cfg.Secrets.Tenants, DryRun: cfg.Secrets.DryRun}
}

// serveHooks let tests learn the bound addresses.
type serveHooks struct {
	listening func(api, ops string)
}

// serveFlags declares serve's flags on fs.
func serveFlags(fs *flag.FlagSet) (listen *string, dryRun *bool, logs *logFlags) {
	return fs.String("listen", "", "override server.listen with this `ADDR` (host:port)"),
		fs.Bool("dry-run", false, "compute and log cluster Secret plans, write no Secret, token or ApplicationSet refresh, confirm no departure (sets secrets.dryRun; the ledger is still written)"),
		declareLogFlags(fs)
}

func cmdServe(ctx context.Context, args []string, stderr io.Writer, hooks *serveHooks) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen, dryRun, logs := serveFlags(fs)
	cfg, code, done := loadConfig(fs, args, stderr, loading{logs: logs})
	if done {
		return code
	}
	if *listen != "" {
		cfg.Server.Listen = *listen
	}
	if *dryRun {
		cfg.Secrets.DryRun = true
	}
	logger := newLogger(cfg.Log, stderr)
	routeKlog(logger)
	reg := prometheus.NewRegistry()
	built, err := build(cfg, logger, reg)
	if err != nil {
		fmt.Fprintf(stderr, "invalid configuration:\n%v\n", err)
		return 2
	}
	if err := serve(ctx, cfg, built, logger, reg, hooks); err != nil {
		logger.Error("stopped", "error", err.Error())
		return 1
	}
	return 0
}

// parts are what serve runs, built from the configuration before anything
// starts: a problem here is the configuration's (exit 2).
type parts struct {
	// inv lists the sources and writes the ledger (the leader's); view
	// follows the ledger and is what every replica answers from.
	inv     *inventory.Inventory
	view    *inventory.Inventory
	current currentLedger // nil: the ledger is in memory (see attachLedger)
	tokens  *generator.TokenSet
	// issuers are the sources that mint a token per cluster, by name.
	issuers map[string]sources.TokenIssuer
	// draining is set on SIGTERM: /readyz answers 503 while the process
	// still answers (server.drainDelay).
	draining atomic.Bool
}

// build builds the sources (reading what they need at start, such as a
// static file) and reads the tokens.
func build(cfg *config.Config, logger *slog.Logger, reg prometheus.Registerer) (*parts, error) {
	issuers := map[string]sources.TokenIssuer{}
	specs, err := buildSpecs(cfg, logger, reg, issuers)
	if err != nil {
		return nil, err
	}
	// the view lists nothing and registers no metrics: the leader's
	// inventory does both
	viewOpts := inventoryOptions(cfg, logger.With("component", "ledger-view"), nil)
	viewOpts.JoinDelay = joinDelay
	view, err := inventory.New(specs, viewOpts)
	if err != nil {
		return nil, err
	}
	opts := inventoryOptions(cfg, logger, reg)
	if cfg.Ledger.Kind == config.LedgerKubernetes {
		// operators acknowledge held departures, and pin clusters, on the
		// ClusterProfiles; the view reads them, a held drop waits for
		// them, a pinned cluster stays
		opts.Acknowledged, opts.Pinned = view.Acknowledged, view.Pinned
	}
	inv, err := inventory.New(specs, opts)
	if err != nil {
		return nil, err
	}
	tokens, err := generator.NewTokenSet(cfg.Server.Tokens, logger)
	if err != nil {
		return nil, fmt.Errorf("server.tokens: %w", err)
	}
	return &parts{inv: inv, view: view, tokens: tokens, issuers: issuers}, nil
}

func serve(ctx context.Context, cfg *config.Config, p *parts, logger *slog.Logger, reg *prometheus.Registry, hooks *serveHooks) error {
	logger.Info("starting", "version", version, "config", cfg.JSON())
	for _, w := range cfg.Warnings {
		logger.Warn("deprecated configuration key", "warning", w)
	}
	applyRuntime(cfg.Runtime, logger)
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "argocd_cluster_discovery_build_info",
		Help: "Always 1: the version of the running binary and the Go release it was built with."}, []string{"version", "goversion"})
	buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo)
	srv, runners, err := newComponents(cfg, p, logger, reg)
	if err != nil {
		return err
	}
	tokens := p.tokens
	servers, listeners, err := listen(cfg, srv)
	if err != nil {
		return err
	}
	apiLn, opsAddr := listeners[0], listeners[len(listeners)-1].Addr().String()
	logger.Info("listening", "api", apiLn.Addr().String(), "ops", opsAddr,
		"getparams", "POST "+cfg.Server.PathPrefix+generator.GetParamsPath)
	if hooks != nil && hooks.listening != nil {
		hooks.listening(apiLn.Addr().String(), opsAddr)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); tokens.Run(runCtx, cfg.Server.TokenReloadInterval.Std()) }()
	wg.Add(1) // the free heap back to the system once at rest
	go func() { defer wg.Done(); memrelease.Run(runCtx, memrelease.Every, memrelease.Above, memrelease.Quiet) }()
	for _, r := range runners {
		wg.Add(1)
		go func() { defer wg.Done(); r(runCtx) }()
	}

	errc := make(chan error, len(servers))
	for i, hs := range servers {
		go func() {
			if err := hs.Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}

	var serveErr error
	select {
	case <-ctx.Done():
		if d := cfg.Server.DrainDelay.Std(); d > 0 {
			p.draining.Store(true)
			logger.Info("shutting down: still answering while the Service stops sending requests here", "drainDelay", d.String())
			time.Sleep(d)
		}
		logger.Info("shutting down: finishing in-flight requests", "timeout", cfg.Server.ShutdownTimeout.Std().String())
	case serveErr = <-errc:
		logger.Error("server failed; shutting down", "error", serveErr.Error())
	}
	shutCtx, shutCancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout.Std())
	defer shutCancel()
	for _, hs := range servers {
		if err := hs.Shutdown(shutCtx); err != nil {
			serveErr = errors.Join(serveErr, fmt.Errorf("shutdown: %w", err))
		}
	}
	cancel()
	wg.Wait()
	logger.Info("stopped")
	return serveErr
}

// newComponents builds the plugin API server and, when enabled, the
// cluster Secret reconciler and the ApplicationSet refresh trigger, which
// share one Kubernetes client and one cache of cluster Secrets. It returns
// the server and the loops to run beside it.
func newComponents(cfg *config.Config, p *parts, logger *slog.Logger, reg *prometheus.Registry) (*generator.Server, []func(context.Context), error) {
	tokens := p.tokens
	kube := newKubeAPI(cfg)
	feed, err := attachLedger(cfg, kube, p, logger)
	if err != nil {
		return nil, nil, err
	}
	runners := []func(context.Context){func(ctx context.Context) { p.view.Follow(ctx, feed) }}
	opts := generator.Options{
		Inventory: answering{view: p.view, leader: p.inv, current: p.current}, Tokens: tokens, Ready: p.ready, PathPrefix: cfg.Server.PathPrefix, Logger: logger,
		Registerer: reg, Gatherer: reg, Version: version, Providers: cfg.Registry().Names(), Current: p.currentFunc(),
	}
	leads := leaderOnly(cfg)
	if cfg.Secrets.Enabled {
		rec, run, err := newReconciler(cfg, kube, p, logger, reg, leads)
		if err != nil {
			return nil, nil, err
		}
		opts.SecretsStatus = func() any { return rec.Status() }
		runners = append(runners, run)
	}
	if run, err := inventoryRunner(cfg, kube, p, logger, leads); err != nil {
		return nil, nil, err
	} else if run != nil {
		runners = append(runners, run)
	}
	if cfg.ApplicationSetRefresh.Enabled {
		run, err := newAppSetRefresh(cfg, kube, p.view, logger, reg)
		if err != nil {
			return nil, nil, err
		}
		runners = append(runners, run)
	}
	srv, err := generator.New(opts)
	if err != nil {
		return nil, nil, err
	}
	return srv, runners, nil
}

// listen opens the API's listener and, when server.opsListen is set, the
// operations endpoints' own: the servers and their listeners, API first.
func listen(cfg *config.Config, srv *generator.Server) ([]*http.Server, []net.Listener, error) {
	apiLn, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", cfg.Server.Listen, err)
	}
	servers := []*http.Server{newHTTPServer(srv.Handler())}
	listeners := []net.Listener{apiLn}
	if cfg.Server.OpsListen != "" {
		opsLn, err := net.Listen("tcp", cfg.Server.OpsListen)
		if err != nil {
			apiLn.Close()
			return nil, nil, fmt.Errorf("listen on %s: %w", cfg.Server.OpsListen, err)
		}
		servers[0].Handler = srv.APIHandler()
		servers = append(servers, newHTTPServer(srv.OpsHandler()))
		listeners = append(listeners, opsLn)
	}
	return servers, listeners, nil
}

func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
