package rancher

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

const (
	rancherCAPEM = "-----BEGIN CERTIFICATE-----\nMIIB8TCCAZegAwIBAgIUW1ye16ly1TonmyAbTJwGKrCqWOEwCgYIKoZIzj0EAwIw\nRjEcMBoGA1UECgwTZHluYW1pY2xpc3RlbmVyLW9yZzEmMCQGA1UEAwwdZHluYW1p\nY2xpc3RlbmVyLWNhQDE3MTU2NzcwMDAwHhcNMjYxMTIxMTI1OTAwWhcNMzYxMTE4\nMTI1OTAwWjBGMRwwGgYDVQQKDBNkeW5hbWljbGlzdGVuZXItb3JnMSYwJAYDVQQD\nDB1keW5hbWljbGlzdGVuZXItY2FAMTcxNTY3NzAwMDBZMBMGByqGSM49AgEGCCqG\nSM49AwEHA0IABHzWOihjuZC+1q7C/0d0DSrDSxqHSO6LXAcddLLtVb8IiW/LfLhc\noiyCkuaLfdqVCV2d/gCFZUrO80GkkEriFWmjYzBhMB0GA1UdDgQWBBTxe9/NI8zY\nQ8TczbBtan05U9H0KzAfBgNVHSMEGDAWgBTxe9/NI8zYQ8TczbBtan05U9H0KzAP\nBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQEAwICpDAKBggqhkjOPQQDAgNIADBF\nAiEA5uSL/JVq/heFo2s/Asqz7HkXNhlM3XS+bzZd/1nekp0CID8FHOHj/rkIXKsY\nJHWfKyH4D9jxB/7NfbeDQDeRPN8t\n-----END CERTIFICATE-----\n"
	server       = "https://rancher.example.com"
)

// fixtureCluster decodes one cluster of the fixture pages.
func fixtureCluster(t *testing.T, id string) Cluster {
	t.Helper()
	for _, name := range []string{"rancher-clusters-page1.json", "rancher-clusters-page2.json"} {
		var col clusterCollection
		b, err := os.ReadFile(filepath.Join(fixturesDir, name))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &col))
		for _, c := range col.Data {
			if c.ID == id {
				return c
			}
		}
	}
	t.Fatalf("no fixture cluster %s", id)
	return Cluster{}
}

func testMapper(change func(c *Config)) *mapper {
	c := Config{URL: server, Token: sources.SecretRef{File: "/var/run/rancher/token"}}
	if change != nil {
		change(&c)
	}
	c.Default()
	return newMapper("rancher-a", server, c)
}

// The servers, and the reason of a cluster asked to use an authorized
// cluster endpoint that Rancher has not enabled, in the mapping tables.
const (
	proxySrv = server + "/k8s/clusters/c-m-2x7kqz4b"
	aceSrv   = "https://prod-eu-west.k8s.example.com"
	noACE    = "authorized cluster endpoint requested (argocd-cluster-discovery.io/ace or source ace) but not enabled with an fqdn in Rancher"
)

// mapCase is one row of the mapping tables: changes to the configuration
// and to a fixture cluster, and to the cluster expected of prod-eu-west
// behind Rancher's proxy with Rancher's private CA.
type mapCase struct {
	name    string
	config  func(c *Config)
	cluster func(c *Cluster)
	from    string // the fixture cluster's id; default prod-eu-west's
	ca      *rancherCA
	want    func(w *sources.Cluster)
}

func aceOn(c *Config)   { c.ACE, c.ACEAllowedHosts = ACEOn, []string{"*.example.com"} }
func aceAuto(c *Config) { c.ACE, c.ACEAllowedHosts = ACEAuto, []string{"*.example.com"} }

// viaACE expects the ACE endpoint chosen, with that server and caData,
// not ready when notReady is set.
func viaACE(srv, caData, notReady string) func(w *sources.Cluster) {
	return func(w *sources.Cluster) {
		w.Server, w.CA, w.Labels[LabelEndpoint] = srv, sources.CAFromData(caData), EndpointACE
		// the endpoint accepts only a token scoped to the cluster: one the source issues
		w.Auth.TokenRef = &sources.SecretRef{Issued: &sources.IssuedToken{Source: w.Source, Cluster: w.ID}}
		if notReady != "" {
			w.Ready, w.NotReadyReason = false, notReady
		}
	}
}

