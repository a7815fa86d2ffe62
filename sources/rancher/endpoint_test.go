package rancher

// The endpoint a cluster's Secret points at: Rancher's proxy or the
// cluster's authorized cluster endpoint, and what its owner may choose.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestToClusterEndpoints: Rancher's proxy with the CA Rancher has, or the
// authorized cluster endpoint, for the source or by label.
func TestToClusterEndpoints(t *testing.T) {
	aceCA := fixtureCluster(t, "c-m-2x7kqz4b").LocalClusterAuthEndpoint.CACerts // enabled, with caCerts
	testToCluster(t, []mapCase{
		{name: "proxy with rancher's private CA", want: func(*sources.Cluster) {}},
		{name: "proxy with a publicly trusted rancher", ca: &rancherCA{}, want: func(w *sources.Cluster) { w.CA = sources.CA{} }},
		{name: "proxy with an unusable cacerts", ca: &rancherCA{Problem: "rancher's cacerts setting is not a usable CA bundle: x"},
			want: func(w *sources.Cluster) {
				w.CA, w.Ready, w.NotReadyReason = sources.CA{}, false, "rancher's cacerts setting is not a usable CA bundle: x"
			}},
		{name: "ace for the source", config: aceOn, want: viaACE(aceSrv, b64(aceCA), "")},
		{name: "per-cluster tokens behind the proxy", config: func(c *Config) { c.ClusterTokens = ClusterTokensPerCluster },
			want: func(w *sources.Cluster) {
				w.Auth.TokenRef = &sources.SecretRef{Issued: &sources.IssuedToken{Source: w.Source, Cluster: w.ID}}
			}},
		{name: "ace by label on a proxy source: the owner's label cannot widen, the proxy",
			cluster: func(c *Cluster) { c.Labels[defaultACELabel] = "True" }, want: func(w *sources.Cluster) {
				w.Labels[defaultACELabel] = "True"
			}},
		{name: "ace by label on an auto source", config: aceAuto,
			cluster: func(c *Cluster) { c.Labels[defaultACELabel] = "True" }, want: func(w *sources.Cluster) {
				viaACE(aceSrv, b64(aceCA), "")(w)
				w.Labels[defaultACELabel] = "True"
			}},
		{name: "ace without caCerts: public certificate", config: aceOn,
			cluster: func(c *Cluster) { c.LocalClusterAuthEndpoint.CACerts = "" }, want: viaACE(aceSrv, "", "")},
		{name: "ace with a port", config: aceOn,
			cluster: func(c *Cluster) { c.LocalClusterAuthEndpoint.FQDN = "ace.example.com:6443" },
			want:    viaACE("https://ace.example.com:6443", b64(aceCA), "")},
		{name: "ace requested but disabled", config: aceOn,
			cluster: func(c *Cluster) { c.LocalClusterAuthEndpoint.Enabled = false }, want: viaACE(proxySrv, "", noACE)},
		{name: "ace requested without fqdn", config: aceOn,
			cluster: func(c *Cluster) { c.LocalClusterAuthEndpoint.FQDN = " " }, want: viaACE(proxySrv, "", noACE)},
		{name: "ace with a bad fqdn", config: aceOn,
			cluster: func(c *Cluster) { c.LocalClusterAuthEndpoint.FQDN = "ace.example.com/x?y" },
			want:    viaACE(proxySrv, "", "authorized cluster endpoint fqdn: not a host[:port]")},
		{name: "ace with bad caCerts", config: aceOn,
			cluster: func(c *Cluster) { c.LocalClusterAuthEndpoint.CACerts = "junk" },
			want:    viaACE(aceSrv, "", "authorized cluster endpoint caCerts: no PEM certificate found")},
		{name: "ace label neither true, false nor auto", cluster: func(c *Cluster) { c.Labels[defaultACELabel] = "yes" },
			want: func(w *sources.Cluster) {
				w.Ready = false
				w.NotReadyReason = `label argocd-cluster-discovery.io/ace is "yes", not true, false or auto`
				w.Labels[defaultACELabel] = "yes"
			}},
	})
}

