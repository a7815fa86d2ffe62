package rancher

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testOptions are a test source's collaborators: what the service gives
// every source, and the fake's HTTP client (to trust its certificate).
type testOptions struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	HTTPClient *http.Client
}

// newTestSource builds a source of cfg as the service does: Default, then
// NewSource (with the fake's client when set).
func newTestSource(t testing.TB, name string, cfg Config, opts testOptions) *Source {
	t.Helper()
	cfg.Default()
	s, err := newSource(cfg, sources.SourceOptions{Name: name, Logger: opts.Logger, Registerer: opts.Registerer}, opts.HTTPClient)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func byName(cs []sources.Cluster) map[string]sources.Cluster {
	out := map[string]sources.Cluster{}
	for _, c := range cs {
		out[c.Name] = c
	}
	return out
}

func names(cs []sources.Cluster) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func snapNames(cs []*sources.Cluster) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// errCount returns the failed listings of s counted under kind and op.
func errCount(t testing.TB, s *Source, kind upstream.Kind, op string) float64 {
	t.Helper()
	return testutil.ToFloat64(s.metrics.Errors.WithLabelValues(string(kind), op))
}

func TestFixturePages(t *testing.T) {
	f := newFake(t, false)
	f.ServeFixturePages(true)
	s := newTestSource(t, "rancher-a", config(t, f), testOptions{})

	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	// local is Rancher's own: left out. c-5tbxq (edge-k3s-01) is unavailable
	// and listed.
	assert.ElementsMatch(t, []string{"edge-k3s-01", "staging-eks", "prod-eu-west"}, names(got))

	reqs := f.TakeRequests()
	assert.Equal(t, map[string]int{"/v3": 1, "/v3/schemas": 1, "/v3/settings/cacerts": 1, "/v3/clusters": 2}, paths(reqs))
	for _, r := range reqs {
		if r.Path == "/v3/clusters" && !strings.Contains(r.RawQuery, "marker") {
			assert.Equal(t, "internal=false&limit=1000", r.RawQuery, "server-side filters: never the state")
		}
		if r.Path != "/v3/settings/cacerts" {
			assert.Equal(t, "Bearer "+testToken, r.Authorization)
		}
	}

	prod := byName(got)["prod-eu-west"]
	assert.Equal(t, f.URL()+"/k8s/clusters/c-m-2x7kqz4b", prod.Server, "auth proxy, never apiEndpoint")
	assert.Equal(t, b64(f.CACerts()), prod.CA.Data())
	require.NoError(t, sources.ValidateCAData(prod.CA.Data()))
	assert.True(t, prod.Ready)
	assert.Equal(t, "v1.31.7+rke2r1", prod.KubernetesVersion)
	assert.Equal(t, "active", prod.State)
	assert.Equal(t, sources.PhaseReady, prod.Phase)
	assert.Equal(t, "c-m-2x7kqz4b", prod.ID)
	assert.Equal(t, sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &s.cfg.Token}, prod.Auth)
	assert.Equal(t, map[string]string{
		"env": "prod", "provider.cattle.io": "rke2", "region": "eu-west", "team": "payments",
		LabelClusterID: "c-m-2x7kqz4b", LabelDriver: "imported", LabelProvider: "rke2", LabelEndpoint: EndpointProxy,
	}, prod.Labels)
	assert.Nil(t, prod.Annotations, "only Rancher noise")
	require.NoError(t, prod.Validate())

	eks := byName(got)["staging-eks"]
	assert.Equal(t, sources.EKSCloudID("210987654321", "eu-west-1", "staging-eks"), eks.CloudID)
	assert.Equal(t, "eu-west-1", eks.Region)
	assert.Equal(t, "210987654321", eks.Account)
	assert.Equal(t, "staging-eks", eks.Labels[LabelEKSName])
	assert.Equal(t, f.URL()+"/k8s/clusters/c-7qgnz", eks.Server, "the proxy, not the EKS apiEndpoint")
	assert.Equal(t, sources.PhaseReady, eks.Phase)

	edge := byName(got)["edge-k3s-01"]
	assert.Equal(t, "c-5tbxq", edge.ID)
	assert.Equal(t, "unavailable", edge.State)
	assert.Equal(t, sources.PhaseDegraded, edge.Phase, "the agent disconnected from an established cluster")
	assert.True(t, edge.Ready, "renderable: the state is not a rendering problem")
	assert.Empty(t, edge.NotReadyReason)
	require.NoError(t, edge.Validate())
	for _, c := range got {
		assert.NotContains(t, fmt.Sprint(c), testToken)
	}
}