// proxyLabels are prod-eu-west's labels behind the proxy, and extra.
func proxyLabels(extra map[string]string) map[string]string {
	out := map[string]string{
		"env": "prod", "provider.cattle.io": "rke2", "region": "eu-west", "team": "payments",
		LabelClusterID: "c-m-2x7kqz4b", LabelDriver: "imported", LabelProvider: "rke2", LabelEndpoint: EndpointProxy,
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// testToCluster maps each case's cluster and compares it with the one
// expected.
func testToCluster(t *testing.T, cases []mapCase) {
	t.Helper()
	tokenRef := &sources.SecretRef{File: "/var/run/rancher/token"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.from
			if id == "" {
				id = "c-m-2x7kqz4b"
			}
			in := fixtureCluster(t, id) // a fresh copy: the changes stay in it
			if tc.cluster != nil {
				tc.cluster(&in)
			}
			ca := newRancherCA(rancherCAPEM)
			if tc.ca != nil {
				ca = *tc.ca
			}
			want := sources.Cluster{
				Source: "rancher-a", Provider: sources.ProviderRancher, Name: "prod-eu-west", ID: "c-m-2x7kqz4b", Group: "fleet-default",
				Phase: sources.PhaseReady, Server: proxySrv, CA: sources.CAFromData(b64(rancherCAPEM)),
				Auth:   sources.Auth{Kind: sources.AuthBearerToken, TokenRef: tokenRef},
				Labels: proxyLabels(nil), KubernetesVersion: "v1.31.7+rke2r1", State: "active", Ready: true,
			}
			tc.want(&want)
			got := testMapper(tc.config).toCluster(&in, ca, nil)
			assert.Equal(t, want, got)
			if got.Ready {
				require.NoError(t, got.Validate())
				if got.CA.Data() != "" {
					require.NoError(t, sources.ValidateCAData(got.CA.Data()))
				}
			}
		})
	}
}

// TestToClusterSecretURL: secretURL replaces url in the proxy's server,
// and nowhere else.
func TestToClusterSecretURL(t *testing.T) {
	aceCA := fixtureCluster(t, "c-m-2x7kqz4b").LocalClusterAuthEndpoint.CACerts
	internal := func(c *Config) { c.SecretURL = "https://rancher.cattle-system.svc.cluster.local:8443/" }
	testToCluster(t, []mapCase{
		{name: "the proxy through secretURL, with rancher's CA", config: internal, want: func(w *sources.Cluster) {
			w.Server = "https://rancher.cattle-system.svc.cluster.local:8443/k8s/clusters/c-m-2x7kqz4b"
		}},
		{name: "an authorized cluster endpoint is not affected",
			config: func(c *Config) { internal(c); aceOn(c) }, want: viaACE(aceSrv, b64(aceCA), "")},
		{name: "auto falls back to the proxy through secretURL", config: func(c *Config) { internal(c); aceAuto(c) },
			cluster: func(c *Cluster) { c.LocalClusterAuthEndpoint.Enabled = false }, want: func(w *sources.Cluster) {
				w.Server = "https://rancher.cattle-system.svc.cluster.local:8443/k8s/clusters/c-m-2x7kqz4b"
			}},
	})
}

// TestToClusterPhases: the state sets the phase only, never whether the
// cluster can be rendered.
func TestToClusterPhases(t *testing.T) {
	testToCluster(t, []mapCase{
		{name: "updating: degraded, still renderable", cluster: func(c *Cluster) { c.State = "updating" },
			want: func(w *sources.Cluster) { w.State, w.Phase = "updating", sources.PhaseDegraded }},
		{name: "error: degraded, still renderable", cluster: func(c *Cluster) { c.State = "error" },
			want: func(w *sources.Cluster) { w.State, w.Phase = "error", sources.PhaseDegraded }},
		{name: "unavailable after the first health check: degraded", cluster: func(c *Cluster) {
			c.State = "unavailable"
			c.Conditions = []Condition{{Type: "Waiting", Status: "True"}, {Type: "Ready", Status: "False", Reason: "Disconnected"}}
		}, want: func(w *sources.Cluster) { w.State, w.Phase = "unavailable", sources.PhaseDegraded }},
		{name: "provisioning, never established: pending", cluster: func(c *Cluster) {
			c.State, c.Conditions = "provisioning", []Condition{{Type: "Waiting", Status: "Unknown"}}
		}, want: func(w *sources.Cluster) { w.State, w.Phase = "provisioning", sources.PhasePending }},
		{name: "being deleted: leaving", cluster: func(c *Cluster) {
			c.State, c.Removed = "removing", "2026-08-21T10:00:00Z"
		}, want: func(w *sources.Cluster) { w.State, w.Phase = "removing", sources.PhaseLeaving }},
		{name: "active but disconnected: degraded", cluster: func(c *Cluster) {
			c.Conditions = []Condition{{Type: "Waiting", Status: "True"}, {Type: "Connected", Status: "False"}, {Type: "Ready", Status: "True"}}
		}, want: func(w *sources.Cluster) { w.Phase = sources.PhaseDegraded }},
		{name: "a state and a rendering problem are independent", config: aceOn, cluster: func(c *Cluster) {
			c.State = "upgrading"
			c.LocalClusterAuthEndpoint.Enabled = false
		}, want: func(w *sources.Cluster) {
			viaACE(proxySrv, "", noACE)(w)
			w.State, w.Phase = "upgrading", sources.PhaseDegraded
		}},
	})
}

