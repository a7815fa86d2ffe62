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
	"github.com/prometheus/client_golang/prometheus/testutil"
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

func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
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
			// the others: the same answer, renamed and public
			name := strings.TrimPrefix(r.URL.Path, "/clusters/")
			b := strings.ReplaceAll(string(describe), "payments-prod", name)
			_, _ = w.Write([]byte(strings.Replace(b, `"endpointPublicAccess": false`, `"endpointPublicAccess": true`, 1)))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	base := aws.Config{Credentials: credentials.NewStaticCredentialsProvider(baseKey, "secret", "")}
	s, err := New("fixtures", Config{
		Accounts: []Account{{ID: "123456789012", ArgocdRoleARN: "arn:aws:iam::123456789012:role/argocd"}},
		Regions:  []string{regionEU}, Endpoint: srv.URL, TaggingEndpoint: srv.URL, MaxAttempts: 1,
	}, Options{AWSConfig: &base, HTTPClient: srv.Client()})
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
	assert.Nil(t, got[1].Labels, "tags come from GetResources, not from the describe answer")
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
	assert.Equal(t, map[string]bool{"100": true}, f.maxResult)
	assert.Equal(t, map[int]bool{100: true}, f.perPage)
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
	assert.Equal(t, map[int]bool{100: true}, f.perPage)
}

// TestTagsFreshEveryListing: tags, and what they scope (labels, tenant,
// project, namespaces), are read on every listing, while the describe
// cache still holds the cluster.
func TestTagsFreshEveryListing(t *testing.T) {
	f := newFake(t)
	f.add(acctA, regionEU,
		fakeCluster{Name: "one", Tags: map[string]string{"team": "a", "tenant": "acme", "argocd-project": "p1", "argocd-namespaces": "ns-a"}},
		fakeCluster{Name: "untagged", NeverTagged: true})
	clk := newClock()
	s, _ := f.newSource(t, f.testConfig(), clk.Now)
	list := func(t *testing.T) map[string]sources.Cluster {
		t.Helper()
		got, err := s.Clusters(context.Background())
		require.NoError(t, err)
		out := map[string]sources.Cluster{}
		for _, c := range got {
			out[c.Name] = c
		}
		return out
	}

	got := list(t)
	assert.Equal(t, map[string]string{"team": "a", "tenant": "acme", "argocd-project": "p1", "argocd-namespaces": "ns-a"}, got["one"].Labels)
	assert.Equal(t, []string{"acme", "p1"}, []string{got["one"].Tenant, got["one"].Project})
	assert.Equal(t, []string{"ns-a"}, got["one"].Namespaces)
	u := got["untagged"]
	assert.True(t, u.Ready, "missing from GetResources: no tags, nothing else")
	assert.Nil(t, u.Labels)
	assert.Empty(t, u.Tenant+u.Project)
	assert.Nil(t, u.Namespaces)

	t.Run("a tag change shows on the next listing, without a describe", func(t *testing.T) {
		f.resetCounts()
		clk.Advance(time.Minute)
		f.setTags(acctA, regionEU, "one", map[string]string{"team": "b", "tenant": "globex", "argocd-project": "p2", "argocd-namespaces": "ns-b ns-c"})
		got := list(t)
		assert.Equal(t, map[string]string{"team": "b", "tenant": "globex", "argocd-project": "p2", "argocd-namespaces": "ns-b-ns-c"}, got["one"].Labels)
		assert.Equal(t, []string{"globex", "p2"}, []string{got["one"].Tenant, got["one"].Project})
		assert.Equal(t, []string{"ns-b", "ns-c"}, got["one"].Namespaces)
		assert.Equal(t, 0, f.count("DescribeCluster"), "the describe cache holds both clusters")
		assert.Equal(t, 1, f.count("GetResources"))
	})
	t.Run("a namespaces tag that cannot be read makes the cluster not ready at once", func(t *testing.T) {
		f.setTags(acctA, regionEU, "one", map[string]string{"argocd-namespaces": "Not_A_Namespace"})
		got := list(t)
		assert.False(t, got["one"].Ready)
		assert.Contains(t, got["one"].NotReadyReason, "tag argocd-namespaces")
		assert.Equal(t, sources.PhaseReady, got["one"].Phase, "renderability is not the lifecycle")
	})
	t.Run("every tag removed (\"Tags\": []): none", func(t *testing.T) {
		f.setTags(acctA, regionEU, "one", map[string]string{})
		got := list(t)
		assert.True(t, got["one"].Ready)
		assert.Nil(t, got["one"].Labels)
		assert.Empty(t, got["one"].Tenant+got["one"].Project)
		assert.Nil(t, got["one"].Namespaces, "every namespace, as for a cluster never scoped")
	})
	t.Run("unchanged tags: the same clusters", func(t *testing.T) {
		first, second := list(t), list(t)
		assert.Equal(t, first, second)
	})
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
	gauge := func(status string) float64 {
		return counter(t, reg, "argocd_cluster_discovery_eks_clusters", map[string]string{"status": status})
	}
	assert.Equal(t, 2.0, gauge("FAILED"))
	assert.Equal(t, 1.0, gauge("HIBERNATING"))
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
	assert.LessOrEqual(t, f.maxInFlight.Load(), int64(3), "calls in flight, across both regions")
	assert.GreaterOrEqual(t, f.maxInFlight.Load(), int64(2), "describes do run concurrently")
}

