package eks

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// The operations of the AWS APIs the source calls: the operation labels of
// api_requests_total and errors_total.
const (
	opListClusters    = "ListClusters"
	opGetResources    = "GetResources"
	opDescribeCluster = "DescribeCluster"
	opAssumeRole      = "AssumeRole"
)

// classify returns the kind of an SDK error: an *upstream.Error's own,
// cancellation and timeouts, then throttling and credential error codes,
// then the HTTP status, then upstream.Classify (network, TLS and decoding
// errors). It never looks at credentials.
func classify(err error) upstream.Kind {
	switch k := upstream.Classify(err); {
	case errors.As(err, new(*upstream.Error)), k == upstream.KindCanceled, k == upstream.KindTimeout:
		return k
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if k, ok := codeKind(ae.ErrorCode()); ok {
			return k
		}
	}
	var de *smithy.DeserializationError
	if errors.As(err, &de) {
		return upstream.KindInvalidResponse
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return upstream.ForStatus(re.HTTPStatusCode())
	}
	return upstream.Classify(err)
}

// codeKind classifies an AWS error code.
func codeKind(code string) (upstream.Kind, bool) {
	if _, ok := retry.DefaultThrottleErrorCodes[code]; ok {
		return upstream.KindThrottled, true
	}
	switch {
	case strings.HasPrefix(code, "ExpiredToken"), strings.Contains(code, "AccessDenied"),
		code == "UnrecognizedClientException", code == "InvalidClientTokenId", code == "InvalidSignatureException",
		code == "SignatureDoesNotMatch", code == "IncompleteSignature", code == "UnauthorizedOperation",
		code == "NotAuthorized", strings.HasPrefix(code, "MissingAuthenticationToken"):
		return upstream.KindAuth, true
	case code == "ResourceNotFoundException":
		return upstream.KindNotFound, true
	}
	return "", false
}

// classified is err with its kind, for upstream.Metrics.Request; nil stays
// nil.
func classified(err error) error {
	if err == nil {
		return nil
	}
	return &upstream.Error{Kind: classify(err), Err: err}
}

// fromSTS reports whether err comes from an STS operation, i.e. from
// assuming the discovery role rather than from EKS.
func fromSTS(err error) bool {
	var oe *smithy.OperationError
	for errors.As(err, &oe) {
		if oe.ServiceID == "STS" {
			return true
		}
		err = oe.Err // an operation error of another service may wrap one of STS
	}
	return false
}

// where names a target in messages.
func (t *target) where() string {
	return fmt.Sprintf("account %s region %s", t.account.ID, t.region)
}

// fail is the error of operation op of target t (what says it in words,
// e.g. "describe cluster x"). An error of the role assumption the SDK made
// on the way is the AssumeRole operation's.
func (t *target) fail(op, what string, err error) error {
	if fromSTS(err) {
		op, what = opAssumeRole, "assume role "+t.account.RoleARN
	}
	return newError(classify(err), op, t.where()+": "+what, err)
}

// newError is a failed listing's error: its kind and operation, the
// message "context: err" with any credential an upstream message quoted
// redacted, and err for errors.Is and As.
func newError(kind upstream.Kind, op, context string, err error) *upstream.Error {
	return &upstream.Error{Kind: kind, Operation: op, Msg: redact(context + ": " + err.Error()), Err: err}
}

// accessKeyRe matches AWS access key ids.
var accessKeyRe = regexp.MustCompile(`\b(AKIA|ASIA)[A-Z0-9]{12,}\b`)

// securityTokenRe matches a session token's value as a signature mismatch
// answer quotes it, in the canonical request it shows (header or query).
var securityTokenRe = regexp.MustCompile(`(?i)(x-amz-security-token\s*[:=]\s*)[^\s'"&<]+`)

// redact hides access key ids and session tokens should an upstream message
// carry one (a signature mismatch answer quotes the canonical request,
// session token included).
func redact(msg string) string {
	msg = accessKeyRe.ReplaceAllString(msg, "<redacted>")
	return securityTokenRe.ReplaceAllString(msg, "${1}<redacted>")
}
