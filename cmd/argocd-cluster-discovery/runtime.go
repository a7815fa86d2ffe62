package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
)

// applyRuntime sets the garbage collector's target from the configuration,
// unless the GOGC environment variable set it already.
func applyRuntime(rt config.Runtime, logger *slog.Logger) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		logger.Info("garbage collector target from the GOGC environment variable; runtime.gcPercent ignored", "GOGC", v)
		return
	}
	debug.SetGCPercent(rt.GCPercent)
}
