package aks

import (
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/fuzzseed"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
)

// FuzzManagedCluster decodes any JSON with the SDK's
// ManagedCluster.UnmarshalJSON, as the managed cluster pager does, and maps
// it with two configurations (the defaults; private clusters through their
// private FQDN and a proxy, a name template over tags):
//   - nothing panics; the mapping is deterministic;
//   - a listed cluster has the phase phaseOf gives its state (pending,
//     ready, degraded or leaving, never absent or empty) and its
//     lower-cased resource id as ID;
//   - a listed cluster is an AKS cluster of the subscription, with a name
//     Argo CD accepts (no spaces or control characters, ≤ 253 bytes), the
//     resource id annotation, and the configured exec auth holding no
//     token, where only AZURE_TENANT_ID and AAD_SERVER_APPLICATION_ID may
//     differ per cluster: always GUIDs, the cluster's own (lower-cased)
//     when it is ready (see identityOf);
//   - its labels are valid Kubernetes labels;
//   - ready means a server in normal form; not ready always has a reason;
//     namespaces are namespace names;
//   - the mapping does not depend on the cluster's credentials (service
//     principal secret, Windows admin password, Linux SSH keys, legacy AAD
//     server app secret): none of them reaches the model.
//
// Run it with: go test ./sources/aks -run '^$' -fuzz '^FuzzManagedCluster$' -fuzztime 1m
func FuzzManagedCluster(f *testing.F) {
	fuzzseed.Add(f)
	// and each cluster of the upstream-shaped list page
	var page struct{ Value []json.RawMessage }
	raw, err := os.ReadFile(filepath.Join(fuzzseed.Root(f), "testdata", "fixtures", "aks", "aks-managed-clusters-list.json"))
	if err != nil || json.Unmarshal(raw, &page) != nil || len(page.Value) == 0 {
		f.Fatalf("fixture aks-managed-clusters-list.json: %v", err)
	}
	for _, mc := range page.Value {
		f.Add([]byte(mc))
	}
	var mappers []*mapper
	for _, cfg := range []Config{{}, {
		PrivateEndpoints: PrivateEndpoints{Policy: PrivateFQDN, ProxyURL: "socks5://proxy.internal:1080"},
		ExcludeTags:      map[string]string{"legacy": "*"}, IgnoreTags: []string{"cost center"},
		NamePrefix: "az-", NameTemplate: `{{.ResourceGroup}}-{{.Name}}-{{index .Tags "env"}}`,
	}} {
		cfg.Default()
		if errs := cfg.Validate(field.NewPath("aks")); len(errs) > 0 {
			f.Fatal(errs)
		}
		m, err := newMapper(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			f.Fatal(err)
		}
		mappers = append(mappers, m)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var mc armcontainerservice.ManagedCluster
		if mc.UnmarshalJSON(raw) != nil {
			return // the pager fails the page, and so the listing
		}
		for _, m := range mappers {
			got, err := m.toCluster(subA, &mc)
			if err != nil {
				continue
			}
			again, _ := m.toCluster(subA, &mc)
			if !reflect.DeepEqual(got, again) {
				t.Fatalf("mapping the same cluster twice differs")
			}
			withoutCreds, err := m.toCluster(subA, withoutCredentials(&mc))
			if err != nil || !reflect.DeepEqual(got, withoutCreds) {
				t.Fatalf("the mapped cluster depends on the cluster's credentials (error %v)", err)
			}
			if got.skip == "" {
				checkMapped(t, m, &got, &mc)
			}
		}
	})
}

// withoutCredentials is a copy of mc without any credential field.
func withoutCredentials(mc *armcontainerservice.ManagedCluster) *armcontainerservice.ManagedCluster {
	out := *mc
	if mc.Properties == nil {
		return &out
	}
	p := *mc.Properties
	p.ServicePrincipalProfile, p.WindowsProfile, p.LinuxProfile = nil, nil, nil
	if p.AADProfile != nil {
		aad := *p.AADProfile
		aad.ServerAppSecret = nil
		p.AADProfile = &aad
	}
	out.Properties = &p
	return &out
}

