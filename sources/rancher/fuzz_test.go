package rancher

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/fuzzseed"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// sourcePhases are the phases a source sets (absent is the inventory's).
var sourcePhases = []sources.Phase{sources.PhasePending, sources.PhaseReady, sources.PhaseDegraded, sources.PhaseLeaving}

// ownLabels are the keys under the reserved prefix that the mapper sets.
var ownLabels = []string{
	LabelClusterID, LabelDriver, LabelProvider, LabelEndpoint, LabelEKSName, LabelEKSRegion, LabelEKSAccount,
	LabelAKSName, LabelAKSResourceGroup, LabelAKSLocation,
}

// FuzzClusterCollection decodes any page of GET /v3/clusters as norman
// does (encoding/json into the collection) and runs the filter and the
// mapping of every cluster with an id, with two configurations (the
// defaults with Rancher's CA; ACE for every cluster with a name prefix and
// default scope) and three CA outcomes (none, a PEM, a problem):
//   - nothing panics; the mapping is deterministic;
//   - a mapped cluster is a Rancher cluster of the source, named prefix +
//     display name, whose server is always valid and in normal form (even
//     when not ready), and whose auth is the configured token reference:
//     a reference, never a token value;
//   - keys under the source's reserved prefix are only its own, with valid
//     label values; a cluster cannot fake them;
//   - every cluster has its id and a phase a source sets (never absent,
//     never empty), leaving when it is being deleted; ready (renderable)
//     means no reason, not ready always has one, whatever the state;
//   - the conditions a listing keeps (keepConditions) give the same phase
//     as all of them;
//   - caData is empty or base64 PEM; namespaces are namespace names, and
//     an annotation that cannot be read makes the cluster not ready rather
//     than "every namespace".
//
// Run it with: go test ./sources/rancher -run '^$' -fuzz '^FuzzClusterCollection$' -fuzztime 1m
func FuzzClusterCollection(f *testing.F) {
	fuzzseed.Add(f, "testdata/fixtures/rancher/rancher-clusters-page1.json", "testdata/fixtures/rancher/rancher-clusters-page2.json")
	type setup struct {
		cfg    Config
		mapper *mapper
		filter *filter
	}
	var setups []setup
	for _, change := range []func(*Config){
		func(*Config) {},
		func(c *Config) {
			c.ACE, c.NamePrefix, c.Tenant, c.Project, c.Namespaces = ACEOn, "eu-", "platform", "platform", []string{"default"}
			c.ACEAllowedHosts = []string{"*.example.com"}
			c.IncludeLocal = true
			c.LabelSelector, c.ExcludeNameRegex = "!legacy", "^tmp-"
		},
	} {
		c := Config{URL: "https://rancher.example.com", Token: sources.SecretRef{File: "/var/run/rancher/token"}}
		change(&c)
		c.Default()
		if errs := c.Validate(nil); len(errs) > 0 {
			f.Fatal(errs.ToAggregate())
		}
		setups = append(setups, setup{cfg: c, mapper: newMapper("rancher-a", c.URL, c), filter: newFilter(&c)})
	}
	cas := []rancherCA{{}, newRancherCA(rancherCAPEM), {Problem: "the cacerts setting is not PEM"}}
	f.Fuzz(func(t *testing.T, page []byte) {
		var col clusterCollection
		if json.Unmarshal(page, &col) != nil {
			return
		}

		for i := range col.Data {
			c := &col.Data[i]
			if c.ID == "" {
				continue // the listing fails on a cluster without id
			}
			for _, s := range setups {
				_ = s.filter.skip(c)
				for _, ca := range cas {
					got := s.mapper.toCluster(c, ca, nil)
					if again := s.mapper.toCluster(c, ca, nil); !reflect.DeepEqual(got, again) {
						t.Fatalf("mapping cluster %s twice differs", c.ID)
					}
					checkMapped(t, &s.cfg, c, &got)
					if p := phase(c.State, c.Removed != "", keepConditions(c.Conditions)); p != got.Phase {
						t.Fatalf("cluster %s: phase %q from the kept conditions, %q from all", c.ID, p, got.Phase)
					}
				}
			}
		}
	})
}

func checkMapped(t *testing.T, cfg *Config, in *Cluster, c *sources.Cluster) {
	t.Helper()
	if c.Provider != sources.ProviderRancher || c.Source != "rancher-a" || c.Name != cfg.NamePrefix+in.displayName() {
		t.Fatalf("identity: provider %q, source %q, name %q", c.Provider, c.Source, c.Name)
	}
	if srv, err := sources.NormalizeServer(c.Server); err != nil || srv != c.Server {
		t.Fatalf("cluster %s: server %q not valid and normal (%v)", in.ID, c.Server, err)
	}
	want := cfg.Token // the listing token, shared
	if c.Labels[LabelEndpoint] == EndpointACE || cfg.ClusterTokens == ClusterTokensPerCluster {
		want = sources.SecretRef{Issued: &sources.IssuedToken{Source: c.Source, Cluster: in.ID}}
	}
	if c.Auth.Kind != sources.AuthBearerToken || c.Auth.TokenRef == nil || !reflect.DeepEqual(*c.Auth.TokenRef, want) ||
		c.Auth.AWS != nil || c.Auth.Exec != nil {
		t.Fatalf("auth %+v is not the token reference %s", c.Auth, want.String())
	}
	for _, m := range []map[string]string{c.Labels, c.Annotations} {
		for k, v := range m {
			if !strings.HasPrefix(k, reservedPrefix) {
				continue
			}
			if !slices.Contains(ownLabels, k) {
				t.Fatalf("key %s under the reserved prefix came from Rancher", k)
			}
			if _, isLabel := c.Labels[k]; isLabel && len(validation.IsValidLabelValue(v)) > 0 {
				t.Fatalf("label %s has invalid value %q", k, v)
			}
		}
	}
	if c.Labels[LabelEndpoint] != EndpointProxy && c.Labels[LabelEndpoint] != EndpointACE {
		t.Fatalf("endpoint label %q", c.Labels[LabelEndpoint])
	}
	if c.ID != in.ID {
		t.Fatalf("id %q, want the rancher id %q", c.ID, in.ID)
	}
	if !slices.Contains(sourcePhases, c.Phase) {
		t.Fatalf("state %q: phase %q", in.State, c.Phase)
	}
	if (in.Removed != "" || strings.EqualFold(strings.TrimSpace(in.State), "removing")) != (c.Phase == sources.PhaseLeaving) {
		t.Fatalf("state %q, removed %q: phase %q", in.State, in.Removed, c.Phase)
	}
	if c.Ready {
		if c.NotReadyReason != "" {
			t.Fatalf("ready with reason %q", c.NotReadyReason)
		}
	} else if c.NotReadyReason == "" {
		t.Fatal("not ready without a reason")
	}
	if c.CA.Data() != "" {
		if err := sources.ValidateCAData(c.CA.Data()); err != nil {
			t.Fatalf("caData invalid: %v", err)
		}
		if _, err := base64.StdEncoding.DecodeString(c.CA.Data()); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range c.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			t.Fatalf("namespace %q: %v", ns, errs)
		}
	}
	if _, ok := in.Annotations[cfg.NamespacesAnnotation]; ok && len(c.Namespaces) == 0 && c.Ready {
		t.Fatalf("namespaces annotation %q became every namespace", in.Annotations[cfg.NamespacesAnnotation])
	}
}
