package eks

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	fakeaws "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/aws"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

const fixtures = "../../testdata/fixtures/eks"

// Test identities. The base key signs STS calls, and EKS calls of accounts
// without a role.
const (
	baseKey  = "AKIABASEEXAMPLE00001"
	acctA    = "111111111111"
	acctB    = "222222222222"
	regionEU = "eu-west-1"
	regionUS = "us-east-1"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	require.NoError(t, err)
	return b
}

// assumedKey is the access key the fake STS hands out for account.
func assumedKey(account string) string { return fakeaws.AssumedKey(account) }

// clusterARN is the ARN of an EKS cluster, in the partition of its
// region.
func clusterARN(name, account, region string) string {
	return fakeaws.ClusterARN(name, account, region)
}

// The fake AWS is internal/fake/aws; these are its names in this
// package's tests.
type (
	fakeCluster = fakeaws.Cluster
	fakeReq     = fakeaws.Request
	fakeResp    = fakeaws.Response
)

// fakeAWS is the shared fake with this package's shorthands.
type fakeAWS struct {
	*fakeaws.Server
	t testing.TB
}

func newFake(t testing.TB) *fakeAWS {
	s, err := fakeaws.New(fixtures)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return &fakeAWS{Server: s, t: t}
}

func (f *fakeAWS) add(account, region string, cs ...fakeCluster) { f.Add(account, region, cs...) }

// remove deletes a cluster from the fake.
func (f *fakeAWS) remove(account, region, name string) { f.Remove(account, region, name) }

// setTags replaces the tags of a cluster of the fake (nil: the fixture's).
func (f *fakeAWS) setTags(account, region, name string, tags map[string]string) {
	require.NoError(f.t, f.SetTags(account, region, name, tags))
}

// baseAccount makes the base credentials belong to account.
func (f *fakeAWS) baseAccount(account string) { f.SetKey(baseKey, account) }

func (f *fakeAWS) count(op string) int { return f.Count(op) }

func (f *fakeAWS) resetCounts() { f.ResetCounts() }

// testConfig is one account reached through a discovery role, in
// regionEU, with fast retries and the fake as both endpoints.
func (f *fakeAWS) testConfig() Config {
	return Config{
		Accounts: []Account{{ID: acctA, RoleARN: "arn:aws:iam::" + acctA + ":role/discovery", ExternalID: "ext-A",
			ArgocdRoleARN: "arn:aws:iam::" + acctA + ":role/argocd"}},
		Regions:  []string{regionEU},
		Endpoint: f.URL(), TaggingEndpoint: f.URL(), STSEndpoint: f.URL(),
		MaxAttempts: 3, MaxBackoff: sources.D(time.Millisecond),
	}
}

// newSource builds a source of cfg (defaulted) on the fake with a fresh
// registry.
func (f *fakeAWS) newSource(t testing.TB, cfg Config, now func() time.Time) (*Source, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Accounts = slices.Clone(cfg.Accounts) // Default writes into it
	cfg.Default()
	s, err := newSource(&cfg, sources.SourceOptions{Name: "test-eks", Registerer: reg},
		hooks{awsConfig: baseAWSConfig(), httpClient: f.Client(), now: now})
	require.NoError(t, err)
	return s, reg
}

// baseAWSConfig is the base configuration of the tests' sources: the
// base key's static credentials.
func baseAWSConfig() *aws.Config {
	return &aws.Config{Region: "us-west-2", Credentials: credentials.NewStaticCredentialsProvider(baseKey, "base-secret-key", "")}
}

// names makes n active clusters named prefix-000...
func names(prefix string, n int) []fakeCluster {
	out := make([]fakeCluster, n)
	for i := range out {
		out[i] = fakeCluster{Name: fmt.Sprintf("%s-%03d", prefix, i)}
	}
	return out
}
