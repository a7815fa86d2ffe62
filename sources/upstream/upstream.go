// Package upstream is the vocabulary every provider that calls an upstream
// API (Rancher, EKS, AKS) shares: the kinds of failure, the error a failed
// listing returns, and the metrics of listings and API requests. A
// provider classifies its SDK's errors into these kinds and registers
// these metrics under its own prefix, so that the same question (why did
// the EKS listing fail? how many AKS requests were throttled?) has the
// same answer shape for each.
package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
)

// Kind is the cause of a failed call or listing: the kind label of
// errors_total and the outcome label of api_requests_total.
type Kind string

// The kinds of failure.
const (
	// KindAuth: the upstream rejected the credentials (HTTP 401 or 403, an
	// expired or invalid token, a role that cannot be assumed).
	KindAuth Kind = "auth"
	// KindThrottled: the upstream asked us to slow down (HTTP 429 or a
	// throttling error code), after the SDK's own retries.
	KindThrottled Kind = "throttled"
	// KindNotFound: HTTP 404 on something the listing needs.
	KindNotFound Kind = "not_found"
	// KindServer: any other unexpected HTTP status, 5xx included.
	KindServer Kind = "server"
	// KindTimeout: no answer in time.
	KindTimeout Kind = "timeout"
	// KindCanceled: the listing was cancelled (the service is stopping).
	KindCanceled Kind = "canceled"
	// KindNetwork: the upstream could not be reached (DNS, connection
	// refused or reset).
	KindNetwork Kind = "network"
	// KindTLS: the upstream's certificate was not trusted.
	KindTLS Kind = "tls"
	// KindInvalidResponse: an answer that is not what the API documents
	// (malformed JSON, a missing field, a page that repeats a cluster).
	KindInvalidResponse Kind = "invalid_response"
	// KindConfig: a problem on this side (an unreadable token file, a
	// redirect to another origin).
	KindConfig Kind = "config"
	// KindOther: anything else.
	KindOther Kind = "other"
)

// Kinds lists every kind, for metrics to start at zero.
func Kinds() []Kind {
	return []Kind{KindAuth, KindThrottled, KindNotFound, KindServer, KindTimeout, KindCanceled,
		KindNetwork, KindTLS, KindInvalidResponse, KindConfig, KindOther}
}

// ForStatus classifies an HTTP status that is not a success.
func ForStatus(code int) Kind {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return KindAuth
	case http.StatusTooManyRequests:
		return KindThrottled
	case http.StatusNotFound:
		return KindNotFound
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return KindTimeout
	}
	return KindServer
}

// Classify returns the kind of an error no SDK-specific rule classified:
// an *Error's own kind, cancellation, timeouts, TLS, network and decoding
// errors, else KindOther.
func Classify(err error) Kind {
	var ue *Error
	var netErr net.Error
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ue):
		return ue.Kind
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return KindTimeout
	case errors.As(err, &verify), errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid):
		return KindTLS
	case errors.As(err, &dnsErr), errors.As(err, &opErr):
		return KindNetwork
	case errors.As(err, &syn), errors.As(err, &typ):
		return KindInvalidResponse
	}
	return KindOther
}

// Error is a failed call of a listing: a short one-line message (for
// /status, logs and the ApplicationSet condition; it never holds a
// credential), its kind and operation (the metric labels), and the
// underlying error for errors.Is and errors.As.
type Error struct {
	// Kind is the cause.
	Kind Kind
	// Operation is the API operation that failed, as the provider names it
	// in api_requests_total (e.g. DescribeCluster, managedClusters.list,
	// clusters.list).
	Operation string
	// Msg is the message; empty means Err's.
	Msg string
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	switch {
	case e.Msg != "":
		return e.Msg
	case e.Err != nil:
		return e.Err.Error()
	}
	return string(e.Kind)
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of err: the kind of the first *Error in its
// chain, else Classify's.
func KindOf(err error) Kind { return Classify(err) }

// OperationOf returns the operation of the first *Error in err's chain,
// or "".
func OperationOf(err error) string {
	var ue *Error
	if errors.As(err, &ue) {
		return ue.Operation
	}
	return ""
}
