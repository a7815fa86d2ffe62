package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/appsetrefresh"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// newAppSetRefresh builds the ApplicationSet refresh trigger, reading
// ApplicationSets from a dynamic informer per namespace and our Secrets
// from the reconciler's shared cache, and the function that runs it: under
// its own leader election, or directly when secrets.leaderElection is
// disabled.
func newAppSetRefresh(cfg *config.Config, kube *kubeAPI, inv *inventory.Inventory, logger *slog.Logger, reg prometheus.Registerer) (func(context.Context), error) {
	if err := kube.init(); err != nil {
		return nil, fmt.Errorf("applicationSetRefresh: %w", err)
	}
	dyn, err := dynamic.NewForConfig(kube.rest)
	if err != nil {
		return nil, fmt.Errorf("applicationSetRefresh: dynamic client: %w", err)
	}
	rcfg := cfg.Refresh()
	caches := appsetrefresh.Caches{ApplicationSets: map[string]cache.SharedIndexInformer{}}
	for _, ns := range rcfg.InformerNamespaces() {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
		inf := f.ForResource(appsetrefresh.ApplicationSets).Informer()
		if err := inf.SetTransform(appsetrefresh.Transform(rcfg.PluginConfigMap)); err != nil {
			return nil, fmt.Errorf("applicationSetRefresh: %w", err)
		}
		caches.ApplicationSets[ns] = inf
		kube.add(f)
	}
	if rcfg.SecretsNamespace != "" {
		caches.Secrets = kube.secrets
	}
	tr, err := appsetrefresh.New(rcfg, dyn, kube.client, caches, inv, logger, reg)
	if err != nil {
		return nil, fmt.Errorf("applicationSetRefresh: %w", err)
	}
	le := cfg.Secrets.LeaderElection
	if !le.Enabled {
		return func(ctx context.Context) {
			kube.run(ctx, func(ctx context.Context) { kube.startCaches(ctx); tr.RunWithoutElection(ctx) })
		}, nil
	}
	host, _ := os.Hostname()
	election := lease.Config{
		Namespace: cfg.Secrets.Namespace, Name: le.LeaseName + "-appset-refresh", Identity: host + "_" + uuid.NewString(),
		LeaseDuration: le.LeaseDuration.Std(), RenewDeadline: le.RenewDeadline.Std(), RetryPeriod: le.RetryPeriod.Std(),
	}
	return func(ctx context.Context) {
		kube.run(ctx, func(ctx context.Context) {
			if err := tr.RunLeading(ctx, election, kube.startCaches); err != nil {
				logger.Error("applicationSetRefresh: leader election stopped", "error", err.Error())
			}
		})
	}, nil
}
