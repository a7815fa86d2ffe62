package aro

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redhatopenshift/armredhatopenshift"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/fuzzseed"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
)

// FuzzOpenShiftCluster decodes any JSON with the SDK's
// OpenShiftCluster.UnmarshalJSON, as the list pager does, and maps it with
// two configurations (the defaults with the cluster bound to a token; a
// name prefix and template over tags, a CA for every custom domain, a
// proxy for private clusters, no token bound):
//   - nothing panics; the mapping is deterministic;
//   - a listed cluster has the phase phaseOf gives its state (pending,
//     ready, degraded or leaving, never absent or empty) and its
//     lower-cased resource id as ID;
//   - its name is a DNS label (or, not ready, its ARM name), its labels
//     are valid Kubernetes labels, its namespaces namespace names;
//   - ready means a server in normal form, https, without a trailing
//     slash, bearer token auth referencing the bound Secret's token key,
//     and a CA exactly when the host is not under a managed domain; not
//     ready always has a reason and no credential reference;
//   - the mapping does not depend on the cluster's secrets (pull secret,
//     service principal client secret), which the resource provider
//     blanks but a malformed answer could carry: none reaches the model.
//
// Its seeds are the clusters of the upstream-shaped fixture pages.
//
// Run it with: go test ./sources/aro -run '^$' -fuzz '^FuzzOpenShiftCluster$' -fuzztime 1m
func FuzzOpenShiftCluster(f *testing.F) {
	for _, name := range []string{"openshift-clusters-list.json", "openshift-clusters-list-page2.json"} {
		var page struct{ Value []json.RawMessage }
		raw, err := os.ReadFile(filepath.Join(fuzzseed.Root(f), "testdata", "fixtures", "aro", name))
		if err != nil || json.Unmarshal(raw, &page) != nil || len(page.Value) == 0 {
			f.Fatalf("fixture %s: %v", name, err)
		}
		for _, oc := range page.Value {
			f.Add([]byte(oc))
		}
	}
	f.Add([]byte(`{"id":"/subscriptions/` + subA + `/resourceGroups/r/providers/Microsoft.RedHatOpenShift/openShiftClusters/` +
		strings.Repeat("a_(.)", 18) + `","properties":{"provisioningState":"Failed","apiserverProfile":{"url":"https://api.x.example.com:6443/"}}}`))
	type variant struct {
		m       *mapper
		listing func(id string) *listing
	}
	var variants []variant
	for i, cfg := range []Config{{}, {
		NamePrefix: "aro-", NameTemplate: `{{.ResourceGroup}}-{{.Name}}-{{index .Tags "env"}}`,
		DefaultCA:        CARef{CAData: base64.StdEncoding.EncodeToString(testCAPEM(f))},
		PrivateEndpoints: PrivateEndpoints{ProxyURL: "socks5://proxy.internal:1080"},
		ExcludeTags:      map[string]string{"legacy": "*"}, IgnoreTags: []string{"cost center"},
	}} {
		cfg.Default()
		if errs := cfg.Validate(field.NewPath("aro")); len(errs) > 0 {
			f.Fatal(errs)
		}
		m, err := newMapper(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			f.Fatal(err)
		}
		tr := loadTrust(&cfg)
		if err := tr.err(); err != nil {
			f.Fatal(err)
		}
		bound := i == 0
		variants = append(variants, variant{m: m, listing: func(id string) *listing {
			b := tokenSecrets{}
			if bound {
				b = b.bind(id, "token-secret")
			}
			return &listing{bindings: b, trust: tr}
		}})
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var oc armredhatopenshift.OpenShiftCluster
		if oc.UnmarshalJSON(raw) != nil {
			return // the pager fails the page, and so the listing
		}
		for _, v := range variants {
			id := ""
			if oc.ID != nil {
				id = *oc.ID
			}
			got, err := v.m.toCluster(subA, &oc, v.listing(id))
			if err != nil {
				continue
			}
			again, _ := v.m.toCluster(subA, &oc, v.listing(id))
			if !reflect.DeepEqual(got, again) {
				t.Fatalf("mapping the same cluster twice differs")
			}
			withoutSecrets, err := v.m.toCluster(subA, withoutSecrets(&oc), v.listing(id))
			if err != nil || !reflect.DeepEqual(got, withoutSecrets) {
				t.Fatalf("the mapped cluster depends on the cluster's secrets (error %v)", err)
			}
			if got.skip == "" {
				checkMapped(t, v.m, &got, &oc)
			}
		}
	})
}

