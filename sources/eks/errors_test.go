package eks

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

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
		return counter(t, reg, "argocd_cluster_discovery_eks_api_requests_total", map[string]string{"operation": op, "outcome": outcome})
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

// listingFailure is a failing call, the words its error must and must not
// hold, its kind and operation, and the calls made per operation.
type listingFailure struct {
	name    string
	hook    func(fakeReq) *fakeResp
	want    []string
	notWant []string
	kind    upstream.Kind
	op      string
	calls   map[string]int
}

// tooManyRequests is EKS's answer to too many requests.
var tooManyRequests = &fakeResp{Status: http.StatusTooManyRequests, ErrType: "TooManyRequestsException"}

var listingFailures = []listingFailure{
	{name: "throttled on every attempt", hook: on("DescribeCluster", "", "c-002", tooManyRequests),
		want: []string{"account 111111111111 region eu-west-1: describe cluster c-002:", "TooManyRequestsException", "exceeded maximum number of attempts, 3"},
		kind: upstream.KindThrottled, op: opDescribeCluster},
	{name: "one region answers 500", hook: on("ListClusters", regionUS, "", &fakeResp{Status: http.StatusInternalServerError, ErrType: "ServerException"}),
		want: []string{"account 111111111111 region us-east-1: list clusters:", "StatusCode: 500"}, notWant: []string{"region eu-west-1"},
		kind: upstream.KindServer, op: opListClusters},
	{name: "AssumeRole denied", hook: on("AssumeRole", "", "", &fakeResp{Status: http.StatusForbidden, ErrType: "AccessDenied"}),
		want: []string{"account 111111111111 region ", ": assume role arn:aws:iam::111111111111:role/discovery:", "AccessDenied"},
		kind: upstream.KindAuth, op: opAssumeRole, calls: map[string]int{"AssumeRole": 1, "ListClusters": 0}},
	{name: "expired token, key redacted", hook: on("ListClusters", regionEU, "", &fakeResp{Status: http.StatusForbidden, ErrType: "ExpiredTokenException",
		Body: `{"message":"The security token included in the request is expired (key ` + assumedKey(acctA) + `)"}`}),
		want:    []string{"account 111111111111 region eu-west-1: list clusters:", "ExpiredTokenException", "(key <redacted>)"},
		notWant: []string{assumedKey(acctA)}, kind: upstream.KindAuth, op: opListClusters},
	{name: "malformed list", hook: on("ListClusters", regionEU, "", &fakeResp{Status: 200, Body: `{"clusters": [`}),
		want: []string{"account 111111111111 region eu-west-1: list clusters:"}, kind: upstream.KindInvalidResponse, op: opListClusters},
	{name: "malformed describe", hook: on("DescribeCluster", regionEU, "", &fakeResp{Status: 200, Body: `{"cluster": {"name": 1}}`}),
		want: []string{"account 111111111111 region eu-west-1: describe cluster c-00"}, kind: upstream.KindInvalidResponse, op: opDescribeCluster},
	{name: "nextToken repeated", hook: on("ListClusters", regionEU, "", &fakeResp{Status: 200, Body: `{"clusters":["c-000"],"nextToken":"same"}`}),
		want: []string{"account 111111111111 region eu-west-1: list clusters: nextToken of an earlier page returned again"},
		kind: upstream.KindInvalidResponse, op: opListClusters},
	{name: "tagging AccessDenied", hook: on("GetResources", regionUS, "", &fakeResp{Status: http.StatusBadRequest, ErrType: "AccessDeniedException",
		Body: `{"__type":"AccessDeniedException","Message":"User: arn:aws:sts::111111111111:assumed-role/discovery/argocd-cluster-discovery is not authorized to perform: tag:GetResources"}`}),
		want:    []string{"account 111111111111 region us-east-1: get cluster tags:", "GetResources", "AccessDeniedException", "not authorized to perform: tag:GetResources"},
		notWant: []string{"region eu-west-1"}, kind: upstream.KindAuth, op: opGetResources},
	{name: "tagging answers 500", hook: on("GetResources", regionEU, "", &fakeResp{Status: http.StatusInternalServerError, ErrType: "InternalServiceException"}),
		want: []string{"account 111111111111 region eu-west-1: get cluster tags:", "StatusCode: 500", "InternalServiceException",
			"exceeded maximum number of attempts, 3"},
		kind: upstream.KindServer, op: opGetResources},
	{name: "malformed tagging answer", hook: on("GetResources", regionEU, "", &fakeResp{Status: 200, Body: `{"ResourceTagMappingList": [`}),
		want: []string{"account 111111111111 region eu-west-1: get cluster tags:"}, kind: upstream.KindInvalidResponse, op: opGetResources},
	{name: "PaginationToken repeated", hook: on("GetResources", regionEU, "", &fakeResp{Status: 200, Body: `{"PaginationToken":"same","ResourceTagMappingList":[]}`}),
		want: []string{"account 111111111111 region eu-west-1: get cluster tags: PaginationToken of an earlier page returned again"},
		kind: upstream.KindInvalidResponse, op: opGetResources},
}