func TestManyPages(t *testing.T) {
	f := newFake(t, false)
	f.Generate(25)
	cfg := config(t, f)
	cfg.PageLimit = 10
	s := newTestSource(t, "rancher-a", cfg, testOptions{})
	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	require.Len(t, got, 25)
	assert.Equal(t, 3, paths(f.TakeRequests())["/v3/clusters"])
	assert.Equal(t, 3.0, testutil.ToFloat64(s.metrics.pages))
	assert.Equal(t, 25.0, testutil.ToFloat64(s.metrics.Upstream.WithLabelValues("active")))
	seen := map[string]bool{}
	for _, c := range got {
		assert.False(t, seen[c.Name], c.Name)
		seen[c.Name] = true
	}
	assert.True(t, seen["cluster-00000024"])
}

func TestClustersComeAndGo(t *testing.T) {
	f := newFake(t, false)
	f.PutFixtureClusters()
	s := newTestSource(t, "rancher-a", config(t, f), testOptions{})
	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"edge-k3s-01", "staging-eks", "prod-eu-west"}, names(got))

	t.Run("a cluster goes unavailable and stays, degraded", func(t *testing.T) {
		f.edit("c-m-2x7kqz4b", func(c map[string]any) {
			c["state"] = "unavailable"
			setCondition(c, "Connected", "False")
			setCondition(c, "Ready", "False")
		})
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"edge-k3s-01", "staging-eks", "prod-eu-west"}, names(got))
		prod := byName(got)["prod-eu-west"]
		assert.Equal(t, sources.PhaseDegraded, prod.Phase)
		assert.True(t, prod.Ready, prod.NotReadyReason)
	})
	t.Run("it reconnects", func(t *testing.T) {
		f.edit("c-m-2x7kqz4b", func(c map[string]any) {
			c["state"] = "active"
			setCondition(c, "Connected", "True")
			setCondition(c, "Ready", "True")
		})
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		assert.Equal(t, sources.PhaseReady, byName(got)["prod-eu-west"].Phase)
	})
	t.Run("a renamed cluster keeps its id", func(t *testing.T) {
		f.edit("c-m-2x7kqz4b", func(c map[string]any) { c["name"] = "prod-eu-west-renamed" })
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"edge-k3s-01", "staging-eks", "prod-eu-west-renamed"}, names(got))
		assert.Equal(t, "c-m-2x7kqz4b", byName(got)["prod-eu-west-renamed"].ID)
	})
	t.Run("a new cluster registers and appears, pending", func(t *testing.T) {
		f.edit("c-5tbxq", func(c map[string]any) {
			c["id"], c["name"], c["state"] = "c-m-newcomer", "edge-new", "waiting"
			setCondition(c, "Waiting", "Unknown")
		})
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"edge-k3s-01", "staging-eks", "prod-eu-west-renamed", "edge-new"}, names(got))
		assert.Equal(t, f.URL()+"/k8s/clusters/c-m-newcomer", byName(got)["edge-new"].Server)
		assert.Equal(t, sources.PhasePending, byName(got)["edge-new"].Phase)
	})
	t.Run("a cluster leaves when Rancher no longer lists it", func(t *testing.T) {
		f.remove("c-m-newcomer")
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"edge-k3s-01", "staging-eks", "prod-eu-west-renamed"}, names(got))
	})
}