func checkMapped(t *testing.T, m *mapper, got *mapped, mc *armcontainerservice.ManagedCluster) {
	t.Helper()
	c := &got.cluster
	if c.Provider != sources.ProviderAKS || c.Account != subA || !strings.HasPrefix(c.CloudID, "aks/") {
		t.Fatalf("identity: provider %q, account %q, cloud id %q", c.Provider, c.Account, c.CloudID)
	}
	if c.Name == "" || len(c.Name) > 253 || strings.ContainsFunc(c.Name, isBadNameRune) {
		t.Fatalf("name %q", c.Name)
	}
	p := mc.Properties
	power := ""
	if p.PowerState != nil && p.PowerState.Code != nil {
		power = string(*p.PowerState.Code)
	}
	if want := phaseOf(azurearm.Deref(p.ProvisioningState), power, azurearm.Deref(p.Fqdn) != "" || azurearm.Deref(p.PrivateFQDN) != ""); c.Phase != want ||
		!slices.Contains([]sources.Phase{sources.PhasePending, sources.PhaseReady, sources.PhaseDegraded, sources.PhaseLeaving}, c.Phase) {
		t.Fatalf("phase %q for provisioningState %q, powerState %q", c.Phase, azurearm.Deref(p.ProvisioningState), power)
	}
	if c.ID != strings.ToLower(*mc.ID) {
		t.Fatalf("id %q, resource id %q", c.ID, *mc.ID)
	}
	if c.Annotations[AnnotationResourceID] != *mc.ID {
		t.Fatalf("resource id annotation %q, id %q", c.Annotations[AnnotationResourceID], *mc.ID)
	}
	if err := c.Auth.Validate(); err != nil || c.Auth.Kind != sources.AuthExec || c.Auth.TokenRef != nil {
		t.Fatalf("auth %+v is not an exec provider (%v)", c.Auth, err)
	}
	checkIdentity(t, m, c, p.AADProfile)
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
	if !c.Ready {
		if c.NotReadyReason == "" || got.needCA {
			t.Fatalf("not ready: reason %q, needCA %v", c.NotReadyReason, got.needCA)
		}
		return
	}
	if srv, err := sources.NormalizeServer(c.Server); err != nil || srv != c.Server || c.NotReadyReason != "" {
		t.Fatalf("ready cluster: server %q (%v), reason %q", c.Server, err, c.NotReadyReason)
	}
	if !got.needCA {
		t.Fatal("ready cluster without a CA to fetch")
	}
}

// checkIdentity checks c's exec provider: the configured one but for the
// tenant and server application, which are GUIDs, and the cluster's own
// when it is ready.
func checkIdentity(t *testing.T, m *mapper, c *sources.Cluster, aad *armcontainerservice.ManagedClusterAADProfile) {
	t.Helper()
	const tenant, server = "AZURE_TENANT_ID", "AAD_SERVER_APPLICATION_ID"
	got, want := *c.Auth.Exec, *m.cfg.Auth.execProvider(aadIdentity{})
	got.Env, want.Env = maps.Clone(got.Env), maps.Clone(want.Env)
	for _, k := range []string{tenant, server} {
		if v, ok := got.Env[k]; ok && !azurearm.IsGUID(v) {
			t.Fatalf("%s=%q is not a GUID", k, v)
		}
		delete(got.Env, k)
		delete(want.Env, k)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("exec %+v is not the configured one %+v", got, want)
	}
	if !c.Ready {
		return
	}
	if v := azurearm.Deref(aad.TenantID); v != "" && c.Auth.Exec.Env[tenant] != strings.ToLower(v) {
		t.Fatalf("%s=%q, aadProfile.tenantID %q", tenant, c.Auth.Exec.Env[tenant], v)
	}
	if v := azurearm.Deref(aad.ServerAppID); !azurearm.Deref(aad.Managed) && c.Auth.Exec.Env[server] != strings.ToLower(v) {
		t.Fatalf("%s=%q for a legacy cluster, aadProfile.serverAppID %q", server, c.Auth.Exec.Env[server], v)
	}
}

// caErrors are every error caFromCredentials may return besides
// "certificate-authority-data: ..." (about the CA, which is no secret).
var caErrors = []string{
	"the response holds no kubeconfig", "the kubeconfig does not parse", "the kubeconfig names no cluster",
	"the kubeconfig has no certificate-authority-data",
}

// FuzzCredentialResults decodes any listClusterUserCredential answer with
// the SDK (which base64-decodes each kubeconfig) and reads the CA from it:
//   - nothing panics;
//   - an error is one of the fixed messages or is about the CA data: the
//     kubeconfig may hold a user's token or key, and no error quotes it;
//   - a result is base64 of a PEM bundle of certificates only.
//
// Run it with: go test ./sources/aks -run '^$' -fuzz '^FuzzCredentialResults$' -fuzztime 1m
func FuzzCredentialResults(f *testing.F) {
	fuzzseed.Add(f, "testdata/fixtures/aks/aks-list-cluster-user-credentials.json")
	f.Fuzz(func(t *testing.T, raw []byte) {
		var res armcontainerservice.CredentialResults
		if res.UnmarshalJSON(raw) != nil {
			return
		}
		ca, err := caFromCredentials(res)
		if err != nil {
			msg := err.Error()
			if !ca.IsZero() {
				t.Fatal("a CA with an error")
			}
			if !strings.HasPrefix(msg, "certificate-authority-data: ") && !slices.Contains(caErrors, msg) {
				t.Fatalf("unexpected error text (it may quote the kubeconfig): %q", msg)
			}
			return
		}
		if err := sources.ValidateCAData(ca.Data()); err != nil {
			t.Fatalf("caData accepted but invalid: %v", err)
		}
	})
}
