package rancher

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writeToken writes a token file and returns its path.
func writeToken(t testing.TB, dir, token string) string {
	t.Helper()
	p := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(p, []byte(token+"\n"), 0o600))
	return p
}

// config is a source configuration for f with a token file.
func config(t testing.TB, f *fakeRancher) Config {
	return Config{URL: f.srv.URL, Token: sources.SecretRef{File: writeToken(t, t.TempDir(), testToken)}}
}

func newSource(t testing.TB, name string, cfg Config, opts Options) *Source {
	t.Helper()
	s, err := New(name, cfg, opts)
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

// errCount returns the failed listings of s counted under kind.
func errCount(t testing.TB, s *Source, kind string) float64 {
	t.Helper()
	return testutil.ToFloat64(s.metrics.errors.WithLabelValues(kind))
}

func TestFixturePages(t *testing.T) {
	f := newFake(t, false)
	f.useFixturePages()
	s := newSource(t, "rancher-a", config(t, f), Options{})

	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	// local is Rancher's own: left out. c-5tbxq (edge-k3s-01) is unavailable
	// and listed.
	assert.ElementsMatch(t, []string{"edge-k3s-01", "staging-eks", "prod-eu-west"}, names(got))

	reqs := f.seen()
	assert.Equal(t, map[string]int{"/v3": 1, "/v3/schemas": 1, "/v3/settings/cacerts": 1, "/v3/clusters": 2}, paths(reqs))
	for _, r := range reqs {
		if r.Path == "/v3/clusters" && !strings.Contains(r.Query, "marker") {
			assert.Equal(t, "internal=false&limit=1000", r.Query, "server-side filters: never the state")
		}
		if r.Path != "/v3/settings/cacerts" {
			assert.Equal(t, "Bearer "+testToken, r.Auth)
		}
	}

	prod := byName(got)["prod-eu-west"]
	assert.Equal(t, f.srv.URL+"/k8s/clusters/c-m-2x7kqz4b", prod.Server, "auth proxy, never apiEndpoint")
	assert.Equal(t, b64(f.cacerts), prod.CA.Data())
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
	assert.Equal(t, f.srv.URL+"/k8s/clusters/c-7qgnz", eks.Server, "the proxy, not the EKS apiEndpoint")
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
	f.generate(25)
	cfg := config(t, f)
	cfg.PageLimit = 10
	s := newSource(t, "rancher-a", cfg, Options{})
	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	require.Len(t, got, 25)
	assert.Equal(t, 3, paths(f.seen())["/v3/clusters"])
	assert.Equal(t, 3.0, testutil.ToFloat64(s.metrics.pages))
	assert.Equal(t, 25.0, testutil.ToFloat64(s.metrics.clusters.WithLabelValues("active")))
	seen := map[string]bool{}
	for _, c := range got {
		assert.False(t, seen[c.Name], c.Name)
		seen[c.Name] = true
	}
	assert.True(t, seen["cluster-00000024"])
}

func TestTLS(t *testing.T) {
	t.Run("caFile trusts the fake and is the caData", func(t *testing.T) {
		f := newFake(t, true)
		f.useFixturePages()
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
		cfg := config(t, f)
		cfg.CAFile = filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, os.WriteFile(cfg.CAFile, certPEM, 0o600))
		s := newSource(t, "rancher-a", cfg, Options{})
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		require.Len(t, got, 3)
		for _, c := range got {
			assert.Equal(t, base64.StdEncoding.EncodeToString(certPEM), c.CA.Data())
			assert.True(t, strings.HasPrefix(c.Server, "https://127.0.0.1:"), c.Server)
		}
		assert.Zero(t, paths(f.seen())["/v3/settings/cacerts"], "caFile replaces the cacerts setting")
	})
	t.Run("without caFile the cacerts setting is the caData", func(t *testing.T) {
		f := newFake(t, true)
		f.useFixturePages()
		s := newSource(t, "rancher-a", config(t, f), Options{HTTPClient: f.srv.Client()})
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		require.Len(t, got, 3)
		assert.Equal(t, b64(f.cacerts), got[0].CA.Data())
	})
	t.Run("empty cacerts gives no caData", func(t *testing.T) {
		f := newFake(t, true)
		f.useFixturePages()
		f.setCACerts("")
		s := newSource(t, "rancher-a", config(t, f), Options{HTTPClient: f.srv.Client()})
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		for _, c := range got {
			assert.Empty(t, c.CA.Data())
			assert.True(t, c.Ready)
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		f := newFake(t, true)
		f.useFixturePages()
		s := newSource(t, "rancher-a", config(t, f), Options{})
		_, err := s.Clusters(t.Context())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "certificate")
		assert.Equal(t, 1.0, errCount(t, s, kindTLS))
	})
}