func TestDescribeCache(t *testing.T) {
	f := newFake(t)
	f.add(acctA, regionEU, names("c", 5)...)
	f.add(acctA, regionEU, fakeCluster{Name: "new", Status: "CREATING", Creating: true})
	clk := newClock()
	s, reg := f.newSource(t, f.testConfig(), clk.Now)
	ctx := context.Background()
	cache := func(result string) float64 {
		return counter(t, reg, "argocd_cluster_discovery_eks_describe_cache_total", map[string]string{"result": result})
	}

	got, err := s.Clusters(ctx)
	require.NoError(t, err)
	assert.Len(t, got, 6, "the CREATING one is listed too")
	assert.Equal(t, 6, f.count("DescribeCluster"))
	assert.Equal(t, 0.0, cache("hit"))
	assert.Equal(t, 6.0, cache("miss"))

	t.Run("steady state: list and tagging calls, and a describe of the cluster not ACTIVE", func(t *testing.T) {
		f.resetCounts()
		clk.Advance(30 * time.Minute)
		got, err := s.Clusters(ctx)
		require.NoError(t, err)
		assert.Len(t, got, 6)
		assert.Equal(t, 1, f.count("ListClusters"))
		assert.Equal(t, 1, f.count("GetResources"))
		assert.Equal(t, 1, f.count("DescribeCluster"), "only the CREATING one")
		assert.Equal(t, 5.0, cache("hit"))
		assert.Equal(t, 7.0, cache("miss"))
	})
	t.Run("a new name is described, a removed one leaves", func(t *testing.T) {
		f.resetCounts()
		f.add(acctA, regionEU, fakeCluster{Name: "late"})
		f.remove(acctA, regionEU, "c-000")
		got, err := s.Clusters(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{"c-001", "c-002", "c-003", "c-004", "new", "late"}, clusterNames(got))
		assert.Equal(t, 2, f.count("DescribeCluster"), "late and the CREATING one")
		assert.NotContains(t, s.targets[0].cache, "c-000", "pruned")
	})
	t.Run("after the TTL every cluster is described again", func(t *testing.T) {
		f.resetCounts()
		clk.Advance(time.Hour)
		_, err := s.Clusters(ctx)
		require.NoError(t, err)
		assert.Equal(t, 6, f.count("DescribeCluster"))
	})
	t.Run("the cache hands out copies", func(t *testing.T) {
		got, err := s.Clusters(ctx)
		require.NoError(t, err)
		got[0].Labels["team"] = "mutated"
		got[0].Auth.AWS.RoleARN = "mutated"
		again, err := s.Clusters(ctx)
		require.NoError(t, err)
		assert.Equal(t, "payments", again[0].Labels["team"])
		assert.NotEqual(t, "mutated", again[0].Auth.AWS.RoleARN)
	})
	assert.Equal(t, 1.0, counter(t, reg, "argocd_cluster_discovery_eks_clusters", map[string]string{"status": "CREATING"}))
	assert.Equal(t, 5.0, counter(t, reg, "argocd_cluster_discovery_eks_clusters", map[string]string{"status": "ACTIVE"}))
}