// TestListingFailures: any failing call of any (account, region) fails the
// whole listing with no partial result, an error naming the account,
// region and call, holding an *upstream.Error of the kind and operation,
// and a failed listing counted by kind and operation.
func TestListingFailures(t *testing.T) {
	for _, tc := range listingFailures {
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
			var ue *upstream.Error
			require.ErrorAs(t, err, &ue)
			assert.Equal(t, tc.kind, ue.Kind)
			assert.Equal(t, tc.op, ue.Operation)
			assert.Equal(t, 1.0, counter(t, reg, "argocd_cluster_discovery_eks_errors_total",
				map[string]string{"kind": string(tc.kind), "operation": tc.op}))
			for op, n := range tc.calls {
				assert.Equal(t, n, f.count(op), op)
			}
		})
	}
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
	assert.Equal(t, map[string]bool{baseKey: true}, f.SeenKeys())
	var ue *upstream.Error
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, upstream.KindConfig, ue.Kind, "the configured credentials are not the account's")
	assert.Equal(t, opDescribeCluster, ue.Operation)
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
	var ue *upstream.Error
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, upstream.KindTimeout, ue.Kind)
	assert.NotEmpty(t, ue.Operation)
}

func TestClassify(t *testing.T) {
	api := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }
	status := func(code int) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("x")}
	}
	for _, tc := range []struct {
		name string
		err  error
		want upstream.Kind
	}{
		{"canceled", context.Canceled, upstream.KindCanceled},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), upstream.KindTimeout},
		{"assume role denied", &smithy.OperationError{ServiceID: "EKS", OperationName: "ListClusters", Err: fmt.Errorf("get identity: %w",
			&smithy.OperationError{ServiceID: "STS", OperationName: "AssumeRole", Err: api("AccessDenied")})}, upstream.KindAuth},
		{"throttled after retries", &smithy.OperationError{ServiceID: "EKS", Err: &retry.MaxAttemptsError{Attempt: 3, Err: api("TooManyRequestsException")}},
			upstream.KindThrottled},
		{"ThrottlingException", api("ThrottlingException"), upstream.KindThrottled},
		{"STS Throttling", api("Throttling"), upstream.KindThrottled},
		{"ExpiredTokenException", api("ExpiredTokenException"), upstream.KindAuth},
		{"STS ExpiredToken", api("ExpiredToken"), upstream.KindAuth},
		{"AccessDeniedException", api("AccessDeniedException"), upstream.KindAuth},
		{"UnrecognizedClientException", api("UnrecognizedClientException"), upstream.KindAuth},
		{"InvalidClientTokenId", api("InvalidClientTokenId"), upstream.KindAuth},
		{"InvalidSignatureException", api("InvalidSignatureException"), upstream.KindAuth},
		{"ResourceNotFoundException", api("ResourceNotFoundException"), upstream.KindNotFound},
		{"unknown code, status 500", &smithy.OperationError{Err: fmt.Errorf("%w: %w", status(500), api("ServerException"))}, upstream.KindServer},
		{"status 403", status(http.StatusForbidden), upstream.KindAuth},
		{"status 429", status(http.StatusTooManyRequests), upstream.KindThrottled},
		{"status 400", status(http.StatusBadRequest), upstream.KindServer},
		{"malformed answer", &smithy.DeserializationError{Err: errors.New("eof")}, upstream.KindInvalidResponse},
		{"malformed answer of a 200", &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 200}},
			Err: &smithy.DeserializationError{Err: errors.New("eof")}}, upstream.KindInvalidResponse},
		{"own kind", fmt.Errorf("list: %w", &upstream.Error{Kind: upstream.KindInvalidResponse}), upstream.KindInvalidResponse},
		{"network", &net.OpError{Op: "dial", Err: errors.New("refused")}, upstream.KindNetwork},
		{"tls", fmt.Errorf("x: %w", x509.UnknownAuthorityError{}), upstream.KindTLS},
		{"other", errors.New("?"), upstream.KindOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, classify(tc.err))
		})
	}
}

