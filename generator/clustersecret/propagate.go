package clustersecret

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// What of a cluster's labels and annotations reaches its Secret.

// reservedLabel reports label keys that only this package or Argo CD set.
func reservedLabel(k string) bool {
	return k == LabelSecretType || k == LabelManagedBy || strings.HasPrefix(k, "argocd-cluster-discovery.io/") ||
		strings.HasPrefix(k, "argocd.argoproj.io/") || strings.HasPrefix(k, sources.AgentLabelPrefix)
}

// reservedAnnotation reports annotation keys a cluster's own never
// reach its Secret under: ours, kubectl's, argocd-agent's, and Argo CD's
// (argocd.argoproj.io/refresh and the like are Argo CD's state of the
// Secret: upstream, they would make Argo CD refresh its cache of the
// cluster, and from 3.6 its cluster generator leaves them out of
// metadata.annotations while 2.14 and 3.2 give them, so they are never
// ours to write).
func reservedAnnotation(k string) bool {
	return strings.HasPrefix(k, "argocd-cluster-discovery.io/") || strings.HasPrefix(k, "kubectl.kubernetes.io/") ||
		strings.HasPrefix(k, "argocd.argoproj.io/") || strings.HasPrefix(k, sources.AgentLabelPrefix) ||
		k == sources.AnnotationAgentManagedBy
}

// propagatedLabels are the cluster's labels plus tenant, provider and
// region, so that Argo CD's cluster generator can select on them. Keys or
// values Kubernetes would reject are left out.
func propagatedLabels(c *sources.Cluster) map[string]string {
	out := map[string]string{}
	for k, v := range c.Labels {
		out[k] = v
	}
	for k, v := range map[string]string{sources.LabelTenant: c.Tenant, "provider": string(c.Provider), "region": c.Region} {
		if v != "" {
			out[k] = v
		}
	}
	for k, v := range out {
		if reservedLabel(k) || len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			delete(out, k)
		}
	}
	return out
}
