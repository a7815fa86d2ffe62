package main

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/memrelease"
)

// applyRuntime sets the garbage collector's target from the configuration,
// unless the GOGC environment variable set it already, and hands the free
// heap back to the system at rest until ctx ends (memrelease).
func applyRuntime(ctx context.Context, rt config.Runtime, logger *slog.Logger) {
	go memrelease.Run(ctx, memrelease.Every, memrelease.Above)
	if v, ok := os.LookupEnv("GOGC"); ok {
		logger.Info("garbage collector target from the GOGC environment variable; runtime.gcPercent ignored", "GOGC", v)
		return
	}
	debug.SetGCPercent(rt.GCPercent)
}
