package rancher

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
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
		// the cluster owner's label narrows: off always, on only where the
		// operator allows ACE
		switch p := ACEPolicy(strings.ToLower(strings.TrimSpace(v))); {
		case !p.Valid():
			notReady("label %s is %q, not true, false or auto", m.cfg.ACELabel, v)
		case p == ACEOff || m.cfg.ACE != ACEOff:
			policy = p
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
	srv, err := m.aceServer(e.FQDN)
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

// aceServer is the server of an authorized cluster endpoint whose fqdn the
// cluster's owner set: https://<host[:port]>, only where the source's
// aceAllowedHosts allow the host, and never an in-cluster name, a
// loopback, link-local or unspecified address, or Rancher itself, since
// Argo CD sends the cluster's token there.
func (m *mapper) aceServer(fqdn string) (string, error) {
	fqdn = strings.TrimSpace(fqdn)
	u, err := url.Parse("https://" + fqdn)
	switch {
	case err != nil || strings.ContainsAny(fqdn, "/?#@\\ \t"):
		return "", errors.New("not a host[:port]")
	case u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Hostname() == "":
		return "", errors.New("not a host[:port]")
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	allowed, exact := hostAllowed(host, m.cfg.ACEAllowedHosts)
	if why := internalHost(host); why != "" && !exact {
		return "", fmt.Errorf("%s is %s (list it in aceAllowedHosts itself, not by a wildcard, to allow it)", host, why)
	}
	port := "443"
	if p := u.Port(); p != "" {
		// one spelling of each port: Go dials "0443" as 443, so a
		// zero-padded Rancher port must compare equal to Rancher's
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", errors.New("not a host[:port]")
		}
		port = strconv.Itoa(n)
	}
	if addr := net.JoinHostPort(host, port); slices.Contains(m.rancherHosts, addr) {
		return "", fmt.Errorf("%s is Rancher's own address", addr)
	}
	if !allowed {
		return "", fmt.Errorf("%s is not in aceAllowedHosts", host)
	}
	// one spelling per endpoint (lower case, no trailing dot, no :443), so
	// that a copy in another spelling is the same server
	if port != "443" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return sources.NormalizeServer("https://" + host)
}

// internalHost says why host must never receive a token: a name that
// resolves inside a cluster or the host (single-label names resolve
// through the pod's search domains), or a loopback, link-local (the cloud
// metadata services) or unspecified address. Empty when none.
func internalHost(host string) string {
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() {
			return "a loopback, link-local or unspecified address"
		}
		return ""
	}
	switch {
	case !strings.Contains(host, "."), host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return "a name that resolves locally"
	case strings.HasSuffix(host, ".svc") || strings.Contains(host, ".svc.") || strings.HasSuffix(host, ".cluster.local") ||
		strings.HasPrefix(host, "kubernetes.default"):
		return "an in-cluster name"
	}
	return ""
}

// hostAllowed reports whether host matches one of patterns: a host name
// or address, or *.<domain> for any name under domain (not domain itself);
// exact when a pattern names host itself.
func hostAllowed(host string, patterns []string) (allowed, exact bool) {
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(p), "."))
		if domain, ok := strings.CutPrefix(p, "*."); ok {
			allowed = allowed || strings.HasSuffix(host, "."+domain)
		} else if host == p {
			return true, true
		}
	}
	return allowed, false
}
