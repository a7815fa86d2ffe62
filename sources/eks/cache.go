package eks

import (
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// cacheEntry is what the source keeps of one cluster between listings.
type cacheEntry struct {
	// expires and described: the DescribeCluster answer trimmed to what
	// the cache may keep (see keepDescribed), reused until expires when it
	// is ACTIVE.
	expires   time.Time
	described *types.Cluster
	// tags and result are the last mapping of described with those tags
	// (from GetResources, or from a describe when GetResources left the
	// cluster out), reused as long as neither changes; result is nil until
	// described is mapped.
	tags   map[string]string
	result *mapped
	// tagged: the last listing had tags for the cluster (from GetResources,
	// or from a DescribeCluster answer when GetResources left it out).
	tagged bool
}

// cached returns the entries of the target's cache that still answer for
// names (ACTIVE and not expired at now), and the names to describe.
func (t *target) cached(names []string, now time.Time) (next map[string]cacheEntry, todo []string) {
	next = make(map[string]cacheEntry, len(names))
	for _, n := range names {
		if e, ok := t.cache[n]; ok && e.described.Status == types.ClusterStatusActive && now.Before(e.expires) {
			next[n] = e
		} else {
			todo = append(todo, n)
		}
	}
	return next, todo
}

// lostTags returns the names whose tags the last listing had and this
// listing's GetResources answer (tags, by ARN) does not. GetResources
// answers every resource ever tagged, with "Tags": [] once all are
// removed, so such a cluster was deleted since ListClusters named it, or
// the tagging API lags behind EKS: either way its tags of this listing are
// unknown, not gone. They are described again: DescribeCluster answers a
// cluster's tags too (describeAll), or that it is gone.
func (t *target) lostTags(names []string, tags map[string]map[string]string) []string {
	var lost []string
	for _, n := range names {
		e, ok := t.cache[n]
		if !ok || !e.tagged {
			continue
		}
		if _, in := tags[aws.ToString(e.described.Arn)]; !in {
			lost = append(lost, n)
		}
	}
	return lost
}

// keepDescribed is what the describe cache keeps of a DescribeCluster
// answer: what the mapping reads, except tags (they come from each
// listing: GetResources, or the describe answers of that listing) and the
// connector's activation data (credentials, never kept).
func keepDescribed(c *types.Cluster) *types.Cluster {
	k := &types.Cluster{Name: c.Name, Arn: c.Arn, CreatedAt: c.CreatedAt, Status: c.Status, Version: c.Version, Endpoint: c.Endpoint}
	if c.CertificateAuthority != nil {
		k.CertificateAuthority = &types.Certificate{Data: c.CertificateAuthority.Data}
	}
	if c.ResourcesVpcConfig != nil {
		k.ResourcesVpcConfig = &types.VpcConfigResponse{EndpointPublicAccess: c.ResourcesVpcConfig.EndpointPublicAccess}
	}
	return k
}

// expiry spreads expiries over the last fifth of the TTL, so that a fleet
// described at once is not described again all at once.
func expiry(now time.Time, ttl time.Duration) time.Time {
	return now.Add(ttl - time.Duration(rand.Int64N(int64(ttl)/5+1)))
}

// cloneCluster copies what a caller could modify, so that the cache stays
// intact.
func cloneCluster(c sources.Cluster) sources.Cluster {
	c.Labels, c.Annotations, c.Namespaces = maps.Clone(c.Labels), maps.Clone(c.Annotations), slices.Clone(c.Namespaces)
	if c.Auth.AWS != nil {
		a := *c.Auth.AWS
		c.Auth.AWS = &a
	}
	if c.Auth.Exec != nil {
		e := *c.Auth.Exec
		e.Args, e.Env = slices.Clone(e.Args), maps.Clone(e.Env)
		c.Auth.Exec = &e
	}
	return c
}