func TestBadCA(t *testing.T) {
	f := newFake(t, false)
	cfg := config(t, f)
	cfg.CAFile = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(cfg.CAFile, []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"), 0o600))
	_, err := New("rancher-a", cfg, Options{})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "caFile: "), err.Error())

	require.NoError(t, os.WriteFile(cfg.CAFile, []byte("garbage"), 0o600))
	_, err = New("rancher-a", cfg, Options{})
	require.ErrorContains(t, err, "no PEM certificate")

	// A CA file that breaks after start fails the listing.
	f.useFixturePages()
	cfg.CAFile = ""
	s := newSource(t, "rancher-a", cfg, Options{})
	s.cfg.CAFile = filepath.Join(t.TempDir(), "missing.pem")
	_, err = s.Clusters(t.Context())
	require.ErrorContains(t, err, "caFile: ")
	assert.Equal(t, 1.0, errCount(t, s, kindCA))

	// A cacerts setting that is not PEM makes proxied clusters not ready.
	s.cfg.CAFile = ""
	f.setCACerts("not a pem")
	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	for _, c := range got {
		assert.False(t, c.Ready)
		assert.Contains(t, c.NotReadyReason, "cacerts")
	}
}

func TestPageErrorKeepsPreviousListing(t *testing.T) {
	f := newFake(t, false)
	f.addFixtureClusters()
	cfg := config(t, f)
	cfg.PageLimit = 1
	s := newSource(t, "rancher-a", cfg, Options{})
	inv, err := inventory.New([]inventory.SourceSpec{{
		Name: "rancher-a", Provider: sources.ProviderRancher, Source: s, Interval: time.Hour, Timeout: 10 * time.Second,
	}}, inventory.Options{})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(t.Context()))
	before := inv.Snapshot()
	require.Len(t, before.Clusters, 3)

	f.setHook(func(w http.ResponseWriter, _ *http.Request, page int) bool {
		if page != 2 {
			return false
		}
		http.Error(w, `{"type":"error","status":"500","message":"internal boom at db"}`, http.StatusInternalServerError)
		return true
	})
	err = inv.RefreshAll(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "list clusters: get /v3/clusters page 2: rancher answered 500 Internal Server Error")
	assert.NotContains(t, err.Error(), "boom")
	assert.Equal(t, 1.0, errCount(t, s, kindHTTP))

	after := inv.Snapshot()
	assert.Equal(t, before.Clusters, after.Clusters, "the last complete listing is kept")
	st, _ := after.Source("rancher-a")
	assert.True(t, st.Stale)

	// Directly: an error comes with no clusters at all.
	got, err := s.Clusters(t.Context())
	require.Error(t, err)
	assert.Nil(t, got)
}

