package config

//go:generate go run ../../chartgen -root ../../..

import (
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/aks"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/aro"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/eks"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// Providers returns the registry of every provider this binary knows.
// Adding a provider is its package and one line here (sources/README.md
// has the checklist); the configuration, the wiring, the dedupe ranking
// and the chart's schema follow from it.
func Providers() *sources.Registry {
	return sources.NewRegistry(
		static.Provider{},
		rancher.Provider{},
		eks.Provider{},
		aks.Provider{},
		aro.Provider{},
	)
}