// TestACEHostsTheOperatorAllows: the fqdn is the cluster owner's to set
// and Argo CD sends the cluster's token there: only a host[:port] that
// aceAllowedHosts allows, never an in-cluster name, a loopback,
// link-local or unspecified address (unless listed itself), nor Rancher.
func TestACEHostsTheOperatorAllows(t *testing.T) {
	aceCA := fixtureCluster(t, "c-m-2x7kqz4b").LocalClusterAuthEndpoint.CACerts
	fqdn := func(v string) func(c *Cluster) { return func(c *Cluster) { c.LocalClusterAuthEndpoint.FQDN = v } }
	refused := func(why string) func(w *sources.Cluster) {
		return viaACE(proxySrv, "", "authorized cluster endpoint fqdn: "+why)
	}
	allow := func(hosts ...string) func(c *Config) {
		return func(c *Config) { c.ACE, c.ACEAllowedHosts = ACEOn, hosts }
	}
	testToCluster(t, []mapCase{
		{name: "a host under an allowed domain", config: allow("*.k8s.example.com"), want: viaACE(aceSrv, b64(aceCA), "")},
		{name: "a host the owner chose", config: allow("*.k8s.example.com"), cluster: fqdn("attacker.example.net"),
			want: refused("attacker.example.net is not in aceAllowedHosts")},
		{name: "the domain itself is not under it", config: allow("*.k8s.example.com"), cluster: fqdn("k8s.example.com"),
			want: refused("k8s.example.com is not in aceAllowedHosts")},
		{name: "user info", config: allow("*.example.com"), cluster: fqdn("u:p@ace.example.com"), want: refused("not a host[:port]")},
		{name: "a path", config: allow("*.example.com"), cluster: fqdn("ace.example.com/k8s"), want: refused("not a host[:port]")},
		{name: "in-cluster service", config: allow("*.example.com", "*.cluster.local"), cluster: fqdn("kubernetes.default.svc.cluster.local"),
			want: refused("kubernetes.default.svc.cluster.local is an in-cluster name (list it in aceAllowedHosts itself, not by a wildcard, to allow it)")},
		{name: "a single-label name", config: allow("*.example.com"), cluster: fqdn("kubernetes"),
			want: refused("kubernetes is a name that resolves locally (list it in aceAllowedHosts itself, not by a wildcard, to allow it)")},
		{name: "the cloud metadata address", config: allow("*.example.com"), cluster: fqdn("169.254.169.254"),
			want: refused("169.254.169.254 is a loopback, link-local or unspecified address (list it in aceAllowedHosts itself, not by a wildcard, to allow it)")},
		{name: "loopback listed itself", config: allow("127.0.0.1"), cluster: fqdn("127.0.0.1:6443"),
			want: viaACE("https://127.0.0.1:6443", b64(aceCA), "")},
		{name: "Rancher itself", config: allow("*.example.com"), cluster: fqdn(strings.TrimPrefix(server, "https://")),
			want: refused(strings.TrimPrefix(server, "https://") + ":443 is Rancher's own address")},
		{name: "Rancher itself, spelled with a trailing dot, capitals and its port", config: allow("*.example.com"),
			cluster: fqdn(strings.ToUpper(strings.TrimPrefix(server, "https://")) + ".:443"),
			want:    refused(strings.TrimPrefix(server, "https://") + ":443 is Rancher's own address")},
		{name: "Rancher itself, its port zero-padded (Go dials 0443 as 443)", config: allow("*.example.com"),
			cluster: fqdn(strings.TrimPrefix(server, "https://") + ":00443"),
			want:    refused(strings.TrimPrefix(server, "https://") + ":443 is Rancher's own address")},
		{name: "a port out of range", config: allow("*.k8s.example.com"), cluster: fqdn("ace.k8s.example.com:65536"),
			want: refused("not a host[:port]")},
		{name: "a zero-padded port is spelled once", config: allow("*.k8s.example.com"), cluster: fqdn("ace.k8s.example.com:06443"),
			want: viaACE("https://ace.k8s.example.com:6443", b64(aceCA), "")},
		{name: "one spelling per endpoint", config: allow("*.k8s.example.com"),
			cluster: fqdn(strings.ToUpper(strings.TrimPrefix(aceSrv, "https://")) + ".:443"),
			want:    viaACE(aceSrv, b64(aceCA), "")},
	})
}

