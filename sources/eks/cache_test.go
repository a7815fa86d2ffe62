package eks

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// newClock is a test clock at a fixed time, moved by Step.
func newClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// listByName lists s and returns its clusters by name.
func listByName(t *testing.T, s *Source) map[string]sources.Cluster {
	t.Helper()
	got, err := s.Clusters(context.Background())
	require.NoError(t, err)
	out := map[string]sources.Cluster{}
	for _, c := range got {
		out[c.Name] = c
	}
	return out
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
	list := func(t *testing.T) map[string]sources.Cluster { return listByName(t, s) }

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
		clk.Step(time.Minute)
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
		clk.Step(30 * time.Minute)
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
		clk.Step(time.Hour)
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
	assert.Equal(t, 1.0, counter(t, reg, "argocd_cluster_discovery_eks_upstream_clusters", map[string]string{"state": "CREATING"}))
	assert.Equal(t, 5.0, counter(t, reg, "argocd_cluster_discovery_eks_upstream_clusters", map[string]string{"state": "ACTIVE"}))
}

func TestCacheSpreadsExpiry(t *testing.T) {
	f := newFake(t)
	f.add(acctA, regionEU, names("c", 200)...)
	clk := newClock()
	s, _ := f.newSource(t, f.testConfig(), clk.Now)
	_, err := s.Clusters(context.Background())
	require.NoError(t, err)
	f.resetCounts()
	clk.Step(54 * time.Minute) // in the last fifth of the hour: some expired, not all
	_, err = s.Clusters(context.Background())
	require.NoError(t, err)
	n := f.count("DescribeCluster")
	assert.Positive(t, n)
	assert.Less(t, n, 200)
}

// TestTagsLostByTheTaggingAnswer: a cluster the tagging API has not caught
// up with has the tags of its describe answer; one the last listing had
// tags for and GetResources now leaves out is described again, and never
// listed without its tags for a listing: with DescribeCluster's tags while
// the tagging API lags, absent (a departure to confirm) once deleted since
// ListClusters named it, not listed untagged from the describe cache. A
// cluster never tagged costs no describe.
func TestTagsLostByTheTaggingAnswer(t *testing.T) {
	f := newFake(t)
	acme := map[string]string{"tenant": "acme", "team": "a"}
	f.add(acctA, regionEU,
		fakeCluster{Name: "one", Tags: acme},
		fakeCluster{Name: "two", Tags: acme},
		fakeCluster{Name: "untagged", NeverTagged: true})
	var stale atomic.Bool // ListClusters answers the names of before "two" was deleted
	f.Hook = func(r fakeReq) *fakeResp {
		if r.Op == "ListClusters" && stale.Load() {
			return &fakeResp{Status: http.StatusOK, Body: `{"clusters":["one","two","untagged","new"]}`}
		}
		return nil
	}
	clk := newClock()
	s, _ := f.newSource(t, f.testConfig(), clk.Now)
	list := func(t *testing.T) map[string]sources.Cluster {
		clk.Step(time.Minute) // within the describe cache's TTL
		return listByName(t, s)
	}
	got := list(t)
	assert.Nil(t, got["untagged"].Labels, "no tags anywhere")

	t.Run("a new cluster the tagging API has not caught up with: the tags of its describe", func(t *testing.T) {
		f.add(acctA, regionEU, fakeCluster{Name: "new", Tags: acme, TaggingLags: true})
		f.resetCounts()
		got := list(t)
		assert.Equal(t, "acme", got["new"].Tenant)
		assert.Equal(t, acme, got["new"].Labels)
		assert.Equal(t, 1, f.count("DescribeCluster"), "the new name only")
	})
	t.Run("the tagging API lags: the tags of DescribeCluster, on every listing until it catches up", func(t *testing.T) {
		f.Set(acctA, regionEU, fakeCluster{Name: "one", Tags: acme, TaggingLags: true})
		for range 2 {
			f.resetCounts()
			got := list(t)
			for _, n := range []string{"one", "new"} {
				assert.Equal(t, "acme", got[n].Tenant, n)
				assert.Equal(t, acme, got[n].Labels, n)
			}
			assert.Equal(t, 2, f.count("DescribeCluster"), "one and new, not untagged")
		}
		f.Set(acctA, regionEU, fakeCluster{Name: "one", Tags: acme}, fakeCluster{Name: "new", Tags: acme})
		f.resetCounts()
		got := list(t)
		assert.Equal(t, "acme", got["one"].Tenant)
		assert.Equal(t, 0, f.count("DescribeCluster"), "answered by GetResources again")
	})
	t.Run("deleted after ListClusters named it: absent, not untagged", func(t *testing.T) {
		f.remove(acctA, regionEU, "two")
		stale.Store(true)
		defer stale.Store(false)
		f.resetCounts()
		got := list(t)
		assert.Equal(t, []string{"new", "one", "untagged"}, slices.Sorted(maps.Keys(got)))
		assert.Equal(t, 1, f.count("DescribeCluster"), "two, answered ResourceNotFoundException")
	})
}
