package azurearm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// sdkDecodeError starts the message of the SDK's errors for an answer
// that does not decode; they wrap nothing (azcore runtime.UnmarshalAsJSON
// and the generated models_serde.go format the cause with %s or %v).
const sdkDecodeError = "unmarshalling type "

// Classify returns the kind of an error of the Azure SDK: a failed token
// request is auth, an ARM answer is classified by its status (429, ARM's
// throttling, is throttled), an answer the SDK cannot decode is
// invalid_response, and the rest as upstream.Classify says. Cancellation
// wins over the rest.
func Classify(err error) upstream.Kind {
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

// TokenKind is the kind of a failure to get a token: auth (the identity
// was refused, expired, or is not there), unless the request for it was
// cancelled, timed out or could not reach Microsoft Entra ID.
func TokenKind(err error) upstream.Kind {
	switch k := Classify(err); k {
	case upstream.KindCanceled, upstream.KindTimeout, upstream.KindNetwork, upstream.KindTLS:
		return k
	}
	return upstream.KindAuth
}

// CallError is a failed SDK call of op: classified, and told in one line
// (see Describe).
func CallError(op string, err error) *upstream.Error {
	return &upstream.Error{Kind: Classify(err), Operation: op, Msg: Describe(err), Err: err}
}

// Malformed is an answer of op that decoded but is not what ARM
// documents.
func Malformed(op string, err error) *upstream.Error {
	return &upstream.Error{Kind: upstream.KindInvalidResponse, Operation: op, Msg: "malformed response: " + err.Error(), Err: err}
}

// MaxDetail bounds the text taken from an upstream error (FirstLine).
const MaxDetail = 300

// Describe returns a short, one-line account of an SDK error. The SDK's
// own messages span many lines and repeat the whole response body; this
// keeps the status, the ARM error code and the first line of the ARM
// message, which names the identity and the missing permission but never
// holds a credential.
func Describe(err error) string {
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
		return "authentication failed: " + FirstLine(af.Error())
	}
	return FirstLine(err.Error())
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
	return FirstLine(e.Error.Message)
}

// FirstLine is the first line of s, trimmed, and cut to MaxDetail bytes
// (at a character boundary, then "…").
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if len(s) > MaxDetail {
		cut := MaxDetail
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