// TestToClusterNamesAndScoping: the name, the tenant, project and
// namespaces, and the labels and annotations kept.
func TestToClusterNamesAndScoping(t *testing.T) {
	testToCluster(t, []mapCase{
		{name: "no display name: the id", config: func(c *Config) { c.NamePrefix = "eu-" },
			cluster: func(c *Cluster) { c.Name = "" }, want: func(w *sources.Cluster) { w.Name = "eu-c-m-2x7kqz4b" }},
		{name: "renamed: same id", cluster: func(c *Cluster) { c.Name = "prod-eu-west-2" },
			want: func(w *sources.Cluster) { w.Name = "prod-eu-west-2" }},
		{name: "tenant, project and namespaces from the cluster", cluster: func(c *Cluster) {
			c.Labels["tenant"], c.Labels["argocd-project"] = "payments", "payments-prod"
			c.Annotations["argocd-namespaces"] = "pay, pay-jobs\npay"
		}, want: func(w *sources.Cluster) {
			w.Labels["tenant"], w.Labels["argocd-project"] = "payments", "payments-prod"
			w.Annotations = map[string]string{"argocd-namespaces": "pay, pay-jobs\npay"}
			w.Tenant, w.Project, w.Namespaces = "payments", "payments-prod", []string{"pay", "pay-jobs"}
			w.TenantFromOwner, w.ProjectFromOwner = true, true // the cluster owner's labels
		}},
		{name: "per-source defaults", config: func(c *Config) {
			c.Tenant, c.Project, c.Namespaces = "platform", "fleet", []string{"apps"}
		}, want: func(w *sources.Cluster) { w.Tenant, w.Project, w.Namespaces = "platform", "fleet", []string{"apps"} }},
		{name: "bad namespaces never widen", config: func(c *Config) { c.Namespaces = []string{"apps"} },
			cluster: func(c *Cluster) { c.Annotations["argocd-namespaces"] = "ok, Not_OK" },
			want: func(w *sources.Cluster) {
				w.Annotations = map[string]string{"argocd-namespaces": "ok, Not_OK"}
				w.Ready, w.Namespaces = false, nil
				w.NotReadyReason = `annotation argocd-namespaces: "Not_OK" is not a namespace name`
			}},
		{name: "the owner's namespaces narrow the source's", config: func(c *Config) { c.Namespaces = []string{"apps", "jobs"} },
			cluster: func(c *Cluster) { c.Annotations["argocd-namespaces"] = "jobs, kube-system" },
			want: func(w *sources.Cluster) {
				w.Annotations = map[string]string{"argocd-namespaces": "jobs, kube-system"}
				w.Namespaces = []string{"jobs"}
			}},
		{name: "the owner's namespaces never widen the source's", config: func(c *Config) { c.Namespaces = []string{"apps"} },
			cluster: func(c *Cluster) { c.Annotations["argocd-namespaces"] = "kube-system" },
			want: func(w *sources.Cluster) {
				w.Annotations = map[string]string{"argocd-namespaces": "kube-system"}
				w.Ready, w.Namespaces = false, nil
				w.NotReadyReason = `annotation argocd-namespaces: none of its namespaces is among the source's namespaces [apps] (it may only narrow them)`
			}},
		{name: "reserved prefix cannot be faked, custom drop list", config: func(c *Config) {
			c.DropLabelPrefixes, c.DropAnnotationPrefixes = []string{"team"}, []string{}
		}, cluster: func(c *Cluster) {
			c.Labels[LabelEKSAccount] = "999999999999"
			c.Annotations = map[string]string{"lifecycle.cattle.io/x": "true", reservedPrefix + "x": "y"}
		}, want: func(w *sources.Cluster) {
			w.Labels = proxyLabels(map[string]string{"objectset.rio.cattle.io/hash": "9c1e4f2d7b0a8e6c3f5d1b9a7e2c4d6f8a0b1c3e"})
			delete(w.Labels, "team")
			w.Annotations = map[string]string{"lifecycle.cattle.io/x": "true"}
		}},
	})
}