func TestTokenRejected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		env    bool
	}{
		{name: "401 token file", status: http.StatusUnauthorized},
		{name: "403 token file", status: http.StatusForbidden},
		{name: "401 token env", status: http.StatusUnauthorized, env: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, false)
			f.useFixturePages()
			f.setTokens("token-other:xyz")
			cfg := config(t, f)
			if tc.env {
				t.Setenv("RANCHER_TEST_TOKEN", testToken)
				cfg.Token = sources.SecretRef{Env: "RANCHER_TEST_TOKEN"}
			}
			if tc.status == http.StatusForbidden {
				f.setTokens(testToken)
				f.setHook(func(w http.ResponseWriter, _ *http.Request, _ int) bool {
					w.WriteHeader(http.StatusForbidden)
					_, _ = w.Write([]byte(`{"type":"error","status":"403","message":"clusters.management.cattle.io is forbidden"}`))
					return true
				})
			}
			s := newSource(t, "rancher-a", cfg, Options{})
			got, err := s.Clusters(t.Context())
			require.Error(t, err)
			assert.Nil(t, got)
			msg := err.Error()
			assert.Contains(t, msg, f.srv.URL)
			assert.Contains(t, msg, cfg.Token.String())
			assert.Contains(t, msg, fmt.Sprint(tc.status))
			assert.NotContains(t, msg, testToken)
			assert.NotContains(t, msg, "sEcReT")
			assert.NotContains(t, msg, "must authenticate")
			assert.Equal(t, 1.0, errCount(t, s, kindAuth))
		})
	}
	t.Run("missing token file", func(t *testing.T) {
		f := newFake(t, false)
		cfg := config(t, f)
		cfg.Token.File = filepath.Join(t.TempDir(), "nope")
		s := newSource(t, "rancher-a", cfg, Options{})
		_, err := s.Clusters(t.Context())
		require.ErrorContains(t, err, "token file:"+cfg.Token.File+": no such file or directory")
		assert.Equal(t, 1.0, errCount(t, s, kindToken))
		assert.Empty(t, f.seen(), "nothing is sent without a token")
	})
}

func TestMalformedAnswers(t *testing.T) {
	const marker = "BODY-MARKER-c-9xyz"
	for _, tc := range []struct {
		name, body, want, kind string
	}{
		{name: "truncated JSON", body: `{"type":"collection","data":[{"id":"c-1","name":"` + marker + `"`, want: "malformed JSON", kind: kindDecode},
		{name: "not JSON", body: "<html>" + marker + "</html>", want: "malformed JSON", kind: kindDecode},
		{name: "wrong type", body: `{"type":"collection","data":[{"id":"c-1","labels":"` + marker + `"}]}`, want: "unexpected JSON", kind: kindDecode},
		{name: "not a collection", body: `{"message":"` + marker + `"}`, want: "not a collection", kind: kindDecode},
		{name: "cluster without id", body: `{"type":"collection","data":[{"name":"` + marker + `"}]}`, want: "no id", kind: kindDecode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, false)
			f.useFixturePages()
			f.setHook(func(w http.ResponseWriter, _ *http.Request, page int) bool {
				if page != 2 {
					return false
				}
				_, _ = w.Write([]byte(tc.body))
				return true
			})
			s := newSource(t, "rancher-a", config(t, f), Options{})
			_, err := s.Clusters(t.Context())
			require.Error(t, err)
			assert.Contains(t, err.Error(), "page 2")
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), marker)
			assert.Less(t, len(err.Error()), 200)
			assert.Equal(t, 1.0, errCount(t, s, tc.kind))
		})
	}
}

func TestPaginationLoops(t *testing.T) {
	f := newFake(t, false)
	f.generate(3)
	cfg := config(t, f)
	cfg.PageLimit = 1
	f.setHook(func(w http.ResponseWriter, r *http.Request, page int) bool {
		if page != 2 {
			return false
		}
		// Page 2 links back to itself, as norman does for an unknown marker.
		fmt.Fprintf(w, `{"type":"collection","pagination":{"next":%q},"data":[{"id":"c-m-00000001","state":"active"}]}`, f.srv.URL+r.URL.RequestURI())
		return true
	})
	s := newSource(t, "rancher-a", cfg, Options{})
	_, err := s.Clusters(t.Context())
	require.ErrorContains(t, err, "earlier page")
	assert.Equal(t, 1.0, errCount(t, s, kindPagination))

	f.setHook(func(w http.ResponseWriter, r *http.Request, page int) bool {
		if page != 2 {
			return false
		}
		fmt.Fprintf(w, `{"type":"collection","data":[{"id":"c-m-00000000","state":"active"}]}`)
		return true
	})
	_, err = s.Clusters(t.Context())
	require.ErrorContains(t, err, "c-m-00000000 listed twice")
}

