package azurearm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClassify(t *testing.T) {
	status := func(code int) error { return &azcore.ResponseError{StatusCode: code} }
	tests := []struct {
		name      string
		err       error
		want      upstream.Kind
		wantToken upstream.Kind // as the failure of a token request
	}{
		{"classified", &upstream.Error{Kind: upstream.KindConfig}, upstream.KindConfig, upstream.KindAuth},
		{"cancelled", fmt.Errorf("x: %w", context.Canceled), upstream.KindCanceled, upstream.KindCanceled},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), upstream.KindTimeout, upstream.KindTimeout},
		{"401", status(http.StatusUnauthorized), upstream.KindAuth, upstream.KindAuth},
		{"403", status(http.StatusForbidden), upstream.KindAuth, upstream.KindAuth},
		{"404", status(http.StatusNotFound), upstream.KindNotFound, upstream.KindAuth},
		{"429: ARM throttling", status(http.StatusTooManyRequests), upstream.KindThrottled, upstream.KindAuth},
		{"400 at Entra ID", status(http.StatusBadRequest), upstream.KindServer, upstream.KindAuth},
		{"500", status(http.StatusInternalServerError), upstream.KindServer, upstream.KindAuth},
		{"authentication failed", &azidentity.AuthenticationFailedError{}, upstream.KindAuth, upstream.KindAuth},
		{"SDK decoding, managed clusters", errors.New("unmarshalling type *armcontainerservice.ManagedClusterListResult: unexpected end of JSON input"),
			upstream.KindInvalidResponse, upstream.KindAuth},
		{"SDK decoding, OpenShift clusters", errors.New("unmarshalling type *armredhatopenshift.OpenShiftClusterList: unexpected end of JSON input"),
			upstream.KindInvalidResponse, upstream.KindAuth},
		{"connection refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, upstream.KindNetwork, upstream.KindNetwork},
		{"anything else", errors.New("AADSTS700016: application not found"), upstream.KindOther, upstream.KindAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Classify(tt.err))
			assert.Equal(t, tt.wantToken, TokenKind(tt.err))
		})
	}
	assert.Equal(t, upstream.Kind(""), Classify(nil))
}

func TestDescribe(t *testing.T) {
	response := func(body string) *http.Response {
		return &http.Response{
			StatusCode: http.StatusForbidden,
			Header:     http.Header{"X-Ms-Error-Code": {"AuthorizationFailed"}},
			Body:       io.NopCloser(strings.NewReader(body)),
			Request:    &http.Request{Method: http.MethodGet},
		}
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"status and code", &azcore.ResponseError{StatusCode: 403, ErrorCode: "AuthorizationFailed", RawResponse: response("")}, "HTTP 403 AuthorizationFailed"},
		{"the first line of ARM's message", &azcore.ResponseError{StatusCode: 403, ErrorCode: "AuthorizationFailed",
			RawResponse: response(`{"error":{"code":"AuthorizationFailed","message":"The client 'x' cannot read.\nSecond line."}}`)},
			"HTTP 403 AuthorizationFailed: The client 'x' cannot read."},
		{"a body that is no ARM error", &azcore.ResponseError{StatusCode: 403, ErrorCode: "AuthorizationFailed", RawResponse: response("<html>")},
			"HTTP 403 AuthorizationFailed"},
		{"no code, no response", &azcore.ResponseError{StatusCode: 500}, "HTTP 500"},
		{"first line", errors.New("first\nsecond"), "first"},
		{"authentication failed", fmt.Errorf("get token: %w", &azidentity.AuthenticationFailedError{}), "authentication failed: :"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Describe(tt.err))
		})
	}
	long := Describe(errors.New(strings.Repeat("é", 400)))
	assert.LessOrEqual(t, len(long), MaxDetail+len("…"))
	assert.True(t, strings.HasSuffix(long, "…"))
	assert.NotContains(t, long, "\uFFFD")
}

func TestCallErrorAndMalformed(t *testing.T) {
	e := CallError("things.list", &azcore.ResponseError{StatusCode: http.StatusTooManyRequests, ErrorCode: "TooManyRequests"})
	assert.Equal(t, upstream.KindThrottled, e.Kind)
	assert.Equal(t, "things.list", e.Operation)
	assert.Equal(t, "HTTP 429 TooManyRequests", e.Error())

	m := Malformed("things.list", errors.New("nextLink repeats"))
	assert.Equal(t, upstream.KindInvalidResponse, m.Kind)
	assert.Equal(t, "malformed response: nextLink repeats", m.Error())
	assert.Equal(t, "things.list", upstream.OperationOf(fmt.Errorf("wrapped: %w", m)))
}
