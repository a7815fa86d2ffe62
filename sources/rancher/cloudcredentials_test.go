package rancher

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// The cloud credential hostedAKS names, and its subscription.
const (
	aksCred = "cattle-global-data:cc-q7t2w"
	aksSub  = "0b1f6471-1bf0-4dda-aec3-cb9272f09590"
)

// azureCredential is an Azure cloud credential as GET /v3/cloudcredentials
// returns it: azurecredentialConfig without clientSecret (a password field
// Rancher never returns).
func azureCredential(base, id, name, sub string) map[string]any {
	c := credential(base, id, name, "azure")
	c["azurecredentialConfig"] = map[string]any{
		"clientId": "5f3a1c2e-7d4b-4e8a-9c6f-1b2d3e4f5a6b", "environment": "AzurePublicCloud",
		"subscriptionId": sub, "tenantId": "72f988bf-86f1-41af-91ab-2d7cd011db47",
		"type": "/v3/schemas/azureCredentialConfig",
	}
	return c
}

// amazonCredential is an Amazon EC2 cloud credential (secretKey is never
// returned).
func amazonCredential(base, id, name string) map[string]any {
	c := credential(base, id, name, "amazonec2")
	c["amazonec2credentialConfig"] = map[string]any{"accessKey": "AKIAIOSFODNN7EXAMPLE", "defaultRegion": "us-east-1",
		"type": "/v3/schemas/amazonec2CredentialConfig"}
	return c
}

func credential(base, id, name, driver string) map[string]any {
	self := base + "/v3/cloudCredentials/" + id
	return map[string]any{
		"annotations": map[string]string{"field.cattle.io/creatorId": "user-x7k2p", "provisioning.cattle.io/driver": driver},
		"baseType":    "cloudCredential", "created": "2025-11-03T09:12:44Z", "createdTS": 1762161164000,
		"creatorId": "user-x7k2p", "description": "", "id": id, "labels": map[string]string{"cattle.io/creator": "norman"},
		"links": map[string]string{"remove": self, "self": self, "update": self},
		"name":  name, "type": "cloudCredential", "uuid": "9a4f5e0c-3b1d-4c7e-8f2a-6d5b4c3a2e1f",
	}
}

// addCredentials adds cloud credentials to the fake.
func (f *fakeRancher) addCredentials(creds ...map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.creds == nil {
		f.creds = map[string][]byte{}
	}
	for _, c := range creds {
		raw, err := json.Marshal(c)
		require.NoError(f.t, err)
		f.creds[c["id"].(string)] = raw
	}
}

// threeCredentials adds an Amazon credential and two Azure ones; with a
// limit of 2, the one hostedAKS names is on the second page.
func (f *fakeRancher) threeCredentials() {
	f.addCredentials(
		amazonCredential(f.srv.URL, "cattle-global-data:cc-9vb2x", "aws-prod"),
		azureCredential(f.srv.URL, "cattle-global-data:cc-k2m4p", "azure-shared", "11111111-2222-3333-4444-555555555555"),
		azureCredential(f.srv.URL, aksCred, "azure-payments", aksSub),
	)
}

// serveCloudCredentials pages the credentials as norman does: sorted by id,
// limit and marker, absolute links carrying every query parameter.
func (f *fakeRancher) serveCloudCredentials(w http.ResponseWriter, r *http.Request, base string) {
	q := r.URL.Query()
	f.mu.Lock()
	ids := make([]string, 0, len(f.creds))
	for id := range f.creds {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	data := make([]json.RawMessage, 0, len(ids))
	for _, id := range ids {
		data = append(data, f.creds[id])
	}
	f.mu.Unlock()
	limit := 1000
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 {
		limit = l
	}
	start := 0
	if m := q.Get("marker"); m != "" {
		start = sort.SearchStrings(ids, m)
	}
	end := min(start+limit, len(ids))
	link := func(m string) string {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("marker", m)
		return base + "/v3/cloudcredentials?" + v.Encode()
	}
	pagination := map[string]any{"limit": limit, "total": len(ids)}
	if end < len(ids) {
		pagination["next"], pagination["partial"] = link(ids[end]), true
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "collection", "resourceType": "cloudCredential", "actions": map[string]string{},
		"createTypes": map[string]string{"cloudCredential": base + "/v3/cloudcredentials"},
		"links":       map[string]string{"self": base + "/v3/cloudcredentials"},
		"sort":        map[string]any{"order": "asc", "reverse": base + "/v3/cloudcredentials?order=desc"},
		"pagination":  pagination, "data": data[start:end],
	})
}

