package eks

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

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
func assumedKey(account string) string { return "ASIA" + account + "FAKE" }

// fakeCluster is one cluster of the fake EKS; the describe answer is the
// fixture with these fields changed.
type fakeCluster struct {
	Name    string
	Status  string // default ACTIVE
	Private bool
	// Tags are the cluster's tags, in both the describe and the
	// GetResources answers; nil means the fixture's.
	Tags map[string]string
	// NeverTagged leaves the cluster out of GetResources answers, as AWS
	// does for resources that never had a tag (Tags is then unused).
	NeverTagged bool
	// Creating drops endpoint and certificate authority, as EKS does before
	// ACTIVE.
	Creating bool
}

// fakeReq is a request as the fake understood it; N counts the requests of
// that operation so far, this one included.
type fakeReq struct {
	Op, Account, Region, Name string
	N                         int
}

// fakeResp replaces the fake's answer when a hook returns one.
type fakeResp struct {
	Status  int
	ErrType string // x-amzn-ErrorType (EKS) or error code (STS)
	Body    string // raw body; a JSON message is made from ErrType otherwise
}

// fakeAWS serves ListClusters and DescribeCluster (restJson1), the
// Resource Groups Tagging API's GetResources (awsJson1_1) and STS
// AssumeRole (awsQuery) from one httptest server, telling accounts apart by
// the SigV4 access key, regions by the credential scope and services by
// its signing name.
type fakeAWS struct {
	t   testing.TB
	srv *httptest.Server

	// PageSize caps the names per ListClusters page (the source asks 100).
	PageSize int
	// TagPageSize caps the resources per GetResources page (the source
	// asks 100).
	TagPageSize int
	// Delay is spent in every EKS and tagging call, for concurrency tests.
	Delay time.Duration
	// Hook may answer a request instead of the fake.
	Hook func(fakeReq) *fakeResp

	describeTmpl []byte
	fixtureTags  map[string]string
	assumeXML    string

	inFlight, maxInFlight atomic.Int64

	mu        sync.Mutex
	clusters  map[string][]fakeCluster // by account/region
	keys      map[string]string        // access key → account
	calls     map[string]int           // by operation
	seenKeys  map[string]bool          // access keys that signed EKS and tagging calls
	seenToken map[string]bool          // x-amz-security-token of EKS and tagging calls
	maxResult map[string]bool          // maxResults values seen
	perPage   map[int]bool             // GetResources ResourcesPerPage values seen
	assumed   []map[string]string      // AssumeRole form values
	bodies    map[describeKey][]byte   // describe answers made so far
}

// describeKey is the comparable identity of a describe answer.
type describeKey struct {
	account, region, name, status string
	private, creating             bool
	tags                          string
}

func newFake(t testing.TB) *fakeAWS {
	f := &fakeAWS{
		t: t, PageSize: 100,
		describeTmpl: readFixture(t, "eks-describe-cluster.json"),
		assumeXML:    string(readFixture(t, "sts-assume-role-response.xml")),
		clusters:     map[string][]fakeCluster{}, keys: map[string]string{},
		calls: map[string]int{}, seenKeys: map[string]bool{}, seenToken: map[string]bool{}, maxResult: map[string]bool{},
		perPage: map[int]bool{}, bodies: map[describeKey][]byte{}, TagPageSize: 100,
	}
	var fixture struct {
		Cluster struct{ Tags map[string]string }
	}
	require.NoError(t, json.Unmarshal(f.describeTmpl, &fixture))
	f.fixtureTags = fixture.Cluster.Tags
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	// Keep a connection per concurrent call, as the SDK's own client does
	// (10 per host), instead of net/http's 2.
	f.srv.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 100
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAWS) add(account, region string, cs ...fakeCluster) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := account + "/" + region
	f.clusters[k] = append(f.clusters[k], cs...)
}

// remove deletes a cluster from the fake.
func (f *fakeAWS) remove(account, region, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := account + "/" + region
	var keep []fakeCluster
	for _, c := range f.clusters[k] {
		if c.Name != name {
			keep = append(keep, c)
		}
	}
	f.clusters[k] = keep
}

// setTags replaces the tags of a cluster of the fake (nil: the fixture's).
func (f *fakeAWS) setTags(account, region, name string, tags map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := f.clusters[account+"/"+region]
	for i := range cs {
		if cs[i].Name == name {
			cs[i].Tags = tags
			return
		}
	}
	f.t.Fatalf("no cluster %s in %s/%s", name, account, region)
}

// tagsOf is what the fake answers as c's tags.
func (f *fakeAWS) tagsOf(c fakeCluster) map[string]string {
	if c.Tags == nil {
		return f.fixtureTags
	}
	return c.Tags
}

// baseAccount makes the base credentials belong to account.
func (f *fakeAWS) baseAccount(account string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys[baseKey] = account
}

func (f *fakeAWS) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *fakeAWS) resetCounts() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = map[string]int{}
}

var authRe = regexp.MustCompile(`Credential=([A-Z0-9]+)/[0-9]+/([a-z0-9-]+)/([a-z]+)/aws4_request`)