// TestEveryStateIsListed lists clusters in every kind of Rancher state from
// the fake server: none is left out, each has its phase, and the state is
// never a reason not to render it.
func TestEveryStateIsListed(t *testing.T) {
	f := newFake(t, false)
	f.Generate(1) // c-m-00000000, active, established and healthy
	type want struct {
		id, state string
		phase     sources.Phase
	}
	wants := map[string]want{"cluster-00000000": {"c-m-00000000", "active", sources.PhaseReady}}
	for _, tc := range []struct {
		name    string
		state   string
		removed bool
		waiting string // the Waiting condition's status; "" drops it
		extra   map[string]string
		want    sources.Phase
	}{
		{name: "updating", state: "updating", waiting: "True", extra: map[string]string{"Updated": "Unknown"}, want: sources.PhaseDegraded},
		{name: "upgrading", state: "upgrading", waiting: "True", extra: map[string]string{"Upgraded": "Unknown"}, want: sources.PhaseDegraded},
		{name: "unavailable", state: "unavailable", waiting: "True", extra: map[string]string{"Connected": "False", "Ready": "False"},
			want: sources.PhaseDegraded},
		{name: "unavailable-never-up", state: "unavailable", waiting: "Unknown", extra: map[string]string{"Ready": "False"},
			want: sources.PhasePending},
		{name: "error", state: "error", waiting: "True", extra: map[string]string{"Ready": "False"}, want: sources.PhaseDegraded},
		{name: "removing", state: "removing", removed: true, waiting: "True", want: sources.PhaseLeaving},
		{name: "provisioning-new", state: "provisioning", waiting: "Unknown", extra: map[string]string{"Provisioned": "Unknown"},
			want: sources.PhasePending},
		{name: "provisioning-no-waiting", state: "provisioning", extra: map[string]string{"Provisioned": "Unknown"},
			want: sources.PhasePending},
		{name: "provisioning-established", state: "provisioning", waiting: "True", extra: map[string]string{"AgentDeployed": "Unknown"},
			want: sources.PhaseDegraded},
		{name: "active-disconnected", state: "active", waiting: "True", extra: map[string]string{"Connected": "False"},
			want: sources.PhaseDegraded},
		{name: "some-new-state", state: "hibernating", waiting: "True", want: sources.PhaseDegraded},
	} {
		f.edit("c-m-00000000", func(c map[string]any) {
			c["id"], c["name"], c["state"] = "c-m-"+tc.name, tc.name, tc.state
			if tc.removed {
				c["removed"] = "2026-08-21T10:00:00Z"
			}
			if tc.waiting == "" {
				dropCondition(c, "Waiting")
			} else {
				setCondition(c, "Waiting", tc.waiting)
			}
			for typ, status := range tc.extra {
				setCondition(c, typ, status)
			}
		})
		wants[tc.name] = want{"c-m-" + tc.name, tc.state, tc.want}
	}
	s := newTestSource(t, "rancher-a", config(t, f), testOptions{})
	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	require.Len(t, got, len(wants), "every cluster is listed: %v", names(got))
	for name, w := range wants {
		t.Run(name, func(t *testing.T) {
			c, ok := byName(got)[name]
			require.True(t, ok, "not listed")
			assert.Equal(t, w.state, c.State)
			assert.Equal(t, w.phase, c.Phase)
			assert.Equal(t, w.id, c.ID)
			assert.True(t, c.Ready, "the state is not a rendering problem: %s", c.NotReadyReason)
			require.NoError(t, c.Validate())
		})
	}
	require.NoError(t, testutil.CollectAndCompare(s.metrics.Clusters, strings.NewReader(`
# HELP argocd_cluster_discovery_rancher_clusters Clusters of the last complete listing, after the source's filters, by phase (pending, ready, degraded, leaving).
# TYPE argocd_cluster_discovery_rancher_clusters gauge
argocd_cluster_discovery_rancher_clusters{phase="degraded"} 7
argocd_cluster_discovery_rancher_clusters{phase="leaving"} 1
argocd_cluster_discovery_rancher_clusters{phase="pending"} 3
argocd_cluster_discovery_rancher_clusters{phase="ready"} 1
`)))
}