func TestCacheSpreadsExpiry(t *testing.T) {
	f := newFake(t)
	f.add(acctA, regionEU, names("c", 200)...)
	clk := newClock()
	s, _ := f.newSource(t, f.testConfig(), clk.Now)
	_, err := s.Clusters(context.Background())
	require.NoError(t, err)
	f.resetCounts()
	clk.Advance(54 * time.Minute) // in the last fifth of the hour: some expired, not all
	_, err = s.Clusters(context.Background())
	require.NoError(t, err)
	n := f.count("DescribeCluster")
	assert.Greater(t, n, 0)
	assert.Less(t, n, 200)
}

// TestThrottledThenAnswered: TooManyRequestsException is retried by the
// SDK's retryer with backoff, and the listing succeeds.
func TestThrottledThenAnswered(t *testing.T) {
	throttle := &fakeResp{Status: http.StatusTooManyRequests, ErrType: "TooManyRequestsException"}
	throttleTagging := &fakeResp{Status: http.StatusBadRequest, ErrType: "ThrottledException"} // the tagging API's own
	f := newFake(t)
	f.add(acctA, regionEU, names("c", 4)...)
	f.Hook = func(r fakeReq) *fakeResp {
		if r.Op == "DescribeCluster" && r.N <= 2 || r.Op == "ListClusters" && r.N == 1 {
			return throttle
		}
		if r.Op == "GetResources" && r.N == 1 {
			return throttleTagging
		}
		return nil
	}
	s, reg := f.newSource(t, f.testConfig(), nil)
	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	assert.Len(t, got, 4)
	calls := func(op, outcome string) float64 {
		return counter(t, reg, "argocd_cluster_discovery_eks_api_calls_total", map[string]string{"operation": op, "outcome": outcome})
	}
	assert.Equal(t, 2.0, calls("DescribeCluster", "throttled"))
	assert.Equal(t, 4.0, calls("DescribeCluster", "success"))
	assert.Equal(t, 1.0, calls("ListClusters", "throttled"))
	assert.Equal(t, 1.0, calls("GetResources", "throttled"))
	assert.Equal(t, 1.0, calls("GetResources", "success"))
	assert.Equal(t, "payments", got[0].Labels["team"])
	assert.Equal(t, 1.0, calls("AssumeRole", "success"))
}

// on answers requests of operation op (and, when set, of that region or
// cluster name) with resp.
func on(op, region, name string, resp *fakeResp) func(fakeReq) *fakeResp {
	return func(r fakeReq) *fakeResp {
		if r.Op == op && (region == "" || r.Region == region) && (name == "" || r.Name == name) {
			return resp
		}
		return nil
	}
}

