package aws_test

import (
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	tagging "github.com/aws/aws-sdk-go-v2/service/resourcegroupstaggingapi"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeaws "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/aws"
)

const (
	account = "111111111111"
	region  = "eu-west-1"
	baseKey = "AKIABASEEXAMPLE00001"
)

// sdkConfig is the SDK's configuration for the fake with the credentials
// of key.
func sdkConfig(f *fakeaws.Server, key, token string) sdkaws.Config {
	return sdkaws.Config{Region: region, HTTPClient: f.Client(), BaseEndpoint: sdkaws.String(f.URL()),
		Credentials: credentials.NewStaticCredentialsProvider(key, "secret", token)}
}

func newServer(t *testing.T) *fakeaws.Server {
	t.Helper()
	f, err := fakeaws.New("../../../testdata/fixtures/eks")
	require.NoError(t, err)
	t.Cleanup(f.Close)
	f.SetKey(baseKey, account)
	return f
}

// TestTheSDKReadsTheFake: the SDK's own clients page through ListClusters
// and GetResources, decode DescribeCluster with the test's changes, and
// sign with the credentials AssumeRole hands out.
func TestTheSDKReadsTheFake(t *testing.T) {
	f := newServer(t)
	f.PageSize, f.TagPageSize = 2, 2
	f.Add(account, region,
		fakeaws.Cluster{Name: "a", Tags: map[string]string{"tenant": "acme"}, Endpoint: "https://a.example.com", CAData: "Q0E="},
		fakeaws.Cluster{Name: "b", Status: "UPDATING", Private: true},
		fakeaws.Cluster{Name: "c", Creating: true, Status: "CREATING", NeverTagged: true},
		fakeaws.Cluster{Name: "d", Tags: map[string]string{"tenant": "acme"}, TaggingLags: true})

	creds, err := sts.NewFromConfig(sdkConfig(f, baseKey, "")).AssumeRole(t.Context(),
		&sts.AssumeRoleInput{RoleArn: sdkaws.String("arn:aws:iam::" + account + ":role/discovery"), RoleSessionName: sdkaws.String("s")})
	require.NoError(t, err)
	assert.Equal(t, fakeaws.AssumedKey(account), sdkaws.ToString(creds.Credentials.AccessKeyId))
	cfg := sdkConfig(f, sdkaws.ToString(creds.Credentials.AccessKeyId), sdkaws.ToString(creds.Credentials.SessionToken))

	client := eks.NewFromConfig(cfg)
	var names []string
	for p := eks.NewListClustersPaginator(client, &eks.ListClustersInput{MaxResults: sdkaws.Int32(100)}); p.HasMorePages(); {
		page, err := p.NextPage(t.Context())
		require.NoError(t, err)
		names = append(names, page.Clusters...)
	}
	assert.Equal(t, []string{"a", "b", "c", "d"}, names)
	assert.Equal(t, 2, f.Count("ListClusters"), "pages of 2")

	a, err := client.DescribeCluster(t.Context(), &eks.DescribeClusterInput{Name: sdkaws.String("a")})
	require.NoError(t, err)
	assert.Equal(t, "https://a.example.com", sdkaws.ToString(a.Cluster.Endpoint))
	assert.Equal(t, "Q0E=", sdkaws.ToString(a.Cluster.CertificateAuthority.Data))
	assert.Equal(t, ekstypes.ClusterStatusActive, a.Cluster.Status)
	assert.Equal(t, fakeaws.ClusterARN("a", account, region), sdkaws.ToString(a.Cluster.Arn))
	assert.Equal(t, map[string]string{"tenant": "acme"}, a.Cluster.Tags)
	b, err := client.DescribeCluster(t.Context(), &eks.DescribeClusterInput{Name: sdkaws.String("b")})
	require.NoError(t, err)
	assert.Equal(t, ekstypes.ClusterStatusUpdating, b.Cluster.Status)
	assert.False(t, b.Cluster.ResourcesVpcConfig.EndpointPublicAccess)
	c, err := client.DescribeCluster(t.Context(), &eks.DescribeClusterInput{Name: sdkaws.String("c")})
	require.NoError(t, err)
	assert.Nil(t, c.Cluster.Endpoint, "no endpoint before ACTIVE")
	assert.Nil(t, c.Cluster.CertificateAuthority)
	assert.Empty(t, c.Cluster.Tags, "never tagged")

	var tagged []string
	tc := tagging.NewFromConfig(cfg)
	for p := tagging.NewGetResourcesPaginator(tc, &tagging.GetResourcesInput{ResourceTypeFilters: []string{"eks:cluster"},
		ResourcesPerPage: sdkaws.Int32(100)}); p.HasMorePages(); {
		page, err := p.NextPage(t.Context())
		require.NoError(t, err)
		for _, m := range page.ResourceTagMappingList {
			tagged = append(tagged, sdkaws.ToString(m.ResourceARN))
		}
	}
	assert.Equal(t, []string{fakeaws.ClusterARN("a", account, region), fakeaws.ClusterARN("b", account, region)}, tagged,
		"neither a never-tagged cluster nor one the tagging API has not caught up with is in GetResources")
	d, err := client.DescribeCluster(t.Context(), &eks.DescribeClusterInput{Name: sdkaws.String("d")})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"tenant": "acme"}, d.Cluster.Tags, "the describe answer has them")
	assert.Equal(t, map[string]bool{fakeaws.AssumedKey(account): true}, f.SeenKeys())
	assert.Equal(t, map[string]bool{fakeaws.SessionToken(account): true}, f.SeenTokens())
}