func TestACE(t *testing.T) {
	f := newFake(t, false)
	f.PutFixtureClusters()
	aceCA := ""
	f.edit("c-m-2x7kqz4b", func(c map[string]any) {
		aceCA = c["localClusterAuthEndpoint"].(map[string]any)["caCerts"].(string)
	})
	for _, tc := range []struct {
		name      string
		ace       ACEPolicy
		label     map[string]string // on staging-eks
		prodSrv   string
		prodCA    string
		eksReady  bool
		eksServer string
	}{
		{name: "off", ace: ACEOff, prodSrv: f.URL() + "/k8s/clusters/c-m-2x7kqz4b", prodCA: b64(f.CACerts()), eksReady: true},
		{name: "on", ace: ACEOn, prodSrv: "https://prod-eu-west.k8s.example.com", prodCA: b64(aceCA), eksReady: false},
		{name: "on, cluster opts out", ace: ACEOn, label: map[string]string{defaultACELabel: "false"},
			prodSrv: "https://prod-eu-west.k8s.example.com", prodCA: b64(aceCA), eksReady: true},
		{name: "auto: hosted EKS without an endpoint keeps the proxy", ace: ACEAuto,
			prodSrv: "https://prod-eu-west.k8s.example.com", prodCA: b64(aceCA), eksReady: true,
			eksServer: f.URL() + "/k8s/clusters/c-7qgnz"},
		{name: "off, cluster opts in: the owner's label cannot widen, the proxy", ace: ACEOff, label: map[string]string{defaultACELabel: "true"},
			prodSrv: f.URL() + "/k8s/clusters/c-m-2x7kqz4b", prodCA: b64(f.CACerts()), eksReady: true,
			eksServer: f.URL() + "/k8s/clusters/c-7qgnz"},
		{name: "auto, cluster opts in without an endpoint", ace: ACEAuto, label: map[string]string{defaultACELabel: "true"},
			prodSrv: "https://prod-eu-west.k8s.example.com", prodCA: b64(aceCA), eksReady: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.edit("c-7qgnz", func(c map[string]any) {
				l := c["labels"].(map[string]any)
				delete(l, defaultACELabel)
				for k, v := range tc.label {
					l[k] = v
				}
			})
			cfg := config(t, f)
			cfg.ACE, cfg.ACEAllowedHosts = tc.ace, []string{"*.k8s.example.com"}
			s := newTestSource(t, "rancher-a", cfg, testOptions{})
			got, err := s.Clusters(t.Context())
			require.NoError(t, err)
			prod, eks := byName(got)["prod-eu-west"], byName(got)["staging-eks"]
			assert.Equal(t, tc.prodSrv, prod.Server)
			assert.Equal(t, tc.prodCA, prod.CA.Data())
			assert.True(t, prod.Ready)
			assert.Equal(t, tc.eksReady, eks.Ready, eks.NotReadyReason)
			if tc.eksServer != "" {
				assert.Equal(t, tc.eksServer, eks.Server)
			}
			if !tc.eksReady {
				assert.Contains(t, eks.NotReadyReason, "authorized cluster endpoint")
			}
		})
	}
}

