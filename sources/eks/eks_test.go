package eks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func clusterNames(cs []sources.Cluster) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// TestFixturesVerbatim serves the upstream-shaped fixture files as they are
// (list page 1 with its nextToken, page 2, the describe answer) and a
// GetResources answer in its awsJson1_1 shape to the real SDK, and checks
// the mapping of payments-prod end to end.
func TestFixturesVerbatim(t *testing.T) {
	page1, page2 := readFixture(t, "eks-list-clusters.json"), readFixture(t, "eks-list-clusters-page2.json")
	describe := readFixture(t, "eks-describe-cluster.json")
	var p1 struct{ NextToken string }
	require.NoError(t, json.Unmarshal(page1, &p1))
	// The fixture's tags, as GetResources answers them; the other clusters
	// were never tagged, so they are not in the answer.
	const getResources = `{"PaginationToken":"","ResourceTagMappingList":[{"ResourceARN":"arn:aws:eks:eu-west-1:123456789012:cluster/payments-prod",` +
		`"Tags":[{"Key":"argocd.example.com/managed","Value":"true"},{"Key":"env","Value":"prod"},{"Key":"team","Value":"payments"}]}]}`
	var doc map[string]map[string]any
	require.NoError(t, json.Unmarshal(describe, &doc))
	require.Contains(t, doc["cluster"], "tags")
	delete(doc["cluster"], "tags")
	untagged, err := json.MarshalIndent(doc, "", "  ") // indented: endpointPublicAccess is replaced as written
	require.NoError(t, err)
	var seenQueries, seenTagging []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/" && r.Header.Get("X-Amz-Target") == "ResourceGroupsTaggingAPI_20170126.GetResources":
			body, _ := io.ReadAll(r.Body)
			seenTagging = append(seenTagging, string(body))
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			_, _ = w.Write([]byte(getResources))
		case r.URL.Path == "/clusters" && r.URL.Query().Get("nextToken") == "":
			seenQueries = append(seenQueries, r.URL.RawQuery)
			_, _ = w.Write(page1)
		case r.URL.Path == "/clusters" && r.URL.Query().Get("nextToken") == p1.NextToken:
			seenQueries = append(seenQueries, r.URL.RawQuery)
			_, _ = w.Write(page2)
		case r.URL.Path == "/clusters/payments-prod":
			_, _ = w.Write(describe)
		case strings.HasPrefix(r.URL.Path, "/clusters/"):
			// the others: the same answer, renamed and public, without
			// tags (never tagged)
			name := strings.TrimPrefix(r.URL.Path, "/clusters/")
			b := strings.ReplaceAll(string(untagged), "payments-prod", name)
			_, _ = w.Write([]byte(strings.Replace(b, `"endpointPublicAccess": false`, `"endpointPublicAccess": true`, 1)))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	base := aws.Config{Credentials: credentials.NewStaticCredentialsProvider(baseKey, "secret", "")}
	cfg := Config{
		Accounts: []Account{{ID: "123456789012", ArgocdRoleARN: "arn:aws:iam::123456789012:role/argocd"}},
		Regions:  []string{regionEU}, Endpoint: srv.URL, TaggingEndpoint: srv.URL, MaxAttempts: 1,
	}
	cfg.Default()
	s, err := newSource(&cfg, sources.SourceOptions{Name: "fixtures"}, hooks{awsConfig: &base, httpClient: srv.Client()})
	require.NoError(t, err)

	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"payments-prod", "platform-shared", "search-dev"}, clusterNames(got))
	require.Len(t, seenQueries, 2)
	assert.Equal(t, "maxResults=100", seenQueries[0])
	require.Len(t, seenTagging, 1)
	assert.JSONEq(t, `{"ResourceTypeFilters":["eks:cluster"],"ResourcesPerPage":100}`, seenTagging[0])

	var fixture struct {
		Cluster struct {
			CertificateAuthority struct{ Data string }
		}
	}
	require.NoError(t, json.Unmarshal(describe, &fixture))
	want := sources.Cluster{
		Provider: sources.ProviderEKS, Name: "payments-prod", CloudID: "eks/123456789012/eu-west-1/payments-prod",
		ID: "arn:aws:eks:eu-west-1:123456789012:cluster/payments-prod", Phase: sources.PhaseReady,
		Server:  "https://B7E41C0A9D3F5E2C8A1B6D4F0E9C7A35.gr7.eu-west-1.eks.amazonaws.com",
		CA:      sources.CAFromData(fixture.Cluster.CertificateAuthority.Data),
		Account: "123456789012", Region: regionEU, KubernetesVersion: "1.31", State: "ACTIVE", Ready: true,
		Auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{
			ClusterName: "payments-prod", RoleARN: "arn:aws:iam::123456789012:role/argocd", Region: regionEU}},
		Labels: map[string]string{"team": "payments", "env": "prod", "argocd.example.com/managed": "true",
			LabelPrivateEndpoint: "true"},
		Annotations: map[string]string{AnnotationARN: "arn:aws:eks:eu-west-1:123456789012:cluster/payments-prod"},
	}
	assert.Equal(t, want, got[0])
	require.NoError(t, got[0].Validate())
	assert.Nil(t, got[1].Labels, "never tagged: no tags in either answer")
}

