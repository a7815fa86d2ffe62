package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/google/uuid"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/clusterprofile"
)

// attachLedger gives the leader's inventory its ledger and returns the
// feed the view follows: the process's memory, or ClusterProfiles in the
// Kubernetes API.
func attachLedger(cfg *config.Config, kube *kubeAPI, p *parts, logger *slog.Logger) (inventory.Feed, error) {
	if cfg.Secrets.Enabled {
		// until the ledger holds a source's first listing (in memory: at
		// each start), a listing that lacks a mass of the clusters the
		// Secrets we own name is refused
		if err := kube.init(); err != nil {
			return nil, err
		}
		p.inv.UseSeed(clustersecret.ServedBefore(kube.client, cfg.Secrets.Namespace, cfg.Secrets.OwnerID))
	}
	if cfg.Ledger.Kind != config.LedgerKubernetes {
		mem := inventory.NewMemory()
		p.inv.UseLedger(mem)
		return mem, nil
	}
	if err := kube.init(); err != nil {
		return nil, err
	}
	ledgerLogger := logger.With("component", "ledger")
	l, err := clusterprofile.New(ledgerConfig(kube.rest), clusterprofile.Options{Namespace: cfg.EffectiveLedgerNamespace(),
		OwnerID: cfg.Secrets.OwnerID, ConfigMap: cfg.Ledger.ConfigMap, Logger: ledgerLogger})
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	p.inv.UseLedger(l)
	p.current = l // a replica whose watch on the ledger stops answers 503
	return feedWithLogger{l, ledgerLogger}, nil
}

// ledgerConfig is the ledger's client configuration: the Kubernetes
// client's (secrets.client), with twice its rate limit. A cold start
// writes two requests to the ledger for each cluster (its ClusterProfile,
// then its status) where the cluster Secrets take one: at the same rate
// the ledger's writes alone would take twice as long as the Secrets' (at
// the defaults, 10,000 clusters could not be in the ledger in less than
// 100 s however fast the API server).
func ledgerConfig(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.QPS, c.Burst = 2*c.QPS, 2*c.Burst
	return c
}

// feedWithLogger is the ClusterProfile feed, logging what it cannot read.
type feedWithLogger struct {
	l      *clusterprofile.Ledger
	logger *slog.Logger
}

func (f feedWithLogger) Watch(ctx context.Context, fn func(inventory.Book)) {
	f.l.WatchWithLogger(ctx, f.logger, fn)
}

// leaderOnly reports whether only the leader lists the sources and writes
// the ledger: with a Kubernetes ledger under leader election. Otherwise
// every process lists for itself (a memory ledger, or one replica).
func leaderOnly(cfg *config.Config) bool {
	return cfg.Ledger.Kind == config.LedgerKubernetes && cfg.Secrets.LeaderElection.Enabled
}

// inventoryRunner returns what runs the leader's inventory: itself in
// every process when leads is false; nothing when the Secret reconciler's
// lease runs it (secrets enabled); else a lease of its own, the one the
// reconciler would use.
func inventoryRunner(cfg *config.Config, kube *kubeAPI, p *parts, logger *slog.Logger, leads bool) (func(context.Context), error) {
	switch {
	case !leads:
		return p.inv.Run, nil
	case cfg.Secrets.Enabled:
		return nil, nil
	}
	if err := kube.init(); err != nil {
		return nil, err
	}
	le := cfg.Secrets.LeaderElection
	host, _ := os.Hostname()
	lc := lease.Config{Namespace: cfg.EffectiveLedgerNamespace(), Name: le.LeaseName, Identity: host + "_" + uuid.NewString(),
		LeaseDuration: le.LeaseDuration.Std(), RenewDeadline: le.RenewDeadline.Std(), RetryPeriod: le.RetryPeriod.Std()}
	return func(ctx context.Context) {
		err := lease.RunLeading(ctx, kube.client.CoordinationV1(), lc, func(leading bool) {
			logger.Info("inventory leadership changed; only the leader lists the sources and writes the ledger", "leading", leading)
		}, p.inv.Run)
		if err != nil {
			logger.Error("leader election stopped", "error", err.Error())
		}
	}, nil
}

// ready is /readyz: this replica can answer once its view has read the
// ledger. A source that has not listed yet then gets a 503 with our
// message from the plugin API, which Argo CD shows, rather than a refused
// connection from a replica taken out of the Service.
func (p *parts) ready() error {
	if p.draining.Load() {
		return errors.New("shutting down")
	}
	if !p.view.Followed() {
		return errors.New("the ledger has not been read yet")
	}
	return nil
}

// answering is what the plugin API reads: the view's snapshot (the
// ledger's, the same on every replica) and its status, with what only the
// leader's inventory knows added while this process leads, its term's
// ledger loaded: each source's latest attempt and listing, and the
// departures it confirmed. A replica that led before adds nothing of its
// last term.
type answering struct {
	view, leader *inventory.Inventory
	current      currentLedger
}

// currentLedger says whether the book a replica answers from is the
// ledger's current one, and if not, why (clusterprofile.Ledger).
type currentLedger interface {
	Current(context.Context) error
	Behind() string
}

// currentFunc is what the plugin API asks before each answer (see
// generator.Options.Current): whether the view's book is the ledger's
// current one. Nil with the ledger in memory, whose book always is.
func (p *parts) currentFunc() func(context.Context) error {
	if p.current == nil {
		return nil
	}
	return p.current.Current
}

func (a answering) Snapshot() *inventory.Snapshot { return a.view.Snapshot() }

func (a answering) Status() inventory.Status {
	st := a.view.Status()
	if a.current != nil && st.NoAnswer == "" {
		st.NoAnswer = a.current.Behind()
	}
	if !a.leader.Loaded() {
		return st // not leading (any more), or the term's ledger not loaded yet
	}
	lst := a.leader.Status()
	for i := range st.Sources {
		s := &st.Sources[i]
		j := slices.IndexFunc(lst.Sources, func(l inventory.SourceStatus) bool { return l.Name == s.Name })
		if j < 0 || lst.Sources[j].LastAttempt.IsZero() {
			continue // this process has not listed the source: it does not lead
		}
		l := lst.Sources[j]
		s.LastAttempt, s.LastSuccess, s.LastDuration = l.LastAttempt, l.LastSuccess, l.LastDuration
		s.Clusters, s.NotReady = l.Clusters, l.NotReady
	}
	if len(lst.Departed) > 0 {
		st.Departed = lst.Departed
	}
	return st
}