// TestErrorsInUpstreamShapes: what the SDK makes of the fake's errors is
// what it makes of AWS's: the error codes of each protocol.
func TestErrorsInUpstreamShapes(t *testing.T) {
	f := newServer(t)
	f.KnownKeysOnly = true
	f.Add(account, region, fakeaws.Cluster{Name: "a"})
	code := func(err error) string {
		var api smithy.APIError
		require.ErrorAs(t, err, &api)
		return api.ErrorCode()
	}

	_, err := eks.NewFromConfig(sdkConfig(f, "AKIAUNKNOWN000000000", "")).ListClusters(t.Context(), &eks.ListClustersInput{})
	assert.Equal(t, "UnrecognizedClientException", code(err))
	assert.Equal(t, []string{"GET /clusters"}, f.BadAuth())

	client := eks.NewFromConfig(sdkConfig(f, baseKey, ""))
	_, err = client.DescribeCluster(t.Context(), &eks.DescribeClusterInput{Name: sdkaws.String("gone")})
	var notFound *ekstypes.ResourceNotFoundException
	require.ErrorAs(t, err, &notFound)

	f.Remove(account, region, "a")
	_, err = client.DescribeCluster(t.Context(), &eks.DescribeClusterInput{Name: sdkaws.String("a")})
	require.ErrorAs(t, err, &notFound, "removed")
	f.DescribeRemoved = true
	_, err = client.DescribeCluster(t.Context(), &eks.DescribeClusterInput{Name: sdkaws.String("a")})
	require.NoError(t, err, "a describe that races a removal")

	f.Hook = func(r fakeaws.Request) *fakeaws.Response {
		switch r.Op {
		case "GetResources":
			return &fakeaws.Response{Status: 400, ErrType: "ThrottlingException"}
		case "AssumeRole":
			return &fakeaws.Response{Status: 403, ErrType: "AccessDenied"}
		}
		return nil
	}
	_, err = tagging.NewFromConfig(sdkConfig(f, baseKey, ""), func(o *tagging.Options) { o.RetryMaxAttempts = 1 }).
		GetResources(t.Context(), &tagging.GetResourcesInput{ResourceTypeFilters: []string{"eks:cluster"}, ResourcesPerPage: sdkaws.Int32(10)})
	assert.Equal(t, "ThrottlingException", code(err))
	_, err = sts.NewFromConfig(sdkConfig(f, baseKey, "")).AssumeRole(t.Context(),
		&sts.AssumeRoleInput{RoleArn: sdkaws.String("arn:aws:iam::" + account + ":role/x"), RoleSessionName: sdkaws.String("s")})
	assert.Equal(t, "AccessDenied", code(err))
}
