package aks

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// listError is a failed listing: a one-line message for /status and the
// ApplicationSet condition, the metric labels, and the SDK error for
// errors.Is/As.
type listError struct {
	kind, subscription string
	msg                string
	err                error
}

func (e *listError) Error() string { return e.msg }
func (e *listError) Unwrap() error { return e.err }

// shortError is an SDK error told in one line (see describe).
type shortError struct {
	msg string
	err error
}

func (e *shortError) Error() string { return e.msg }
func (e *shortError) Unwrap() error { return e.err }

// maxDetail bounds the text taken from an upstream error.
const maxDetail = 300

// describe returns a short, one-line account of an SDK error. The SDK's
// own messages span many lines and repeat the whole response body; this
// keeps the status, the ARM error code and the first line of the ARM
// message, which names the identity and the missing permission but never
// holds a credential.
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
