// Package aws holds fakes of AWS for tests, in the wire shapes: an
// issuing STS (sts.go) that verifies signatures with the keys it issued,
// and a fake of the APIs the eks source calls: EKS ListClusters and
// DescribeCluster (restJson1), the Resource Groups Tagging API's
// GetResources (awsJson1_1) and STS AssumeRole (awsQuery), from one HTTP
// server that tells accounts apart by the SigV4 access key, regions by the
// credential scope and services by its signing name. Answers are the upstream fixtures with a test's names
// and states. See README.md for what it models and what it does not.
package aws

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Cluster is one EKS cluster of the fake; the describe answer is the
// fixture with these fields changed.
type Cluster struct {
	Name   string
	Status string // default ACTIVE
	// Private turns the public endpoint off.
	Private bool
	// Tags are the cluster's tags, in both the describe and the
	// GetResources answers; nil means the fixture's.
	Tags map[string]string
	// NeverTagged leaves the cluster out of GetResources answers, as AWS
	// does for resources that never had a tag, and its describe answer has
	// no tags (Tags is then unused).
	NeverTagged bool
	// TaggingLags leaves the cluster out of GetResources answers while its
	// describe answer has its Tags, as when the tagging API has not caught
	// up with EKS yet.
	TaggingLags bool
	// Creating drops endpoint and certificate authority, as EKS does before
	// ACTIVE.
	Creating bool
	// Endpoint replaces the endpoint (default: unique per name and
	// account, on eks.amazonaws.com); CAData replaces the fixture's
	// certificateAuthority.data (base64 of the PEM, as EKS sends it).
	Endpoint, CAData string
}

// Request is a request as the fake understood it; N counts the requests
// of that operation so far, this one included.
type Request struct {
	Op, Account, Region, Name string
	// Role is the role ARN an AssumeRole asks for.
	Role string
	N    int
}

// Response replaces the fake's answer when a hook returns one.
type Response struct {
	Status  int
	ErrType string // x-amzn-ErrorType (EKS), __type (tagging) or error code (STS)
	Body    string // raw body; a message is made from ErrType otherwise
}

// Server is the fake. Set its exported fields before the first request.
type Server struct {
	srv *httptest.Server

	// PageSize caps the names per ListClusters page (the source asks 100).
	PageSize int
	// TagPageSize caps the resources per GetResources page (the source
	// asks 100).
	TagPageSize int
	// Delay is spent in every EKS and tagging call, for concurrency tests.
	Delay time.Duration
	// Hook may answer a request instead of the fake.
	Hook func(Request) *Response
	// KnownKeysOnly answers 403 UnrecognizedClientException to a request
	// signed with an access key the fake does not know (SetKey, or handed
	// out by AssumeRole), and records it (BadAuth). Otherwise such a
	// request is served as account "".
	KnownKeysOnly bool

	describeTmpl []byte
	fixtureTags  map[string]string
	assumeXML    string

	inFlight, maxInFlight atomic.Int64

	mu        sync.Mutex
	clusters  map[string][]Cluster // by account/region
	described map[string]Cluster   // by account/region/name: every cluster ever added, for DescribeRemoved
	keys      map[string]string    // access key → account
	calls     map[string]int       // by operation
	seenKeys  map[string]bool      // access keys that signed EKS and tagging calls
	seenToken map[string]bool      // x-amz-security-token of EKS and tagging calls
	maxResult map[string]bool      // maxResults values seen
	perPage   map[int]bool         // GetResources ResourcesPerPage values seen
	assumed   []map[string]string  // AssumeRole form values
	badAuth   []string             // requests refused for their key
	bodies    map[string][]byte    // describe answers made so far

	// AssumedSecret and AssumedToken, when set, are the secret access key
	// and session token of every AssumeRole answer (default: the
	// fixture's secret key, and SessionToken of the role's account).
	AssumedSecret, AssumedToken string

	// DescribeRemoved answers DescribeCluster for a cluster removed from
	// ListClusters, as a describe that races a removal on AWS can.
	DescribeRemoved bool
}