func TestPagination(t *testing.T) {
	f := newFake(t)
	f.PageSize = 7
	f.add(acctA, regionEU, names("c", 30)...)
	s, _ := f.newSource(t, f.testConfig(), nil)

	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	want := make([]string, 30)
	for i, c := range names("c", 30) {
		want[i] = c.Name
	}
	assert.Equal(t, want, clusterNames(got))
	assert.Equal(t, 5, f.count("ListClusters"), "30 names, 7 per page")
	assert.Equal(t, 1, f.count("GetResources"), "30 tagged clusters, 100 per page")
	assert.Equal(t, 30, f.count("DescribeCluster"))
	assert.Equal(t, map[string]bool{"100": true}, f.MaxResults())
	assert.Equal(t, map[int]bool{100: true}, f.PerPage())
}

// TestTagPagination: GetResources pages are followed through their
// PaginationToken, and every page's tags reach their cluster.
func TestTagPagination(t *testing.T) {
	f := newFake(t)
	f.TagPageSize = 2
	for _, n := range []string{"c-0", "c-1", "c-2"} {
		f.add(acctA, regionEU, fakeCluster{Name: n, Tags: map[string]string{"tenant": "tenant-of-" + n}})
	}
	s, _ := f.newSource(t, f.testConfig(), nil)
	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"c-0", "c-1", "c-2"}, clusterNames(got))
	for _, c := range got {
		assert.Equal(t, "tenant-of-"+c.Name, c.Tenant)
		assert.Equal(t, map[string]string{"tenant": "tenant-of-" + c.Name}, c.Labels)
	}
	assert.Equal(t, 2, f.count("GetResources"), "3 tagged clusters, 2 per page")
	assert.Equal(t, 1, f.count("ListClusters"))
	assert.Equal(t, map[int]bool{100: true}, f.PerPage())
}

// TestEveryStatusListed: a cluster in any EKS status, known or not, is
// listed with its status as State and the phase of the package doc's
// table; those not ACTIVE are described on every listing.
func TestEveryStatusListed(t *testing.T) {
	f := newFake(t)
	for _, tc := range []fakeCluster{
		{Name: "creating", Status: "CREATING", Creating: true},
		{Name: "pending", Status: "PENDING", Creating: true},
		{Name: "active"},
		{Name: "updating", Status: "UPDATING"},
		{Name: "failed", Status: "FAILED"},
		{Name: "failed-create", Status: "FAILED", Creating: true},
		{Name: "deleting", Status: "DELETING"},
		{Name: "hibernating", Status: "HIBERNATING"}, // newer than this code
	} {
		f.add(acctA, regionEU, tc)
	}
	s, reg := f.newSource(t, f.testConfig(), nil)
	want := map[string]struct {
		state string
		phase sources.Phase
		ready bool
	}{
		"creating":      {"CREATING", sources.PhasePending, false},
		"pending":       {"PENDING", sources.PhasePending, false},
		"active":        {"ACTIVE", sources.PhaseReady, true},
		"updating":      {"UPDATING", sources.PhaseDegraded, true},
		"failed":        {"FAILED", sources.PhaseDegraded, true},
		"failed-create": {"FAILED", sources.PhasePending, false},
		"deleting":      {"DELETING", sources.PhaseLeaving, true},
		"hibernating":   {"HIBERNATING", sources.PhaseDegraded, true},
	}
	for range 2 {
		f.resetCounts()
		got, err := s.Clusters(context.Background())
		require.NoError(t, err)
		require.Len(t, got, len(want))
		for _, c := range got {
			t.Run(c.Name, func(t *testing.T) {
				w := want[c.Name]
				assert.Equal(t, w.state, c.State)
				assert.Equal(t, w.phase, c.Phase)
				assert.Equal(t, w.ready, c.Ready, c.NotReadyReason)
				if !w.ready {
					assert.Equal(t, "EKS reports no endpoint yet (status "+w.state+")", c.NotReadyReason)
				}
				assert.Equal(t, clusterARN(c.Name, acctA, regionEU), c.ID)
				assert.Equal(t, "payments", c.Labels["team"], "tags whatever the status")
			})
		}
	}
	assert.Equal(t, 7, f.count("DescribeCluster"), "the second listing describes every cluster but the ACTIVE one")
	gauge := func(name, label, value string) float64 {
		return counter(t, reg, "argocd_cluster_discovery_eks_"+name, map[string]string{label: value})
	}
	assert.Equal(t, 2.0, gauge("upstream_clusters", "state", "FAILED"))
	assert.Equal(t, 1.0, gauge("upstream_clusters", "state", "HIBERNATING"))
	for phase, n := range map[sources.Phase]float64{sources.PhasePending: 3, sources.PhaseReady: 1, sources.PhaseDegraded: 3, sources.PhaseLeaving: 1} {
		assert.Equal(t, n, gauge("clusters", "phase", string(phase)), phase)
	}
}