func clone(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestProxyClustersShareOneCA checks that every cluster behind Rancher's
// proxy carries the same CA, parsed once per listing, instead of a copy of
// its own (~7.5 MiB at 10,000 clusters for an RSA 2048 CA).
func TestProxyClustersShareOneCA(t *testing.T) {
	m := testMapper(nil)
	ca := newRancherCA(rancherCAPEM)
	ra, rb := fixtureCluster(t, "c-7qgnz"), fixtureCluster(t, "c-m-2x7kqz4b")
	a, b := m.toCluster(&ra, ca, nil), m.toCluster(&rb, ca, nil)
	require.NotEmpty(t, a.CA.Data())
	assert.Equal(t, base64.StdEncoding.EncodeToString([]byte(rancherCAPEM)), a.CA.Data())
	// A CA is a struct of one string, the bundle in its compact form.
	caBytes := func(ca *sources.CA) string { return *(*string)(unsafe.Pointer(ca)) }
	assert.Same(t, unsafe.StringData(caBytes(&a.CA)), unsafe.StringData(caBytes(&b.CA)))
}

// TestPhase is the table of the package doc, row by row, with the
// conditions that change a row's answer.
func TestPhase(t *testing.T) {
	cond := func(typ, status string) Condition { return Condition{Type: typ, Status: status} }
	var (
		established = []Condition{cond("Pending", "True"), cond("Provisioned", "True"), cond("Waiting", "True")}
		healthy     = append(slices.Clone(established), cond("Connected", "True"), cond("Ready", "True"))
		neverUp     = []Condition{cond("Pending", "True"), cond("Provisioned", "True"), cond("Waiting", "Unknown")}
	)
	with := func(base []Condition, extra ...Condition) []Condition { return append(slices.Clone(base), extra...) }
	for _, tc := range []struct {
		name       string
		state      string
		removed    bool
		conditions []Condition
		want       sources.Phase
	}{
		{name: "active, healthy", state: "active", conditions: healthy, want: sources.PhaseReady},
		{name: "active without conditions", state: "active", want: sources.PhaseReady},
		{name: "active, upper case", state: " Active ", conditions: healthy, want: sources.PhaseReady},
		{name: "active, disconnected", state: "active", conditions: with(established, cond("Connected", "False"), cond("Ready", "True")),
			want: sources.PhaseDegraded},
		{name: "active, Ready False", state: "active", conditions: with(established, cond("Connected", "True"), cond("Ready", "False")),
			want: sources.PhaseDegraded},
		{name: "active, Ready Unknown", state: "active", conditions: with(established, cond("Ready", "Unknown")),
			want: sources.PhaseDegraded},
		{name: "active, status in another case", state: "active", conditions: []Condition{cond("Connected", "false")},
			want: sources.PhaseDegraded},
		{name: "active, Connected Unknown is not read", state: "active", conditions: with(established, cond("Connected", "Unknown"), cond("Ready", "True")),
			want: sources.PhaseReady},
		{name: "active but removed", state: "active", removed: true, conditions: healthy, want: sources.PhaseLeaving},
		{name: "removing", state: "removing", conditions: healthy, want: sources.PhaseLeaving},
		{name: "removing, never established", state: "removing", conditions: neverUp, want: sources.PhaseLeaving},
		{name: "unknown state, removed", state: "", removed: true, want: sources.PhaseLeaving},

		{name: "initializing", state: "initializing", want: sources.PhasePending},
		{name: "pending", state: "pending", conditions: []Condition{cond("Pending", "Unknown")}, want: sources.PhasePending},
		{name: "provisioning, never established", state: "provisioning", conditions: neverUp, want: sources.PhasePending},
		{name: "provisioning, no Waiting condition", state: "provisioning", conditions: []Condition{cond("Provisioned", "Unknown")},
			want: sources.PhasePending},
		{name: "provisioning, Waiting False", state: "provisioning", conditions: []Condition{cond("Waiting", "False")},
			want: sources.PhasePending},
		{name: "provisioning, established", state: "provisioning", conditions: with(established, cond("AgentDeployed", "Unknown")),
			want: sources.PhaseDegraded},
		{name: "waiting", state: "waiting", conditions: neverUp, want: sources.PhasePending},
		{name: "activating", state: "activating", conditions: neverUp, want: sources.PhasePending},
		{name: "configuring", state: "configuring", conditions: neverUp, want: sources.PhasePending},
		{name: "configuring, established", state: "configuring", conditions: established, want: sources.PhaseDegraded},
		{name: "unavailable, never established", state: "unavailable", conditions: with(neverUp, cond("Ready", "False")),
			want: sources.PhasePending},
		{name: "unavailable, established", state: "unavailable",
			conditions: with(established, cond("Connected", "False"), cond("Ready", "False")), want: sources.PhaseDegraded},

		{name: "updating", state: "updating", conditions: with(healthy, cond("Updated", "Unknown")), want: sources.PhaseDegraded},
		{name: "updating, never established", state: "updating", conditions: neverUp, want: sources.PhaseDegraded},
		{name: "upgrading", state: "upgrading", conditions: healthy, want: sources.PhaseDegraded},
		{name: "error", state: "error", conditions: with(established, cond("Ready", "False")), want: sources.PhaseDegraded},
		{name: "error, never established", state: "error", conditions: neverUp, want: sources.PhaseDegraded},
		{name: "reconciling", state: "reconciling", want: sources.PhaseDegraded},
		{name: "in-progress", state: "in-progress", want: sources.PhaseDegraded},
		{name: "failed", state: "failed", want: sources.PhaseDegraded},

		{name: "unknown state", state: "hibernating", conditions: healthy, want: sources.PhaseDegraded},
		{name: "empty state, no conditions", state: "", want: sources.PhaseDegraded},
		{name: "empty state, healthy", state: "", conditions: healthy, want: sources.PhaseDegraded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, phase(tc.state, tc.removed, tc.conditions))
		})
	}
}

