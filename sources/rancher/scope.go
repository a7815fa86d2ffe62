package rancher

import (
	"slices"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// narrowNamespaces is the source's namespaces narrowed by the cluster
// owner's annotation v: the annotation may only narrow them, never widen
// (an empty list means every namespace). A bad or widening annotation makes
// the cluster not ready.
func (m *mapper) narrowNamespaces(v string, notReady func(string, ...any)) []string {
	ns, err := sources.ParseNamespaces(v)
	if err != nil {
		notReady("annotation %s: %v", m.cfg.NamespacesAnnotation, err)
		return ns
	}
	if len(m.cfg.Namespaces) == 0 {
		return ns
	}
	var kept []string
	for _, n := range ns {
		if slices.Contains(m.cfg.Namespaces, n) {
			kept = append(kept, n)
		}
	}
	if len(kept) == 0 {
		notReady("annotation %s: none of its namespaces is among the source's namespaces %v (it may only narrow them)",
			m.cfg.NamespacesAnnotation, m.cfg.Namespaces)
	}
	return kept
}