func TestDescribeConcurrencyBound(t *testing.T) {
	f := newFake(t)
	f.Delay = 5 * time.Millisecond
	f.add(acctA, regionEU, names("c", 40)...)
	f.add(acctA, regionUS, names("d", 40)...)
	cfg := f.testConfig()
	cfg.Regions = []string{regionEU, regionUS}
	cfg.Concurrency = 3
	s, _ := f.newSource(t, cfg, nil)

	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 80)
	assert.LessOrEqual(t, f.MaxInFlight(), int64(3), "calls in flight, across both regions")
	assert.GreaterOrEqual(t, f.MaxInFlight(), int64(2), "describes do run concurrently")
}

func TestDeletedBetweenListAndDescribe(t *testing.T) {
	f := newFake(t)
	f.add(acctA, regionEU, names("c", 3)...)
	f.Hook = func(r fakeReq) *fakeResp {
		if r.Op == "DescribeCluster" && r.Name == "c-001" {
			return &fakeResp{Status: http.StatusNotFound, ErrType: "ResourceNotFoundException",
				Body: `{"message":"No cluster found for name: c-001."}`}
		}
		return nil
	}
	s, _ := f.newSource(t, f.testConfig(), nil)
	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"c-000", "c-002"}, clusterNames(got))
}

func TestPrivateEndpointPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy, proxy string
		want          []string
		wantProxy     string
	}{
		{PrivateInclude, "", []string{"private", "public"}, ""},
		{PrivateExclude, "", []string{"public"}, ""},
		{PrivateProxy, "socks5://eks-proxy.internal:1080", []string{"private", "public"}, "socks5://eks-proxy.internal:1080"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			f := newFake(t)
			f.add(acctA, regionEU, fakeCluster{Name: "private", Private: true}, fakeCluster{Name: "public"})
			cfg := f.testConfig()
			cfg.PrivateEndpoints = PrivateEndpoints{Policy: tc.policy, ProxyURL: tc.proxy}
			s, reg := f.newSource(t, cfg, nil)
			got, err := s.Clusters(context.Background())
			require.NoError(t, err)
			require.Equal(t, tc.want, clusterNames(got))
			skipped := 0.0
			if tc.policy == PrivateExclude {
				skipped = 1
			}
			assert.Equal(t, skipped, counter(t, reg, "argocd_cluster_discovery_eks_clusters_skipped", map[string]string{"reason": "private_endpoint"}))
			assert.Equal(t, 2.0, counter(t, reg, "argocd_cluster_discovery_eks_upstream_clusters", map[string]string{"state": "ACTIVE"}))
			for _, c := range got {
				if c.Name == "private" {
					assert.Equal(t, "true", c.Labels[LabelPrivateEndpoint])
					assert.Equal(t, tc.wantProxy, c.ProxyURL)
				} else {
					assert.NotContains(t, c.Labels, LabelPrivateEndpoint)
					assert.Empty(t, c.ProxyURL, "public endpoints are reached directly")
				}
			}
		})
	}
}

func TestAuthForms(t *testing.T) {
	f := newFake(t)
	f.add(acctA, regionEU, fakeCluster{Name: "one"})
	cfg := f.testConfig()
	cfg.Auth.Mode = AuthModeExec
	s, _ := f.newSource(t, cfg, nil)
	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, sources.Auth{Kind: sources.AuthExec, Exec: &sources.ExecProvider{
		Command: "argocd-k8s-auth", Args: []string{"aws", "--cluster-name", "one", "--role-arn", "arn:aws:iam::111111111111:role/argocd"},
		Env: map[string]string{"AWS_REGION": regionEU}, APIVersion: ExecAPIVersion,
	}}, got[0].Auth)
	require.NoError(t, got[0].Validate())
}

