package rancher

import (
	"net/url"
	"strings"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// route points out at the cluster's authorized cluster endpoint (ace true,
// or auto with an endpoint enabled) or at Rancher's proxy, with the token
// each accepts: the endpoint's kube-api-auth accepts only tokens scoped to
// the cluster, which this source issues; the proxy accepts the listing
// token (clusterTokens shared) or an issued one (perCluster).
func (m *mapper) route(out *sources.Cluster, c *Cluster, ca rancherCA, notReady func(string, ...any)) {
	policy := m.cfg.ACE
	if v, ok := c.Labels[m.cfg.ACELabel]; ok {
		if p := ACEPolicy(strings.ToLower(strings.TrimSpace(v))); p.Valid() {
			policy = p
		} else {
			notReady("label %s is %q, not true, false or auto", m.cfg.ACELabel, v)
		}
	}
	// The proxy server is set even when the cluster is not ready, so the
	// listing always carries a valid server. apiEndpoint is never used: it
	// is the in-cluster address.
	out.Server = m.server + "/k8s/clusters/" + url.PathEscape(c.ID)
	if policy == ACEOn || (policy == ACEAuto && hasACE(c.LocalClusterAuthEndpoint)) {
		out.Labels[LabelEndpoint] = EndpointACE
		// the endpoint's kube-api-auth accepts only tokens scoped to the cluster
		out.Auth.TokenRef = m.issued(c.ID)
		m.aceEndpoint(out, c.LocalClusterAuthEndpoint, notReady)
	} else {
		if m.cfg.ClusterTokens == ClusterTokensPerCluster {
			out.Auth.TokenRef = m.issued(c.ID)
		}
		out.Labels[LabelEndpoint] = EndpointProxy
		switch {
		case ca.Problem != "":
			notReady("%s", ca.Problem)
		case !ca.CA.IsZero():
			out.CA = ca.CA
		}
	}

}

// issued is the reference to the token this source mints for cluster id.
func (m *mapper) issued(id string) *sources.SecretRef {
	return &sources.SecretRef{Issued: &sources.IssuedToken{Source: m.source, Cluster: id}}
}

// hasACE reports whether an authorized cluster endpoint is enabled with an
// fqdn (Rancher's kubeconfig falls back to node addresses without one).
func hasACE(e *LocalClusterAuthEndpoint) bool {
	return e != nil && e.Enabled && strings.TrimSpace(e.FQDN) != ""
}

// aceEndpoint points out at the cluster's authorized cluster endpoint, or
// makes it not ready (also under auto, which never hides a bad endpoint).
func (m *mapper) aceEndpoint(out *sources.Cluster, e *LocalClusterAuthEndpoint, notReady func(string, ...any)) {
	if !hasACE(e) {
		notReady("authorized cluster endpoint requested (%s or source ace) but not enabled with an fqdn in Rancher", m.cfg.ACELabel)
		return
	}
	srv, err := sources.NormalizeServer("https://" + strings.TrimSpace(e.FQDN))
	if err != nil {
		notReady("authorized cluster endpoint fqdn: %v", err)
		return
	}
	out.Server = srv
	if e.CACerts == "" {
		// As Rancher's own kubeconfig: the endpoint has a publicly trusted
		// certificate.
		return
	}
	ca, err := sources.ParsePEMCA([]byte(e.CACerts))
	if err != nil {
		notReady("authorized cluster endpoint caCerts: %v", err)
		return
	}
	out.CA = ca
}