// TestToClusterACEAuto: auto is the authorized cluster endpoint when the
// cluster has one enabled with an fqdn, Rancher's proxy otherwise; the
// label overrides the source either way.
func TestToClusterACEAuto(t *testing.T) {
	aceCA := fixtureCluster(t, "c-m-2x7kqz4b").LocalClusterAuthEndpoint.CACerts
	label := func(v string) func(c *Cluster) { return func(c *Cluster) { c.Labels[defaultACELabel] = v } }
	withLabel := func(v string, want func(w *sources.Cluster)) func(w *sources.Cluster) {
		return func(w *sources.Cluster) { want(w); w.Labels[defaultACELabel] = v }
	}
	testToCluster(t, []mapCase{
		{name: "enabled with an fqdn: ace", config: aceAuto, want: viaACE(aceSrv, b64(aceCA), "")},
		{name: "disabled: the proxy, ready", config: aceAuto,
			cluster: func(c *Cluster) { c.LocalClusterAuthEndpoint.Enabled = false }, want: func(*sources.Cluster) {}},
		{name: "enabled without an fqdn: the proxy", config: aceAuto,
			cluster: func(c *Cluster) { c.LocalClusterAuthEndpoint.FQDN = "" }, want: func(*sources.Cluster) {}},
		{name: "no endpoint at all (hosted, imported): the proxy", config: aceAuto,
			cluster: func(c *Cluster) { c.LocalClusterAuthEndpoint = nil }, want: func(*sources.Cluster) {}},
		{name: "the proxy keeps rancher's CA problem", config: aceAuto, ca: &rancherCA{Problem: "bad cacerts"},
			cluster: func(c *Cluster) { c.LocalClusterAuthEndpoint.Enabled = false },
			want:    func(w *sources.Cluster) { w.CA, w.Ready, w.NotReadyReason = sources.CA{}, false, "bad cacerts" }},
		{name: "a bad endpoint is not hidden behind the proxy", config: aceAuto,
			cluster: func(c *Cluster) { c.LocalClusterAuthEndpoint.CACerts = "junk" },
			want:    viaACE(aceSrv, "", "authorized cluster endpoint caCerts: no PEM certificate found")},
		{name: "label auto on a proxy source: the proxy", cluster: label(" AUTO"), want: withLabel(" AUTO", func(*sources.Cluster) {})},
		{name: "label auto on an ace source without endpoint: the proxy", config: aceOn,
			cluster: func(c *Cluster) { label("auto")(c); c.LocalClusterAuthEndpoint.Enabled = false },
			want:    withLabel("auto", func(*sources.Cluster) {})},
		{name: "label false on an auto source", config: aceAuto, cluster: label("false"),
			want: withLabel("false", func(*sources.Cluster) {})},
		{name: "label true on an auto source without endpoint: not ready", config: aceAuto,
			cluster: func(c *Cluster) { label("true")(c); c.LocalClusterAuthEndpoint.Enabled = false },
			want:    withLabel("true", viaACE(proxySrv, "", noACE))},
	})
}