func TestTwoAccountsThroughAssumedRoles(t *testing.T) {
	f := newFake(t)
	for _, acct := range []string{acctA, acctB} {
		where := func(region string) map[string]string { return map[string]string{"where": acct + "-" + region} }
		f.add(acct, regionEU, fakeCluster{Name: "shared", Tags: where(regionEU)}, fakeCluster{Name: "eu-" + acct, Tags: where(regionEU)})
		f.add(acct, regionUS, fakeCluster{Name: "us-" + acct, Tags: where(regionUS)})
	}
	cfg := f.testConfig()
	cfg.Regions = []string{regionEU, regionUS}
	cfg.Accounts = append(cfg.Accounts, Account{ID: acctB, RoleARN: "arn:aws:iam::" + acctB + ":role/discovery", SessionName: "discovery-b"})
	cfg.NameTemplate = "{{.Name}}-{{.Account}}"
	s, _ := f.newSource(t, cfg, nil)

	for range 2 {
		got, err := s.Clusters(context.Background())
		require.NoError(t, err)
		byName := map[string]sources.Cluster{}
		for _, c := range got {
			byName[c.Name] = c
		}
		require.Len(t, byName, 6)
		for _, acct := range []string{acctA, acctB} {
			assert.Equal(t, regionEU, byName["shared-"+acct].Region)
			assert.Equal(t, acct, byName["shared-"+acct].Account)
			assert.Equal(t, regionUS, byName["us-"+acct+"-"+acct].Region)
			assert.Equal(t, "shared", byName["shared-"+acct].Auth.AWS.ClusterName)
			// GetResources ran with the account's credentials in each region
			assert.Equal(t, acct+"-"+regionEU, byName["shared-"+acct].Labels["where"])
			assert.Equal(t, acct+"-"+regionUS, byName["us-"+acct+"-"+acct].Labels["where"])
		}
		assert.Empty(t, byName["shared-"+acctB].Auth.AWS.RoleARN, "account B has no Argo CD role")
	}

	assert.Equal(t, map[string]bool{assumedKey(acctA): true, assumedKey(acctB): true}, f.SeenKeys(),
		"EKS and the tagging API saw SigV4 with the assumed credentials only, never the base key")
	assert.Equal(t, map[string]bool{"session-token-" + acctA: true, "session-token-" + acctB: true}, f.SeenTokens())
	assert.Equal(t, 2, f.count("AssumeRole"), "one per account, cached across regions and listings")
	assumed := f.Assumed()
	slices.SortFunc(assumed, func(a, b map[string]string) int { return strings.Compare(a["RoleArn"], b["RoleArn"]) })
	assert.Equal(t, []map[string]string{
		{"RoleArn": "arn:aws:iam::111111111111:role/discovery", "RoleSessionName": "argocd-cluster-discovery", "ExternalId": "ext-A"},
		{"RoleArn": "arn:aws:iam::222222222222:role/discovery", "RoleSessionName": "discovery-b", "ExternalId": ""},
	}, assumed)
}

// TestProvider: the registration gives the eks section, which goes through
// the service's steps (decode, Default, SetDirectory, Validate, NewSource).
func TestProvider(t *testing.T) {
	reg, ok := sources.NewRegistry(Provider{}).Lookup(sources.ProviderEKS)
	require.True(t, ok)
	assert.Equal(t, sources.KindCloud, reg.Kind())
	section := reg.NewConfig()
	require.IsType(t, &Config{}, section)
	require.NoError(t, json.Unmarshal([]byte(`{"regions":["eu-west-1"],"accounts":[{"id":"111111111111"}],"describeTTL":"10m"}`), section))
	section.Default()
	section.SetDirectory("/etc/argocd-cluster-discovery")
	require.Empty(t, section.Validate(nil))
	assert.Equal(t, 10*time.Minute, section.(*Config).DescribeTTL.Std())

	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", dir+"/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", dir+"/credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	src, err := section.NewSource(sources.SourceOptions{Name: "aws", Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	assert.IsType(t, &Source{}, src)
}

func TestNewSourceRejectsInvalidConfig(t *testing.T) {
	c := &Config{}
	c.Default()
	_, err := c.NewSource(sources.SourceOptions{Name: "x"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "regions: Required value")
	assert.Contains(t, err.Error(), "accounts: Required value: at least one account is required")
}