// New starts a fake answering from the EKS fixtures in dir
// (testdata/fixtures/eks). Close stops it.
func New(dir string) (*Server, error) {
	f := &Server{
		PageSize: 100, TagPageSize: 100,
		clusters: map[string][]Cluster{}, described: map[string]Cluster{}, keys: map[string]string{},
		calls: map[string]int{}, seenKeys: map[string]bool{}, seenToken: map[string]bool{}, maxResult: map[string]bool{},
		perPage: map[int]bool{}, bodies: map[string][]byte{},
	}
	var err error
	if f.describeTmpl, err = os.ReadFile(filepath.Join(dir, "eks-describe-cluster.json")); err != nil {
		return nil, fmt.Errorf("fake aws: %w", err)
	}
	xml, err := os.ReadFile(filepath.Join(dir, "sts-assume-role-response.xml"))
	if err != nil {
		return nil, fmt.Errorf("fake aws: %w", err)
	}
	f.assumeXML = string(xml)
	var fixture struct {
		Cluster struct{ Tags map[string]string }
	}
	if err := json.Unmarshal(f.describeTmpl, &fixture); err != nil {
		return nil, fmt.Errorf("fake aws: the describe fixture: %w", err)
	}
	f.fixtureTags = fixture.Cluster.Tags
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	// Keep a connection per concurrent call, as the SDK's own client does
	// (10 per host), instead of net/http's 2.
	f.srv.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 100
	return f, nil
}

// URL is the fake's base URL: the EKS, tagging and STS endpoint alike.
func (f *Server) URL() string { return f.srv.URL }

// Client is an HTTP client for the fake.
func (f *Server) Client() *http.Client { return f.srv.Client() }

// Close stops the fake.
func (f *Server) Close() { f.srv.Close() }

// AssumedKey is the access key AssumeRole hands out for a role of account.
func AssumedKey(account string) string { return "ASIA" + account + "FAKE" }

// SessionToken is the session token AssumeRole hands out for account.
func SessionToken(account string) string { return "session-token-" + account }

// ClusterARN is the ARN of an EKS cluster, in the partition of its region.
func ClusterARN(name, account, region string) string {
	return fmt.Sprintf("arn:%s:eks:%s:%s:cluster/%s", partition(region), region, account, name)
}

// partition is the AWS partition of a region, by its prefix.
func partition(region string) string {
	for _, p := range [][2]string{{"cn-", "aws-cn"}, {"us-gov-", "aws-us-gov"}, {"us-isob-", "aws-iso-b"}, {"us-isof-", "aws-iso-f"},
		{"eu-isoe-", "aws-iso-e"}, {"us-iso-", "aws-iso"}, {"eusc-", "aws-eusc"}} {
		if strings.HasPrefix(region, p[0]) {
			return p[1]
		}
	}
	return "aws"
}

// Add appends clusters to account's region.
func (f *Server) Add(account, region string, cs ...Cluster) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := account + "/" + region
	f.clusters[k] = append(f.clusters[k], cs...)
	for _, c := range cs {
		f.described[k+"/"+c.Name] = c
	}
}

// Set replaces the clusters of account's region that have the names of cs
// and appends the others, and returns the count of ListClusters answered
// so far: listings counted above it see the change.
func (f *Server) Set(account, region string, cs ...Cluster) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := account + "/" + region
	for _, c := range cs {
		i := slices.IndexFunc(f.clusters[k], func(o Cluster) bool { return o.Name == c.Name })
		if i < 0 {
			f.clusters[k] = append(f.clusters[k], c)
		} else {
			f.clusters[k][i] = c
		}
		f.described[k+"/"+c.Name] = c
	}
	return f.calls["ListClusters"]
}

// Remove takes clusters out of account's region and returns the count of
// ListClusters answered so far.
func (f *Server) Remove(account, region string, names ...string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := account + "/" + region
	f.clusters[k] = slices.DeleteFunc(f.clusters[k], func(c Cluster) bool { return slices.Contains(names, c.Name) })
	return f.calls["ListClusters"]
}

// Clusters returns the clusters of account's region.
func (f *Server) Clusters(account, region string) []Cluster {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.clusters[account+"/"+region])
}