// TestListingNeverSendsToAnOwnersACEHost: through norman's client and a
// whole listing, clusters whose owners point the authorized endpoint at a
// loopback address, an in-cluster name, Rancher itself, a host that only
// ends like an allowed domain, or a host nobody allowed are not ready, and
// none of them gets that host as its server; the cluster with an allowed
// host does.
func TestListingNeverSendsToAnOwnersACEHost(t *testing.T) {
	f := newFake(t, false)
	f.PutFixtureClusters()
	// the address Argo CD reaches Rancher at, under the allowed domain
	const secretURL = "https://rancher.k8s.example.com"
	hosts := map[string]string{ // cluster name → the fqdn its owner wrote
		"loopback":     "127.0.0.1:6443",
		"in-cluster":   "kubernetes.default.svc.cluster.local", // under an allowed wildcard
		"rancher":      "rancher.k8s.example.com",
		"lookalike":    "evilk8s.example.com",
		"not-allowed":  "ace.attacker.example.net",
		"prod-eu-west": "prod-eu-west.k8s.example.com",
	}
	var base map[string]any
	f.edit("c-m-2x7kqz4b", func(c map[string]any) { base = c })
	for name, fqdn := range hosts {
		if name == "prod-eu-west" {
			continue
		}
		c := map[string]any{}
		b, err := json.Marshal(base)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &c))
		c["id"], c["name"] = "c-m-"+name, name
		c["localClusterAuthEndpoint"].(map[string]any)["fqdn"] = fqdn
		f.put(c)
	}
	cfg := config(t, f)
	cfg.ACE, cfg.ACEAllowedHosts, cfg.SecretURL = ACEOn, []string{"*.k8s.example.com", "*.cluster.local"}, secretURL
	s := newTestSource(t, "rancher-a", cfg, testOptions{})
	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	listed := byName(got)
	for name, fqdn := range hosts {
		c, ok := listed[name]
		require.True(t, ok, name)
		if name == "prod-eu-west" {
			assert.True(t, c.Ready, c.NotReadyReason)
			assert.Equal(t, "https://"+fqdn, c.Server)
			continue
		}
		assert.False(t, c.Ready, "%s: the owner's host %s", name, fqdn)
		assert.Contains(t, c.NotReadyReason, "authorized cluster endpoint fqdn", name)
		assert.Equal(t, secretURL+"/k8s/clusters/c-m-"+name, c.Server, "%s: Rancher's proxy, never the owner's host", name)
	}
}

// TestListingKeepsOwnersWordsNarrow: through a whole listing, what a
// cluster's owner writes in Rancher narrows what the cluster gets and
// never chooses for it: its tenant label is marked as the owner's (the
// tenant rules refuse it unless a rule admits the cluster), and its
// namespaces annotation keeps only namespaces of the source's own.
func TestListingKeepsOwnersWordsNarrow(t *testing.T) {
	f := newFake(t, false)
	f.PutFixtureClusters()
	f.edit("c-m-2x7kqz4b", func(c map[string]any) {
		c["labels"].(map[string]any)["tenant"] = "acme"
		annotations, _ := c["annotations"].(map[string]any)
		if annotations == nil {
			annotations = map[string]any{}
			c["annotations"] = annotations
		}
		annotations["argocd-namespaces"] = "apps, kube-system, other-team"
	})
	cfg := config(t, f)
	cfg.Namespaces = []string{"apps", "jobs"}
	s := newTestSource(t, "rancher-a", cfg, testOptions{})
	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	prod, ok := byName(got)["prod-eu-west"]
	require.True(t, ok)

	assert.Equal(t, []string{"apps"}, prod.Namespaces, "the owner's annotation narrows the source's namespaces, never widens them")
	assert.Equal(t, "acme", prod.Tenant)
	assert.True(t, prod.TenantFromOwner, "the tenant label is the owner's")
	assert.Contains(t, prod.ApplyTenantRule(nil, false), `tenant "acme" is the cluster owner's label or tag`)
	assert.Empty(t, prod.ApplyTenantRule(map[string]sources.TenantRule{"acme": {Sources: []string{"rancher-a"}}}, false),
		"a rule for this source admits it")
}