// withoutSecrets is a copy of oc without its pull secret and client
// secret.
func withoutSecrets(oc *armredhatopenshift.OpenShiftCluster) *armredhatopenshift.OpenShiftCluster {
	out := *oc
	if oc.Properties == nil {
		return &out
	}
	p := *oc.Properties
	if p.ClusterProfile != nil {
		cp := *p.ClusterProfile
		cp.PullSecret = nil
		p.ClusterProfile = &cp
	}
	if p.ServicePrincipalProfile != nil {
		sp := *p.ServicePrincipalProfile
		sp.ClientSecret = nil
		p.ServicePrincipalProfile = &sp
	}
	out.Properties = &p
	return &out
}

func checkMapped(t *testing.T, m *mapper, got *mapped, oc *armredhatopenshift.OpenShiftCluster) {
	t.Helper()
	c := &got.cluster
	if c.Provider != sources.ProviderARO || c.Account != subA || c.CloudID != "" || c.KubernetesVersion != "" {
		t.Fatalf("identity: provider %q, account %q, cloud id %q, kubernetes version %q", c.Provider, c.Account, c.CloudID, c.KubernetesVersion)
	}
	if c.Name == "" {
		t.Fatal("no name")
	}
	if c.Ready && len(validation.IsDNS1123Label(c.Name)) > 0 {
		t.Fatalf("name %q is no DNS label", c.Name)
	}
	p := oc.Properties
	hasURL := p.ApiserverProfile != nil && azurearm.Deref(p.ApiserverProfile.URL) != ""
	if want := phaseOf(string(azurearm.Deref(p.ProvisioningState)), hasURL); c.Phase != want ||
		!slices.Contains([]sources.Phase{sources.PhasePending, sources.PhaseReady, sources.PhaseDegraded, sources.PhaseLeaving}, c.Phase) {
		t.Fatalf("phase %q for provisioningState %q", c.Phase, azurearm.Deref(p.ProvisioningState))
	}
	if c.ID != strings.ToLower(*oc.ID) || c.Annotations[AnnotationResourceID] != *oc.ID {
		t.Fatalf("id %q, annotation %q, resource id %q", c.ID, c.Annotations[AnnotationResourceID], *oc.ID)
	}
	for k, v := range c.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Fatalf("label key %q: %v", k, errs)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("label %s value %q: %v", k, v, errs)
		}
	}
	for _, ns := range c.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			t.Fatalf("namespace %q: %v", ns, errs)
		}
	}
	if err := c.Auth.Validate(); err != nil {
		t.Fatalf("auth: %v", err)
	}
	if !c.Ready {
		if c.NotReadyReason == "" || c.Auth.Kind != sources.AuthNone {
			t.Fatalf("not ready: reason %q, auth %+v", c.NotReadyReason, c.Auth)
		}
		return
	}
	if srv, err := sources.NormalizeServer(c.Server); err != nil || srv != c.Server || !strings.HasPrefix(c.Server, "https://") || c.NotReadyReason != "" {
		t.Fatalf("ready cluster: server %q (%v), reason %q", c.Server, err, c.NotReadyReason)
	}
	if c.Auth.Kind != sources.AuthBearerToken || c.Auth.TokenRef.Secret == nil || c.Auth.TokenRef.Secret.Name != "token-secret" ||
		c.Auth.TokenRef.Secret.Key != sources.TokenBindingKey {
		t.Fatalf("ready cluster: auth %+v", c.Auth)
	}
	_, host, _ := apiServer(azurearm.Deref(p.ApiserverProfile.URL))
	managed := slices.ContainsFunc(m.cfg.ManagedDomains, func(d string) bool {
		d = domainKey(d)
		return host == d || strings.HasSuffix(host, "."+d)
	})
	if managed == !c.CA.IsZero() {
		t.Fatalf("host %q: managed %v, CA %v", host, managed, !c.CA.IsZero())
	}
	if c.ProxyURL != "" && !strings.EqualFold(string(azurearm.Deref(p.ApiserverProfile.Visibility)), "Private") {
		t.Fatalf("a proxy for a public cluster")
	}
}
