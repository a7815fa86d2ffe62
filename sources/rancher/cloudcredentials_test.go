package rancher

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// The cloud credential hostedAKS names, and its subscription.
const (
	aksCred = "cattle-global-data:cc-q7t2w"
	aksSub  = "0b1f6471-1bf0-4dda-aec3-cb9272f09590"
	// otherSub is a subscription a credential is edited to
	otherSub = "6d3c8e2a-9f41-4b7e-a5d0-2c8b1e7f4a93"
)

// threeCredentials adds an Amazon credential and two Azure ones; with a
// limit of 2, the one hostedAKS names is on the second page.
func (f *fakeRancher) threeCredentials() {
	f.PutCloudCredentials(
		fakerancher.CloudCredential{ID: "cattle-global-data:cc-9vb2x", Name: "aws-prod", Driver: "amazonec2"},
		fakerancher.CloudCredential{ID: "cattle-global-data:cc-k2m4p", Name: "azure-shared", Driver: "azure",
			SubscriptionID: "11111111-2222-3333-4444-555555555555"},
		fakerancher.CloudCredential{ID: aksCred, Name: "azure-payments", Driver: "azure", SubscriptionID: aksSub},
	)
}

// aksSource is a source over the fixture clusters and hostedAKS, in pages
// of 2, with its logs in logs.
func aksSource(t *testing.T, f *fakeRancher, logs *testlog.Buffer, edit func(*Config)) *Source {
	t.Helper()
	f.PutFixtureClusters()
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

	var credReqs []fakerancher.Request
	for _, r := range f.TakeRequests() {
		if r.Path == "/v3/cloudcredentials" {
			credReqs = append(credReqs, r)
		}
	}
	require.Len(t, credReqs, 2, "two pages")
	assert.Equal(t, "limit=2", credReqs[0].RawQuery)
	assert.Equal(t, "limit=2&marker="+url.QueryEscape(aksCred), credReqs[1].RawQuery)
	for _, r := range credReqs {
		assert.Equal(t, "Bearer "+testToken, r.Authorization)
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
		then    func(f *fakeRancher) // after the first listing, if before
	}{
		{name: "403: no CloudID", status: http.StatusForbidden, body: forbidden, outcome: upstream.KindAuth,
			log: `"level":"DEBUG","msg":"the user may not read cloud credentials`},
		{name: "403 after a read: the subscriptions last read", status: http.StatusForbidden, body: forbidden,
			before: true, creds: true, outcome: upstream.KindAuth, want: aksSub,
			log: `"level":"DEBUG","msg":"the user may not read cloud credentials: hosted AKS clusters keep the subscriptions last read`},
		{name: "credential not listed: no CloudID", log: `"credentials":["` + aksCred + `"]`},
		{name: "credential left out after a read: the subscription last read", status: http.StatusOK,
			body: `{"type":"collection","data":[]}`, before: true, creds: true, want: aksSub,
			log: `the subscriptions last read are kept","rancher":`},
		{name: "credential without an azure subscription after a read: the subscription last read", before: true, creds: true,
			then: func(f *fakeRancher) {
				f.PutCloudCredentials(fakerancher.CloudCredential{ID: aksCred, Name: "azure-payments", Driver: "amazonec2"})
			},
			want: aksSub, log: `the subscriptions last read are kept","rancher":`},
		{name: "credential given another subscription: the new one", before: true, creds: true,
			then: func(f *fakeRancher) {
				f.PutCloudCredentials(fakerancher.CloudCredential{ID: aksCred, Name: "azure-payments", Driver: "azure", SubscriptionID: otherSub})
			},
			want: otherSub},
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
				f.PutCloudCredentials(fakerancher.CloudCredential{ID: "cattle-global-data:cc-k2m4p", Name: "azure-shared",
					Driver: "azure", SubscriptionID: aksSub})
			}
			var logs testlog.Buffer
			s := aksSource(t, f, &logs, nil)
			if tc.before {
				require.NotEmpty(t, listAKS(t, s).CloudID)
			}
			if tc.status != 0 {
				f.Answer("/v3/cloudcredentials", tc.status, tc.body)
			}
			if tc.then != nil {
				tc.then(f)
			}
			aks := listAKS(t, s)
			if tc.want == "" {
				assert.Empty(t, aks.CloudID)
				assert.Empty(t, aks.Account)
				assert.NotContains(t, aks.Labels, LabelAKSSubscription)
			} else {
				assert.Equal(t, sources.AKSCloudID(tc.want, "RG-Payments", "aks-payments"), aks.CloudID)
				assert.Equal(t, tc.want, aks.Labels[LabelAKSSubscription])
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
		{name: "no hosted AKS cluster", setup: func(f *fakeRancher, _ *Config) { f.PutFixtureClusters() }},
		{name: "the hosted AKS cluster is filtered out", setup: func(f *fakeRancher, cfg *Config) {
			f.PutFixtureClusters()
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
			assert.NotContains(t, paths(f.TakeRequests()), "/v3/cloudcredentials")
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
	f.Intercept(func(_ http.ResponseWriter, r *http.Request, _ http.Handler) bool {
		if r.URL.Path != "/v3/cloudcredentials" {
			return false
		}
		cancel()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return true
	})
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