func (f *fakeAWS) serve(w http.ResponseWriter, r *http.Request) {
	m := authRe.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		http.Error(w, "unsigned request", http.StatusForbidden)
		return
	}
	key, region, service := m[1], m[2], m[3]
	req := fakeReq{Region: region}
	switch {
	case service == "sts" && r.Method == http.MethodPost && r.URL.Path == "/":
		req.Op = "AssumeRole"
	case service == "eks" && r.Method == http.MethodGet && r.URL.Path == "/clusters":
		req.Op = "ListClusters"
	case service == "eks" && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/clusters/"):
		req.Op, req.Name = "DescribeCluster", strings.TrimPrefix(r.URL.Path, "/clusters/")
	case service == "tagging" && r.Method == http.MethodPost && r.URL.Path == "/" &&
		r.Header.Get("X-Amz-Target") == "ResourceGroupsTaggingAPI_20170126.GetResources" &&
		r.Header.Get("Content-Type") == "application/x-amz-json-1.1":
		req.Op = "GetResources"
	default:
		http.Error(w, "unexpected "+service+" "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}

	f.mu.Lock()
	f.calls[req.Op]++
	req.N = f.calls[req.Op]
	req.Account = f.keys[key]
	if service != "sts" {
		f.seenKeys[key] = true
		if tok := r.Header.Get("X-Amz-Security-Token"); tok != "" {
			f.seenToken[tok] = true
		}
	}
	hook := f.Hook
	f.mu.Unlock()

	if service != "sts" {
		n := f.inFlight.Add(1)
		defer f.inFlight.Add(-1)
		for {
			mx := f.maxInFlight.Load()
			if n <= mx || f.maxInFlight.CompareAndSwap(mx, n) {
				break
			}
		}
		if f.Delay > 0 {
			select {
			case <-time.After(f.Delay):
			case <-r.Context().Done():
				return
			}
		}
	}
	if hook != nil {
		if resp := hook(req); resp != nil {
			f.writeError(w, service, resp)
			return
		}
	}
	switch req.Op {
	case "AssumeRole":
		f.assumeRole(w, r)
	case "ListClusters":
		f.list(w, r, req)
	case "DescribeCluster":
		f.describe(w, req)
	case "GetResources":
		f.getResources(w, r, req)
	}
}

func (f *fakeAWS) writeError(w http.ResponseWriter, service string, resp *fakeResp) {
	body := resp.Body
	switch service {
	case "sts":
		if body == "" {
			body = `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>` + resp.ErrType +
				`</Code><Message>not authorized to perform: sts:AssumeRole</Message></Error><RequestId>req-1</RequestId></ErrorResponse>`
		}
		w.Header().Set("Content-Type", "text/xml")
	case "tagging": // awsJson1_1: the error code is the body's __type
		if body == "" {
			body = `{"__type":"` + resp.ErrType + `","Message":"` + resp.ErrType + ` from the fake"}`
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	default:
		if resp.ErrType != "" {
			w.Header().Set("X-Amzn-ErrorType", resp.ErrType)
		}
		if body == "" {
			body = `{"message":"` + resp.ErrType + ` from the fake"}`
		}
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write([]byte(body))
}

func (f *fakeAWS) assumeRole(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	roleARN := r.Form.Get("RoleArn")
	parts := strings.Split(roleARN, ":")
	if r.Form.Get("Action") != "AssumeRole" || len(parts) < 6 {
		http.Error(w, "bad AssumeRole", http.StatusBadRequest)
		return
	}
	account := parts[4]
	f.mu.Lock()
	f.keys[assumedKey(account)] = account
	f.assumed = append(f.assumed, map[string]string{"RoleArn": roleARN, "RoleSessionName": r.Form.Get("RoleSessionName"), "ExternalId": r.Form.Get("ExternalId")})
	f.mu.Unlock()
	xml := strings.ReplaceAll(f.assumeXML, "ASIAQEXAMPLEFAKE7Q2M", assumedKey(account))
	xml = strings.ReplaceAll(xml, "IQoJb3JpZ2luX2VjEXAMPLEFAKESESSIONTOKEN", "session-token-"+account)
	xml = strings.ReplaceAll(xml, "123456789012", account)
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write([]byte(xml))
}

// testConfig is one account reached through a discovery role, in
// regionEU, with fast retries and the fake as both endpoints.
func (f *fakeAWS) testConfig() Config {
	return Config{
		Accounts: []Account{{ID: acctA, RoleARN: "arn:aws:iam::" + acctA + ":role/discovery", ExternalID: "ext-A",
			ArgocdRoleARN: "arn:aws:iam::" + acctA + ":role/argocd"}},
		Regions:  []string{regionEU},
		Endpoint: f.srv.URL, TaggingEndpoint: f.srv.URL, STSEndpoint: f.srv.URL,
		MaxAttempts: 3, MaxBackoff: sources.D(time.Millisecond),
	}
}

// newSource builds a source of cfg (defaulted) on the fake with a fresh
// registry.
func (f *fakeAWS) newSource(t testing.TB, cfg Config, now func() time.Time) (*Source, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	base := aws.Config{Region: "us-west-2", Credentials: credentials.NewStaticCredentialsProvider(baseKey, "base-secret-key", "")}
	cfg.Accounts = slices.Clone(cfg.Accounts) // Default writes into it
	cfg.Default()
	s, err := newSource(&cfg, sources.SourceOptions{Name: "test-eks", Registerer: reg},
		hooks{awsConfig: &base, httpClient: f.srv.Client(), now: now})
	require.NoError(t, err)
	return s, reg
}

// names makes n active clusters named prefix-000...
func names(prefix string, n int) []fakeCluster {
	out := make([]fakeCluster, n)
	for i := range out {
		out[i] = fakeCluster{Name: fmt.Sprintf("%s-%03d", prefix, i)}
	}
	return out
}