// SetTags replaces the tags of a cluster (nil: the fixture's).
func (f *Server) SetTags(account, region, name string, tags map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := f.clusters[account+"/"+region]
	for i := range cs {
		if cs[i].Name == name {
			cs[i].Tags = tags
			f.described[account+"/"+region+"/"+name] = cs[i]
			return nil
		}
	}
	return fmt.Errorf("fake aws: no cluster %s in %s/%s", name, account, region)
}

// TagsOf is what the fake answers as c's tags.
func (f *Server) TagsOf(c Cluster) map[string]string {
	if c.Tags == nil {
		return maps.Clone(f.fixtureTags)
	}
	return c.Tags
}

// SetKey makes the credentials of accessKey belong to account.
func (f *Server) SetKey(accessKey, account string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys[accessKey] = account
}

// Count is how many requests of an operation were answered since the
// last ResetCounts.
func (f *Server) Count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// ResetCounts sets every operation's count to 0.
func (f *Server) ResetCounts() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = map[string]int{}
}

// MaxInFlight is the most EKS and tagging calls that were in flight at
// once.
func (f *Server) MaxInFlight() int64 { return f.maxInFlight.Load() }

// SeenKeys are the access keys that signed EKS and tagging calls.
func (f *Server) SeenKeys() map[string]bool { return f.snapshot(f.seenKeys) }

// SeenTokens are the session tokens of EKS and tagging calls.
func (f *Server) SeenTokens() map[string]bool { return f.snapshot(f.seenToken) }

// MaxResults are the ListClusters maxResults values seen.
func (f *Server) MaxResults() map[string]bool { return f.snapshot(f.maxResult) }

// PerPage are the GetResources ResourcesPerPage values seen.
func (f *Server) PerPage() map[int]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.perPage)
}

// Assumed are the form values (RoleArn, RoleSessionName, ExternalId) of
// the AssumeRole calls, in order.
func (f *Server) Assumed() []map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.assumed)
}

// BadAuth are the requests refused for their access key
// (KnownKeysOnly), as "METHOD path".
func (f *Server) BadAuth() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.badAuth)
}

func (f *Server) snapshot(m map[string]bool) map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(m)
}

var authRe = regexp.MustCompile(`Credential=([A-Z0-9]+)/[0-9]+/([a-z0-9-]+)/([a-z]+)/aws4_request`)

// route reads the operation, region and service of a signed request.
func route(r *http.Request) (req Request, key, service string, ok bool) {
	m := authRe.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return req, "", "", false
	}
	key, req.Region, service = m[1], m[2], m[3]
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
	}
	return req, key, service, true
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	req, key, service, signed := route(r)
	switch {
	case !signed:
		http.Error(w, "unsigned request", http.StatusForbidden)
		return
	case req.Op == "":
		http.Error(w, "unexpected "+service+" "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	f.mu.Lock()
	account, known := f.keys[key]
	if !known && f.KnownKeysOnly && req.Op != "AssumeRole" {
		f.badAuth = append(f.badAuth, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		f.writeError(w, service, &Response{Status: http.StatusForbidden, ErrType: "UnrecognizedClientException",
			Body: `{"message":"The security token included in the request is invalid."}`})
		return
	}
	f.calls[req.Op]++
	req.N, req.Account = f.calls[req.Op], account
	if req.Op == "AssumeRole" {
		req.Role = r.FormValue("RoleArn")
	}
	if service != "sts" {
		f.seenKeys[key] = true
		if tok := r.Header.Get("X-Amz-Security-Token"); tok != "" {
			f.seenToken[tok] = true
		}
	}
	hook := f.Hook
	f.mu.Unlock()

	if service != "sts" && !f.wait(r) {
		return
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

// wait counts an EKS or tagging call in flight and spends Delay; false
// when the request was canceled meanwhile.
func (f *Server) wait(r *http.Request) bool {
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
			return false
		}
	}
	return true
}

// writeError writes resp in the error shape of service.
func (f *Server) writeError(w http.ResponseWriter, service string, resp *Response) {
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