func TestTwoRancherServers(t *testing.T) {
	eu, us := newFake(t, false), newFake(t, false)
	eu.PutFixtureClusters()
	us.PutFixtureClusters() // the same ids and display names
	run := func(t *testing.T, prefixes [2]string) *inventory.Snapshot {
		var specs []inventory.SourceSpec
		for i, f := range []*fakeRancher{eu, us} {
			cfg := config(t, f)
			cfg.NamePrefix = prefixes[i]
			name := []string{"rancher-eu", "rancher-us"}[i]
			specs = append(specs, inventory.SourceSpec{Name: name, Provider: sources.ProviderRancher,
				Source: newTestSource(t, name, cfg, testOptions{}), Interval: time.Hour, Timeout: 10 * time.Second})
		}
		inv, err := inventory.New(specs, inventory.Options{})
		require.NoError(t, err)
		require.NoError(t, inv.RefreshAll(t.Context()))
		return inv.Snapshot()
	}
	t.Run("one hosted EKS cluster in both servers is served once", func(t *testing.T) {
		snap := run(t, [2]string{"eu-", "us-"})
		assert.Equal(t, []string{"eu-edge-k3s-01", "eu-prod-eu-west", "eu-staging-eks", "us-edge-k3s-01", "us-prod-eu-west"},
			snapNames(snap.Clusters))
		require.Len(t, snap.Duplicates, 1)
		assert.Equal(t, inventory.Duplicate{Name: "us-staging-eks", Source: "rancher-us", ID: "c-7qgnz",
			KeptName: "eu-staging-eks", KeptSource: "rancher-eu", Reason: "cloudID"}, snap.Duplicates[0])
	})
	t.Run("with a prefix per server", func(t *testing.T) {
		us.edit("c-7qgnz", func(c map[string]any) {
			c["eksConfig"].(map[string]any)["region"] = "us-east-1"
			c["eksStatus"].(map[string]any)["upstreamSpec"].(map[string]any)["region"] = "us-east-1"
		})
		snap := run(t, [2]string{"eu-", "us-"})
		assert.Equal(t, []string{"eu-edge-k3s-01", "eu-prod-eu-west", "eu-staging-eks", "us-edge-k3s-01", "us-prod-eu-west", "us-staging-eks"},
			snapNames(snap.Clusters))
		assert.Empty(t, snap.Conflicts)
		assert.Empty(t, snap.Duplicates)
		servers := map[string]bool{}
		for _, c := range snap.Clusters {
			servers[c.Server] = true
		}
		assert.Len(t, servers, 6, "same ids, different servers")
	})
	t.Run("without prefixes the names conflict", func(t *testing.T) {
		snap := run(t, [2]string{"", ""})
		assert.Empty(t, snap.Clusters)
		require.Len(t, snap.Conflicts, 3)
		assert.Equal(t, []string{"rancher-eu", "rancher-us"}, snap.Conflicts[0].Sources)
	})
}

func TestFilter(t *testing.T) {
	base := Cluster{ID: "c-abcde", Name: "prod-eu", State: "active", Labels: map[string]string{"env": "prod", "team": "payments"}}
	for _, tc := range []struct {
		name    string
		config  func(c *Config)
		cluster func(c *Cluster)
		want    string
	}{
		{name: "active", want: ""},
		{name: "unavailable is listed", cluster: func(c *Cluster) { c.State = "unavailable" }, want: ""},
		{name: "removing is listed", cluster: func(c *Cluster) { c.State, c.Removed = "removing", "2026-08-21T10:00:00Z" }, want: ""},
		{name: "an unknown state is listed", cluster: func(c *Cluster) { c.State = "" }, want: ""},
		{name: "local by id", cluster: func(c *Cluster) { c.ID = "local" }, want: skipLocal},
		{name: "internal", cluster: func(c *Cluster) { c.Internal = true }, want: skipLocal},
		{name: "local included", config: func(c *Config) { c.IncludeLocal = true },
			cluster: func(c *Cluster) { c.ID, c.Internal = "local", true }, want: ""},
		{name: "name regex matches", config: func(c *Config) { c.NameRegex = "^prod-" }, want: ""},
		{name: "name regex misses", config: func(c *Config) { c.NameRegex = "^dev-" }, want: skipName},
		{name: "name regex on the id without a name", config: func(c *Config) { c.NameRegex = "^c-" },
			cluster: func(c *Cluster) { c.Name = "" }, want: ""},
		{name: "exclude name", config: func(c *Config) { c.ExcludeNameRegex = "eu$" }, want: skipName},
		{name: "selector matches", config: func(c *Config) { c.LabelSelector = "env in (prod,staging),team" }, want: ""},
		{name: "selector misses", config: func(c *Config) { c.LabelSelector = "env=dev" }, want: skipLabels},
		{name: "exclude selector", config: func(c *Config) { c.ExcludeLabelSelector = "team=payments" }, want: skipLabels},
		{name: "exclude selector misses", config: func(c *Config) { c.ExcludeLabelSelector = "team=search" }, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{URL: server, Token: sources.SecretRef{File: "/token"}}
			if tc.config != nil {
				tc.config(&cfg)
			}
			cfg.Default()
			require.Empty(t, cfg.Validate(nil))
			f := newFilter(&cfg)
			c := base
			c.Labels = clone(base.Labels)
			if tc.cluster != nil {
				tc.cluster(&c)
			}
			assert.Equal(t, tc.want, f.skip(&c))
		})
	}
}
