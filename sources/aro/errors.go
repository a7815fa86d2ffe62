package aro

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// The operations this source calls: the operation label of
// api_requests_total and errors_total, and upstream.Error.Operation.
const (
	opSubscriptions = "subscriptions.list"
	opClusters      = "openShiftClusters.list"
	// opTokenBindings is the list of the token Secrets bound to the
	// clusters (sources.TokenBindings), on the Kubernetes API.
	opTokenBindings = "tokenBindings.list"
)

// sdkDecodeError starts the message of the SDK's errors for an answer
// that does not decode; they wrap nothing (azcore runtime.UnmarshalAsJSON
// and the generated models_serde.go format the cause with %s or %v).
const sdkDecodeError = "unmarshalling type "

// classify returns the kind of an error of the Azure SDK: a failed token
// request is auth, an ARM answer is classified by its status (429, ARM's
// throttling, is throttled), an answer the SDK cannot decode is
// invalid_response, and the rest as upstream.Classify says. Cancellation
// wins over the rest.
func classify(err error) upstream.Kind {
	var ue *upstream.Error
	var re *azcore.ResponseError
	var af *azidentity.AuthenticationFailedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ue):
		return ue.Kind
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return upstream.Classify(err)
	case errors.As(err, &af):
		return upstream.KindAuth
	case errors.As(err, &re):
		return upstream.ForStatus(re.StatusCode)
	case strings.HasPrefix(err.Error(), sdkDecodeError):
		return upstream.KindInvalidResponse
	}
	return upstream.Classify(err)
}

// tokenKind is the kind of a failure to get a token: auth (the identity
// was refused, expired, or is not there), unless the request for it was
// cancelled, timed out or could not reach Microsoft Entra ID.
func tokenKind(err error) upstream.Kind {
	switch k := classify(err); k {
	case upstream.KindCanceled, upstream.KindTimeout, upstream.KindNetwork, upstream.KindTLS:
		return k
	}
	return upstream.KindAuth
}

// bindingsError is a failed list of the token bindings: classified by the
// Kubernetes API's status when it answered, else as upstream.Classify
// says. Its message is the lister's, which names the namespace and never
// a token (it reads metadata only).
func bindingsError(err error) *upstream.Error {
	kind := upstream.Classify(err)
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code >= 400 && kind != upstream.KindCanceled && kind != upstream.KindTimeout {
		kind = upstream.ForStatus(int(st.Status().Code))
	}
	return &upstream.Error{Kind: kind, Operation: opTokenBindings, Msg: "token bindings: " + firstLine(err.Error()), Err: err}
}

// callError is a failed SDK call of op: classified, and told in one line
// (see describe).
func callError(op string, err error) *upstream.Error {
	return &upstream.Error{Kind: classify(err), Operation: op, Msg: describe(err), Err: err}
}

// malformed is an answer of op that decoded but is not what ARM
// documents.
func malformed(op string, err error) *upstream.Error {
	return &upstream.Error{Kind: upstream.KindInvalidResponse, Operation: op, Msg: "malformed response: " + err.Error(), Err: err}
}

// maxDetail bounds the text taken from an upstream error.
const maxDetail = 300

// describe returns a short, one-line account of an SDK error: the status,
// the ARM error code and the first line of the ARM message, which names
// the identity and the missing permission but never holds a credential.
func describe(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		s := fmt.Sprintf("HTTP %d", re.StatusCode)
		if re.ErrorCode != "" {
			s += " " + re.ErrorCode
		}
		if msg := armMessage(re); msg != "" {
			s += ": " + msg
		}
		return s
	}
	var af *azidentity.AuthenticationFailedError
	if errors.As(err, &af) {
		return "authentication failed: " + firstLine(af.Error())
	}
	return firstLine(err.Error())
}

// armMessage reads error.message from an ARM error body.
func armMessage(re *azcore.ResponseError) string {
	if re.RawResponse == nil {
		return ""
	}
	body, err := runtime.Payload(re.RawResponse)
	if err != nil || len(body) == 0 {
		return ""
	}
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return firstLine(e.Error.Message)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if len(s) > maxDetail {
		cut := maxDetail
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