// TestListingFailures: any failing call of any (account, region) fails the
// whole listing with no partial result, an error naming the account,
// region and call, and an error counted by kind.
func TestListingFailures(t *testing.T) {
	throttle := &fakeResp{Status: http.StatusTooManyRequests, ErrType: "TooManyRequestsException"}
	for _, tc := range []struct {
		name    string
		hook    func(fakeReq) *fakeResp
		want    []string
		notWant []string
		kind    string
		region  string
		calls   map[string]int
	}{
		{name: "throttled on every attempt", hook: on("DescribeCluster", "", "c-002", throttle),
			want: []string{"account 111111111111 region eu-west-1: describe cluster c-002:", "TooManyRequestsException", "exceeded maximum number of attempts, 3"},
			kind: "throttled", region: regionEU},
		{name: "one region answers 500", hook: on("ListClusters", regionUS, "", &fakeResp{Status: http.StatusInternalServerError, ErrType: "ServerException"}),
			want: []string{"account 111111111111 region us-east-1: list clusters:", "StatusCode: 500"}, notWant: []string{"region eu-west-1"},
			kind: "server", region: regionUS},
		{name: "AssumeRole denied", hook: on("AssumeRole", "", "", &fakeResp{Status: http.StatusForbidden, ErrType: "AccessDenied"}),
			want: []string{"account 111111111111 region ", ": assume role arn:aws:iam::111111111111:role/discovery:", "AccessDenied"},
			kind: "assume_role", calls: map[string]int{"AssumeRole": 1, "ListClusters": 0}},
		{name: "expired token, key redacted", hook: on("ListClusters", regionEU, "", &fakeResp{Status: http.StatusForbidden, ErrType: "ExpiredTokenException",
			Body: `{"message":"The security token included in the request is expired (key ` + assumedKey(acctA) + `)"}`}),
			want:    []string{"account 111111111111 region eu-west-1: list clusters:", "ExpiredTokenException", "(key <redacted>)"},
			notWant: []string{assumedKey(acctA)}, kind: "expired_token", region: regionEU},
		{name: "malformed list", hook: on("ListClusters", regionEU, "", &fakeResp{Status: 200, Body: `{"clusters": [`}),
			want: []string{"account 111111111111 region eu-west-1: list clusters:"}, kind: "invalid_response", region: regionEU},
		{name: "malformed describe", hook: on("DescribeCluster", regionEU, "", &fakeResp{Status: 200, Body: `{"cluster": {"name": 1}}`}),
			want: []string{"account 111111111111 region eu-west-1: describe cluster c-00"}, kind: "invalid_response", region: regionEU},
		{name: "nextToken repeated", hook: on("ListClusters", regionEU, "", &fakeResp{Status: 200, Body: `{"clusters":["c-000"],"nextToken":"same"}`}),
			want: []string{"account 111111111111 region eu-west-1: list clusters: nextToken of an earlier page returned again"},
			kind: "other", region: regionEU},
		{name: "tagging AccessDenied", hook: on("GetResources", regionUS, "", &fakeResp{Status: http.StatusBadRequest, ErrType: "AccessDeniedException",
			Body: `{"__type":"AccessDeniedException","Message":"User: arn:aws:sts::111111111111:assumed-role/discovery/argocd-cluster-discovery is not authorized to perform: tag:GetResources"}`}),
			want:    []string{"account 111111111111 region us-east-1: get cluster tags:", "GetResources", "AccessDeniedException", "not authorized to perform: tag:GetResources"},
			notWant: []string{"region eu-west-1"}, kind: "access_denied", region: regionUS},
		{name: "tagging answers 500", hook: on("GetResources", regionEU, "", &fakeResp{Status: http.StatusInternalServerError, ErrType: "InternalServiceException"}),
			want: []string{"account 111111111111 region eu-west-1: get cluster tags:", "StatusCode: 500", "InternalServiceException",
				"exceeded maximum number of attempts, 3"},
			kind: "server", region: regionEU},
		{name: "malformed tagging answer", hook: on("GetResources", regionEU, "", &fakeResp{Status: 200, Body: `{"ResourceTagMappingList": [`}),
			want: []string{"account 111111111111 region eu-west-1: get cluster tags:"}, kind: "invalid_response", region: regionEU},
		{name: "PaginationToken repeated", hook: on("GetResources", regionEU, "", &fakeResp{Status: 200, Body: `{"PaginationToken":"same","ResourceTagMappingList":[]}`}),
			want: []string{"account 111111111111 region eu-west-1: get cluster tags: PaginationToken of an earlier page returned again"},
			kind: "other", region: regionEU},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.add(acctA, regionEU, names("c", 4)...)
			f.add(acctA, regionUS, names("d", 4)...)
			f.Hook = tc.hook
			cfg := f.testConfig()
			cfg.Regions = []string{regionEU, regionUS}
			s, reg := f.newSource(t, cfg, nil)

			got, err := s.Clusters(context.Background())
			require.Error(t, err)
			assert.Nil(t, got)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			for _, w := range append(tc.notWant, "base-secret-key", baseKey) {
				assert.NotContains(t, err.Error(), w)
			}
			labels := map[string]string{"kind": tc.kind, "account": acctA}
			if tc.region != "" {
				labels["region"] = tc.region
			}
			assert.GreaterOrEqual(t, counter(t, reg, "argocd_cluster_discovery_eks_errors_total", labels), 1.0)
			for op, n := range tc.calls {
				assert.Equal(t, n, f.count(op), op)
			}
		})
	}
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
			s, _ := f.newSource(t, cfg, nil)
			got, err := s.Clusters(context.Background())
			require.NoError(t, err)
			require.Equal(t, tc.want, clusterNames(got))
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

	assert.Equal(t, map[string]bool{assumedKey(acctA): true, assumedKey(acctB): true}, f.seenKeys,
		"EKS and the tagging API saw SigV4 with the assumed credentials only, never the base key")
	assert.Equal(t, map[string]bool{"session-token-" + acctA: true, "session-token-" + acctB: true}, f.seenToken)
	assert.Equal(t, 2, f.count("AssumeRole"), "one per account, cached across regions and listings")
	slices.SortFunc(f.assumed, func(a, b map[string]string) int { return strings.Compare(a["RoleArn"], b["RoleArn"]) })
	assert.Equal(t, []map[string]string{
		{"RoleArn": "arn:aws:iam::111111111111:role/discovery", "RoleSessionName": "argocd-cluster-discovery", "ExternalId": "ext-A"},
		{"RoleArn": "arn:aws:iam::222222222222:role/discovery", "RoleSessionName": "discovery-b", "ExternalId": ""},
	}, f.assumed)
}