func TestClustersComeAndGo(t *testing.T) {
	f := newFake(t, false)
	f.addFixtureClusters()
	s := newSource(t, "rancher-a", config(t, f), Options{})
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
		assert.Equal(t, f.srv.URL+"/k8s/clusters/c-m-newcomer", byName(got)["edge-new"].Server)
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
	f.generate(1) // c-m-00000000, active, established and healthy
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
	s := newSource(t, "rancher-a", config(t, f), Options{})
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
	require.NoError(t, testutil.CollectAndCompare(s.metrics.listed, strings.NewReader(`
# HELP argocd_cluster_discovery_rancher_listed_clusters Clusters this source listed in the last complete listing, after its filters, by phase (pending, ready, degraded, leaving).
# TYPE argocd_cluster_discovery_rancher_listed_clusters gauge
argocd_cluster_discovery_rancher_listed_clusters{phase="degraded"} 7
argocd_cluster_discovery_rancher_listed_clusters{phase="leaving"} 1
argocd_cluster_discovery_rancher_listed_clusters{phase="pending"} 3
argocd_cluster_discovery_rancher_listed_clusters{phase="ready"} 1
`)))
}

func TestACE(t *testing.T) {
	f := newFake(t, false)
	f.addFixtureClusters()
	aceCA := ""
	f.edit("c-m-2x7kqz4b", func(c map[string]any) {
		aceCA = c["localClusterAuthEndpoint"].(map[string]any)["caCerts"].(string)
	})
	for _, tc := range []struct {
		name      string
		ace       bool
		label     map[string]string // on staging-eks
		prodSrv   string
		prodCA    string
		eksReady  bool
		eksServer string
	}{
		{name: "off", prodSrv: f.srv.URL + "/k8s/clusters/c-m-2x7kqz4b", prodCA: b64(f.cacerts), eksReady: true},
		{name: "on", ace: true, prodSrv: "https://prod-eu-west.k8s.example.com", prodCA: b64(aceCA), eksReady: false},
		{name: "on, cluster opts out", ace: true, label: map[string]string{DefaultACELabel: "false"},
			prodSrv: "https://prod-eu-west.k8s.example.com", prodCA: b64(aceCA), eksReady: true},
		{name: "off, cluster opts in without an endpoint", label: map[string]string{DefaultACELabel: "true"},
			prodSrv: f.srv.URL + "/k8s/clusters/c-m-2x7kqz4b", prodCA: b64(f.cacerts), eksReady: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.edit("c-7qgnz", func(c map[string]any) {
				l := c["labels"].(map[string]any)
				delete(l, DefaultACELabel)
				for k, v := range tc.label {
					l[k] = v
				}
			})
			cfg := config(t, f)
			cfg.ACE = tc.ace
			s := newSource(t, "rancher-a", cfg, Options{})
			got, err := s.Clusters(t.Context())
			require.NoError(t, err)
			prod, eks := byName(got)["prod-eu-west"], byName(got)["staging-eks"]
			assert.Equal(t, tc.prodSrv, prod.Server)
			assert.Equal(t, tc.prodCA, prod.CA.Data())
			assert.True(t, prod.Ready)
			assert.Equal(t, tc.eksReady, eks.Ready, eks.NotReadyReason)
			if !tc.eksReady {
				assert.Contains(t, eks.NotReadyReason, "authorized cluster endpoint")
			}
		})
	}
}