// aksSource is a source over the fixture clusters and hostedAKS, in pages
// of 2, with its logs in logs.
func aksSource(t *testing.T, f *fakeRancher, logs *testlog.Buffer, edit func(*Config)) *Source {
	t.Helper()
	f.addFixtureClusters()
	f.putRaw([]byte(hostedAKS))
	cfg := config(t, f)
	cfg.PageLimit = 2
	if edit != nil {
		edit(&cfg)
	}
	return newTestSource(t, "rancher-a", cfg, testOptions{
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
}

func listAKS(t *testing.T, s *Source) sources.Cluster {
	t.Helper()
	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	aks, ok := byName(got)["aks-payments"]
	require.True(t, ok, "the hosted AKS cluster is listed")
	require.NoError(t, aks.Validate())
	return aks
}

// TestHostedAKSCloudIDIsTheAKSSources checks that a hosted AKS cluster gets
// the subscription of its cloud credential, read from the second page of
// /v3/cloudcredentials, and so the CloudID the aks source gives the same
// cluster (subscription, resource group and name of its resource id).
func TestHostedAKSCloudIDIsTheAKSSources(t *testing.T) {
	f := newFake(t, false)
	f.threeCredentials()
	var logs testlog.Buffer
	s := aksSource(t, f, &logs, nil)

	aks := listAKS(t, s)
	assert.Equal(t, sources.AKSCloudID(aksSub, "RG-Payments", "aks-payments"), aks.CloudID)
	assert.Equal(t, "aks/"+aksSub+"/rg-payments/aks-payments", aks.CloudID)
	assert.Equal(t, aksSub, aks.Account)
	assert.Equal(t, aksSub, aks.Labels[LabelAKSSubscription])
	assert.Equal(t, "westeurope", aks.Region)

	var credReqs []seenRequest
	for _, r := range f.seen() {
		if r.Path == "/v3/cloudcredentials" {
			credReqs = append(credReqs, r)
		}
	}
	require.Len(t, credReqs, 2, "two pages")
	assert.Equal(t, "limit=2", credReqs[0].Query)
	assert.Equal(t, "limit=2&marker="+url.QueryEscape(aksCred), credReqs[1].Query)
	for _, r := range credReqs {
		assert.Equal(t, "Bearer "+testToken, r.Auth)
	}
	assert.Equal(t, 2.0, testutil.ToFloat64(s.metrics.APIRequests.WithLabelValues(opCloudCredentials, upstream.Outcome)))
	assert.NotContains(t, logs.String(), "cloud credential")
}

// TestCloudCredentialsBestEffort checks that the listing succeeds whatever
// /v3/cloudcredentials answers: a 403 or a missing credential leave the
// cluster without a CloudID (debug), any other failure keeps the
// subscriptions last read (warning). None counts as a failed listing.
func TestCloudCredentialsBestEffort(t *testing.T) {
	const forbidden = `{"baseType":"error","code":"Forbidden","message":"cloudcredentials is forbidden","status":403,"type":"error"}`
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		before  bool // a first listing read the credentials
		creds   bool // the fake has the credential
		outcome upstream.Kind
		want    string // the CloudID's subscription, if any
		log     string
	}{
		{name: "403: no CloudID", status: http.StatusForbidden, body: forbidden, outcome: upstream.KindAuth,
			log: `"level":"DEBUG","msg":"the user may not read cloud credentials`},
		{name: "403 after a read: the subscriptions are dropped", status: http.StatusForbidden, body: forbidden,
			before: true, creds: true, outcome: upstream.KindAuth, log: `"level":"DEBUG","msg":"the user may not read`},
		{name: "credential not listed: no CloudID", log: `"credentials":["` + aksCred + `"]`},
		{name: "500 with nothing read before: no CloudID", status: http.StatusInternalServerError,
			body: `{"type":"error","status":"500"}`, outcome: upstream.KindServer,
			log: `"level":"WARN","msg":"cannot read cloud credentials`},
		{name: "500 after a read: the subscriptions last read", status: http.StatusInternalServerError,
			body: `{"type":"error","status":"500"}`, before: true, creds: true, outcome: upstream.KindServer, want: aksSub,
			log: `"level":"WARN","msg":"cannot read cloud credentials`},
		{name: "not a collection", status: http.StatusOK, body: `{"type":"apiRoot"}`, before: true, creds: true,
			outcome: upstream.KindInvalidResponse, want: aksSub, log: `"level":"WARN"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, false)
			if tc.creds {
				f.threeCredentials()
			} else {
				f.addCredentials(azureCredential(f.srv.URL, "cattle-global-data:cc-k2m4p", "azure-shared", aksSub))
			}
			var logs testlog.Buffer
			s := aksSource(t, f, &logs, nil)
			if tc.before {
				require.NotEmpty(t, listAKS(t, s).CloudID)
			}
			if tc.status != 0 {
				f.answer("/v3/cloudcredentials", tc.status, tc.body)
			}
			aks := listAKS(t, s)
			if tc.want == "" {
				assert.Empty(t, aks.CloudID)
				assert.Empty(t, aks.Account)
				assert.NotContains(t, aks.Labels, LabelAKSSubscription)
			} else {
				assert.Equal(t, sources.AKSCloudID(tc.want, "RG-Payments", "aks-payments"), aks.CloudID)
			}
			assert.Equal(t, "aks-payments", aks.Labels[LabelAKSName], "the rest of the identity stays")
			assert.Contains(t, logs.String(), tc.log)
			if tc.outcome != "" {
				assert.Equal(t, 1.0, testutil.ToFloat64(s.metrics.APIRequests.WithLabelValues(opCloudCredentials, string(tc.outcome))))
			}
			for _, k := range upstream.Kinds() {
				assert.Zero(t, errCount(t, s, k, opCloudCredentials), k)
			}
			assert.NotContains(t, logs.String(), "AzurePublicCloud")
		})
	}
}

// TestNoCloudCredentialsRequest checks that /v3/cloudcredentials is read
// only when a listed cluster is a hosted AKS cluster naming a credential.
func TestNoCloudCredentialsRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fakeRancher, cfg *Config)
	}{
		{name: "no hosted AKS cluster", setup: func(f *fakeRancher, _ *Config) { f.addFixtureClusters() }},
		{name: "the hosted AKS cluster is filtered out", setup: func(f *fakeRancher, cfg *Config) {
			f.addFixtureClusters()
			f.putRaw([]byte(hostedAKS))
			cfg.ExcludeNameRegex = "^aks-"
		}},
		{name: "the hosted AKS cluster names no credential", setup: func(f *fakeRancher, _ *Config) {
			f.putRaw([]byte(strings.ReplaceAll(hostedAKS, `"azureCredentialSecret": "cattle-global-data:cc-q7t2w",`, "")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, false)
			f.threeCredentials()
			cfg := config(t, f)
			tc.setup(f, &cfg)
			s := newTestSource(t, "rancher-a", cfg, testOptions{})
			got, err := s.Clusters(t.Context())
			require.NoError(t, err)
			require.NotEmpty(t, got)
			assert.NotContains(t, paths(f.seen()), "/v3/cloudcredentials")
		})
	}
}

// TestCloudCredentialsCancelled checks that a listing whose context ends
// while it reads the cloud credentials fails, as cancelled.
func TestCloudCredentialsCancelled(t *testing.T) {
	f := newFake(t, false)
	f.threeCredentials()
	var logs testlog.Buffer
	s := aksSource(t, f, &logs, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f.mu.Lock()
	f.pathHook = func(_ http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v3/cloudcredentials" {
			return false
		}
		cancel()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return true
	}
	f.mu.Unlock()
	_, err := s.Clusters(ctx)
	require.Error(t, err)
	assert.Equal(t, upstream.KindCanceled, upstream.KindOf(err))
	assert.Equal(t, opCloudCredentials, upstream.OperationOf(err))
	assert.Equal(t, 1.0, errCount(t, s, upstream.KindCanceled, opCloudCredentials))
}

func TestSubscriptionsAdd(t *testing.T) {
	azure := func(id, sub string) CloudCredential {
		return CloudCredential{ID: id, Azure: &AzureCredentialConfig{SubscriptionID: sub}}
	}
	subs := subscriptions{}
	subs.add([]CloudCredential{
		azure("cattle-global-data:cc-a", aksSub),
		azure("cattle-global-data:cc-b", " 0B1F6471-1BF0-4DDA-AEC3-CB9272F09590 "),
		azure("cattle-global-data:cc-c", ""),
		azure("cattle-global-data:cc-d", "0b1f6471/1bf0-4dda-aec3-cb9272f09590"),
		azure("cattle-global-data:cc-e", "0b1f64711bf04ddaaec3cb9272f09590"),
		azure("", aksSub),
		{ID: "cattle-global-data:cc-f"},
	})
	assert.Equal(t, subscriptions{"cattle-global-data:cc-a": aksSub, "cattle-global-data:cc-b": aksSub}, subs)
}