// TestErrorOperation: the error of a call names the operation that failed;
// a role the SDK assumed on the way is AssumeRole's failure.
func TestErrorOperation(t *testing.T) {
	tg := &target{account: Account{ID: acctA, RoleARN: "arn:aws:iam::111111111111:role/discovery"}, region: regionEU}
	stsErr := &smithy.OperationError{ServiceID: "EKS", OperationName: "ListClusters", Err: fmt.Errorf("get identity: %w",
		&smithy.OperationError{ServiceID: "STS", OperationName: "AssumeRole", Err: &smithy.GenericAPIError{Code: "AccessDenied"}})}
	var ue *upstream.Error
	require.ErrorAs(t, tg.fail(opListClusters, "list clusters", stsErr), &ue)
	assert.Equal(t, opAssumeRole, ue.Operation)
	assert.Equal(t, upstream.KindAuth, ue.Kind)
	assert.Contains(t, ue.Error(), "account 111111111111 region eu-west-1: assume role arn:aws:iam::111111111111:role/discovery: ")
	require.ErrorAs(t, tg.fail(opListClusters, "list clusters", context.Canceled), &ue)
	assert.Equal(t, opListClusters, ue.Operation)
	assert.Equal(t, upstream.KindCanceled, ue.Kind)
}

func TestRedact(t *testing.T) {
	err := newError(upstream.KindTimeout, opListClusters, "list", fmt.Errorf("key AKIAIOSFODNN7EXAMPLE and ASIAQEXAMPLEFAKE7Q2M: %w", context.DeadlineExceeded))
	assert.Equal(t, "list: key <redacted> and <redacted>: context deadline exceeded", err.Error())
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "nothing to hide", redact("nothing to hide"))
	assert.Equal(t, "GET\nx-amz-security-token:<redacted>\nhost", redact("GET\nx-amz-security-token:FwoGZXIvYXdzEXAMPLE+/=\nhost"))
}

// TestRepeatedPageTokenInOneRegionFailsTheListing: a ListClusters page
// that hands back the token of an earlier page, on the second page of
// the second region, fails the whole listing: no partial fleet (the
// names read before the loop) is ever returned as a complete one.
func TestRepeatedPageTokenInOneRegionFailsTheListing(t *testing.T) {
	f := newFake(t)
	f.add(acctA, regionEU, names("c", 2)...)
	f.add(acctA, regionUS, names("d", 3)...)
	var calls atomic.Int32
	f.Hook = func(r fakeReq) *fakeResp {
		if r.Op != "ListClusters" || r.Region != regionUS {
			return nil
		}
		if calls.Add(1) == 1 {
			return &fakeResp{Status: http.StatusOK, Body: `{"clusters":["d-000"],"nextToken":"page-2"}`}
		}
		return &fakeResp{Status: http.StatusOK, Body: `{"clusters":["d-001"],"nextToken":"page-2"}`}
	}
	cfg := f.testConfig()
	cfg.Regions = []string{regionEU, regionUS}
	s, _ := f.newSource(t, cfg, nil)
	got, err := s.Clusters(context.Background())
	require.Error(t, err)
	assert.Nil(t, got, "no partial listing")
	assert.Contains(t, err.Error(), "region us-east-1: list clusters: nextToken of an earlier page returned again")
	assert.Equal(t, int32(2), calls.Load(), "stopped at the repeated token")
}