// TestKeepConditions checks that a listing keeps exactly the conditions
// the phase reads, so that the phase is the one of all the conditions.
func TestKeepConditions(t *testing.T) {
	cond := func(typ, status string) Condition { return Condition{Type: typ, Status: status} }
	for _, tc := range []struct {
		name string
		in   []Condition
		want []Condition
	}{
		{name: "the fixture's nineteen conditions", in: fixtureCluster(t, "c-m-2x7kqz4b").Conditions, want: []Condition{
			{Type: "Waiting", Status: "True", LastUpdateTime: "2024-05-14T09:19:40Z"},
			{Type: "Connected", Status: "True", LastUpdateTime: "2025-11-03T08:14:52Z"},
			{Type: "Ready", Status: "True", LastUpdateTime: "2025-11-03T08:14:52Z"},
		}},
		{name: "a disconnected agent", in: fixtureCluster(t, "c-5tbxq").Conditions, want: []Condition{
			{Type: "Waiting", Status: "True", LastUpdateTime: "2024-05-14T09:19:40Z"},
			{Type: "Connected", Status: "False", Reason: "Disconnected", Message: "Cluster agent is not connected",
				LastUpdateTime: "2025-11-20T22:41:07Z"},
			{Type: "Ready", Status: "False", Reason: "Disconnected", Message: "Cluster agent is not connected",
				LastUpdateTime: "2025-11-20T22:41:07Z"},
		}},
		{name: "order and repeats are kept", in: []Condition{cond("Ready", "False"), cond("Updated", "Unknown"), cond("Ready", "True")},
			want: []Condition{cond("Ready", "False"), cond("Ready", "True")}},
		{name: "types are case-sensitive, as in Rancher", in: []Condition{cond("ready", "False")}},
		{name: "none read", in: []Condition{cond("Pending", "True"), cond("Provisioned", "Unknown")}},
		{name: "nil", in: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := keepConditions(tc.in)
			assert.Equal(t, tc.want, got)
			for _, state := range []string{"active", "provisioning", "unavailable"} {
				assert.Equal(t, phase(state, false, tc.in), phase(state, false, got), state)
			}
		})
	}
	prod := fixtureCluster(t, "c-m-2x7kqz4b")
	require.Len(t, prod.Conditions, 19, "every condition is decoded")
}