func TestTwoRancherServers(t *testing.T) {
	eu, us := newFake(t, false), newFake(t, false)
	eu.addFixtureClusters()
	us.addFixtureClusters() // the same ids and display names
	run := func(t *testing.T, prefixes [2]string) *inventory.Snapshot {
		var specs []inventory.SourceSpec
		for i, f := range []*fakeRancher{eu, us} {
			cfg := config(t, f)
			cfg.NamePrefix = prefixes[i]
			name := []string{"rancher-eu", "rancher-us"}[i]
			specs = append(specs, inventory.SourceSpec{Name: name, Provider: sources.ProviderRancher,
				Source: newSource(t, name, cfg, Options{}), Interval: time.Hour, Timeout: 10 * time.Second})
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
		assert.Equal(t, inventory.Duplicate{Name: "us-staging-eks", Source: "rancher-us",
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

func TestTokenRotation(t *testing.T) {
	f := newFake(t, false)
	f.useFixturePages()
	cfg := config(t, f)
	s := newSource(t, "rancher-a", cfg, Options{})
	_, err := s.Clusters(t.Context())
	require.NoError(t, err)
	f.seen()

	const rotated = "token-fghij:rotatedrotatedrotatedrotatedrotatedrotatedrotated"
	require.NoError(t, os.WriteFile(cfg.Token.File, []byte(rotated+"\n"), 0o600))
	f.setTokens(rotated)
	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	assert.Len(t, got, 3)
	reqs := f.seen()
	assert.Equal(t, map[string]int{"/v3": 1, "/v3/schemas": 1, "/v3/settings/cacerts": 1, "/v3/clusters": 2}, paths(reqs),
		"the client is rebuilt for the new token")
	for _, r := range reqs {
		if r.Path != "/v3/settings/cacerts" {
			assert.Equal(t, "Bearer "+rotated, r.Auth, r.Path)
		}
	}
}

func TestCancelWhileRancherHangs(t *testing.T) {
	f := newFake(t, false)
	f.useFixturePages()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var hung atomic.Bool
	f.setHook(func(w http.ResponseWriter, r *http.Request, page int) bool {
		if page != 2 {
			return false
		}
		hung.Store(true)
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return true
	})
	cfg := config(t, f)
	cfg.RequestTimeout = "1m"
	s := newSource(t, "rancher-a", cfg, Options{})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			for !hung.Load() {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
		}()
		start := time.Now()
		got, err := s.Clusters(ctx)
		require.Error(t, err)
		assert.Nil(t, got)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Less(t, time.Since(start), 5*time.Second)
		assert.Equal(t, 1.0, errCount(t, s, kindCanceled))
	})
	t.Run("listing deadline", func(t *testing.T) {
		hung.Store(false)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := s.Clusters(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("request timeout", func(t *testing.T) {
		s.timeout = 200 * time.Millisecond
		start := time.Now()
		_, err := s.Clusters(t.Context())
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "no answer within requestTimeout 200ms")
		assert.Less(t, time.Since(start), 5*time.Second)
		assert.Equal(t, 2.0, errCount(t, s, kindTimeout))
	})
}

func TestLinksStayOnTheConfiguredServer(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	t.Cleanup(other.Close)

	t.Run("next and schema links on another host are requested on the configured one", func(t *testing.T) {
		f := newFake(t, false)
		f.setLinkBase(other.URL)
		f.useFixturePages() // next: <other>/v3/clusters?limit=2&marker=c-m-2x7kqz4b
		s := newSource(t, "rancher-a", config(t, f), Options{})
		got, err := s.Clusters(t.Context())
		require.NoError(t, err)
		assert.Len(t, got, 3)
		assert.Zero(t, elsewhere.Load(), "no request, so no token, went to the other host")
		assert.Equal(t, 2, paths(f.seen())["/v3/clusters"])
	})
	t.Run("a plain http link from an https server is requested over https", func(t *testing.T) {
		f := newFake(t, true)
		f.setLinkBase(strings.Replace(f.srv.URL, "https://", "http://", 1))
		f.useFixturePages()
		s := newSource(t, "rancher-a", config(t, f), Options{HTTPClient: f.srv.Client()})
		_, err := s.Clusters(t.Context())
		require.NoError(t, err)
	})
	t.Run("a redirect to another host is refused", func(t *testing.T) {
		f := newFake(t, false)
		f.useFixturePages()
		f.setHook(func(w http.ResponseWriter, r *http.Request, page int) bool {
			if page != 2 {
				return false
			}
			http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
			return true
		})
		s := newSource(t, "rancher-a", config(t, f), Options{})
		_, err := s.Clusters(t.Context())
		require.ErrorContains(t, err, "refused to send a request outside the configured rancher url")
		assert.Zero(t, elsewhere.Load())
		assert.Equal(t, 1.0, errCount(t, s, kindOrigin))
	})
}

// TestRequestsPerListing checks that a listing costs one request per page
// plus the cacerts setting (and /v3 and its schemas when the client is
// built), nothing per cluster. BenchmarkListClusters reports the same for
// 10,000 clusters.
func TestRequestsPerListing(t *testing.T) {
	for _, tc := range []struct{ n, limit int }{{25, 10}, {30, 10}, {7, 1000}, {0, 1000}} {
		t.Run(fmt.Sprintf("%d clusters by %d", tc.n, tc.limit), func(t *testing.T) {
			f := newFake(t, false)
			f.generate(tc.n)
			cfg := config(t, f)
			cfg.PageLimit = tc.limit
			s := newSource(t, "rancher-a", cfg, Options{})
			pages := max(1, (tc.n+tc.limit-1)/tc.limit) // an empty list is one page

			got, err := s.Clusters(t.Context())
			require.NoError(t, err)
			require.Len(t, got, tc.n)
			assert.Equal(t, map[string]int{"/v3": 1, "/v3/schemas": 1, "/v3/settings/cacerts": 1, "/v3/clusters": pages}, paths(f.seen()))

			got, err = s.Clusters(t.Context())
			require.NoError(t, err)
			require.Len(t, got, tc.n)
			assert.Equal(t, map[string]int{"/v3/settings/cacerts": 1, "/v3/clusters": pages}, paths(f.seen()),
				"the client is reused while the token is unchanged")
		})
	}
}

func TestMetricsOfTwoSources(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFake(t, false)
	f.useFixturePages()
	for _, name := range []string{"a", "b"} {
		newSource(t, name, config(t, f), Options{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"source": name}, reg)})
	}
	s := newSource(t, "c", config(t, f), Options{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"source": "c"}, reg)})
	_, err := s.Clusters(t.Context())
	require.NoError(t, err)
	n, err := testutil.GatherAndCount(reg, "argocd_cluster_discovery_rancher_pages_fetched_total")
	require.NoError(t, err)
	assert.Equal(t, 3, n, "one series per source")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP argocd_cluster_discovery_rancher_clusters Clusters Rancher returned in the last complete listing, by Rancher state, before this source's filters.
# TYPE argocd_cluster_discovery_rancher_clusters gauge
argocd_cluster_discovery_rancher_clusters{source="c",state="active"} 3
argocd_cluster_discovery_rancher_clusters{source="c",state="unavailable"} 1
# HELP argocd_cluster_discovery_rancher_listed_clusters Clusters this source listed in the last complete listing, after its filters, by phase (pending, ready, degraded, leaving).
# TYPE argocd_cluster_discovery_rancher_listed_clusters gauge
argocd_cluster_discovery_rancher_listed_clusters{phase="degraded",source="c"} 1
argocd_cluster_discovery_rancher_listed_clusters{phase="leaving",source="c"} 0
argocd_cluster_discovery_rancher_listed_clusters{phase="pending",source="c"} 0
argocd_cluster_discovery_rancher_listed_clusters{phase="ready",source="c"} 2
`), "argocd_cluster_discovery_rancher_clusters", "argocd_cluster_discovery_rancher_listed_clusters"))
	count, err := testutil.GatherAndCount(reg, "argocd_cluster_discovery_rancher_errors_total")
	require.NoError(t, err)
	assert.Equal(t, 3*len(errorKinds()), count, "every kind exists from the start")

	_, err = New("c", config(t, f), Options{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"source": "c"}, reg)})
	require.ErrorContains(t, err, "register metrics")
}

func TestNoPartialResult(t *testing.T) {
	f := newFake(t, false)
	f.useFixturePages()
	f.setHook(func(w http.ResponseWriter, _ *http.Request, page int) bool {
		if page == 2 {
			panic(http.ErrAbortHandler) // the connection drops mid-listing
		}
		return false
	})
	s := newSource(t, "rancher-a", config(t, f), Options{})
	got, err := s.Clusters(t.Context())
	require.Error(t, err)
	assert.Nil(t, got)
	assert.Equal(t, 1.0, errCount(t, s, kindNetwork))
}