func TestBaseCredentialsOfAnotherAccount(t *testing.T) {
	f := newFake(t)
	f.baseAccount(acctB)
	f.add(acctB, regionEU, names("c", 1)...)
	cfg := f.testConfig()
	cfg.Accounts = []Account{{ID: acctA}} // no role: the base credentials are used, but they are B's
	s, _ := f.newSource(t, cfg, nil)
	got, err := s.Clusters(context.Background())
	require.Error(t, err)
	assert.Nil(t, got)
	assert.Contains(t, err.Error(), "account 111111111111 region eu-west-1: cluster c-000 belongs to account 222222222222")
	assert.Equal(t, map[string]bool{baseKey: true}, f.seenKeys)
}

func TestCancelledListing(t *testing.T) {
	f := newFake(t)
	f.Delay = time.Second
	f.add(acctA, regionEU, names("c", 3)...)
	s, reg := f.newSource(t, f.testConfig(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	got, err := s.Clusters(ctx)
	require.Error(t, err)
	assert.Nil(t, got)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 1.0, counter(t, reg, "argocd_cluster_discovery_eks_errors_total", map[string]string{"kind": "timeout"}))
}

func TestEmptyFleet(t *testing.T) {
	f := newFake(t)
	s, reg := f.newSource(t, f.testConfig(), nil)
	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	assert.NotNil(t, got)
	assert.Empty(t, got)
	assert.Equal(t, 1.0, counter(t, reg, "argocd_cluster_discovery_eks_listing_duration_seconds", map[string]string{"region": regionEU}))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP argocd_cluster_discovery_eks_describe_cache_total Listed cluster names answered from the describe cache (hit) or described (miss).
# TYPE argocd_cluster_discovery_eks_describe_cache_total counter
argocd_cluster_discovery_eks_describe_cache_total{result="hit"} 0
argocd_cluster_discovery_eks_describe_cache_total{result="miss"} 0
`), "argocd_cluster_discovery_eks_describe_cache_total"))
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	_, err := New("x", Config{}, Options{AWSConfig: &aws.Config{}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "regions: required")
	assert.Contains(t, err.Error(), "accounts: at least one account is required")
}

func TestNewRegistersMetricsOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := Config{Accounts: []Account{{ID: acctA}}, Regions: []string{regionEU}}
	for _, name := range []string{"a", "b"} {
		_, err := New(name, cfg, Options{AWSConfig: &aws.Config{}, Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"source": name}, reg)})
		require.NoError(t, err, "two sources, told apart by the caller's source label")
	}
	_, err := New("a", cfg, Options{AWSConfig: &aws.Config{}, Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"source": "a"}, reg)})
	require.Error(t, err, "the same source twice")
}
