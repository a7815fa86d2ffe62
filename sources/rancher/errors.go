package rancher

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/rancher/norman/clientbase"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// failed is the error of a failed listing: err (short, never a credential)
// with its kind and the operation that failed, for errors_total.
func failed(kind upstream.Kind, op string, err error) error {
	return &upstream.Error{Kind: kind, Operation: op, Err: err}
}

// invalid is an answer of op that is not what the API documents.
func invalid(op, format string, args ...any) error {
	return failed(upstream.KindInvalidResponse, op, fmt.Errorf(format, args...))
}

// canceled is the error of a listing whose context ended before it began.
func canceled(ctx context.Context) error {
	kind := upstream.KindCanceled
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		kind = upstream.KindTimeout
	}
	return failed(kind, opListing, ctx.Err())
}

// otherOriginError is a request refused because its URL is outside the
// configured server.
type otherOriginError struct{}

func (otherOriginError) Error() string {
	return "refused to send a request outside the configured rancher url"
}

// fail turns the error of a request of op into a short one with its kind;
// what names the request in the message. It never passes norman's text
// on: that quotes whole response bodies.
func (l *listing) fail(op, what string, err error) error {
	var (
		apiErr *clientbase.APIError
		origin otherOriginError
	)
	switch {
	case errors.As(err, &apiErr):
		return l.failStatus(op, what, apiErr.StatusCode)
	case errors.As(err, &origin):
		return failed(upstream.KindConfig, op, fmt.Errorf("%s: %w", what, origin))
	case errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && l.ctx.Err() == nil:
		return failed(upstream.KindTimeout, op, fmt.Errorf("%s: no answer within requestTimeout %s: %w", what, l.s.timeout, context.DeadlineExceeded))
	}
	return failTransport(op, what, err)
}

// failTransport classifies the error of a request that got no usable
// answer (cancelled, timed out, TLS, network, a malformed body), for the
// listing and the token manager alike.
func failTransport(op, what string, err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		ne  net.Error
	)
	switch {
	case errors.Is(err, context.Canceled):
		return failed(upstream.KindCanceled, op, fmt.Errorf("%s: %w", what, context.Canceled))
	case errors.Is(err, context.DeadlineExceeded):
		return failed(upstream.KindTimeout, op, fmt.Errorf("%s: %w", what, context.DeadlineExceeded))
	case errors.As(err, &syn):
		return invalid(op, "%s: malformed JSON at byte %d", what, syn.Offset)
	case errors.As(err, &typ):
		return invalid(op, "%s: unexpected JSON %s at %s", what, typ.Value, typ.Field)
	}
	if tlsErr := tlsError(err); tlsErr != nil {
		return failed(upstream.KindTLS, op, fmt.Errorf("%s: %s", what, tlsErr.Error()))
	}
	if errors.As(err, &ne) && ne.Timeout() {
		return failed(upstream.KindTimeout, op, fmt.Errorf("%s: timed out", what))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the URL
	}
	if strings.Contains(err.Error(), "Failed to parse") {
		return invalid(op, "%s: malformed JSON", what)
	}
	return failed(upstream.KindNetwork, op, fmt.Errorf("%s: %s", what, err.Error()))
}

// failStatus is the error of an answer with a status other than 200. A
// rejected token is named by its reference, never its value.
func (l *listing) failStatus(op, what string, code int) error {
	kind := upstream.ForStatus(code)
	status := fmt.Sprintf("%d %s", code, http.StatusText(code))
	if kind == upstream.KindAuth {
		return failed(kind, op, fmt.Errorf("%s: rancher %s rejected the token from %s (%s)",
			what, l.s.origin, l.s.cfg.Token.String(), status))
	}
	return failed(kind, op, fmt.Errorf("%s: rancher answered %s", what, status))
}

// tlsError returns the certificate or handshake error within err, if any.
func tlsError(err error) error {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		certBad  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		alert    tls.AlertError
	)
	switch {
	case errors.As(err, &verify):
		return verify
	case errors.As(err, &unknown):
		return unknown
	case errors.As(err, &hostname):
		return hostname
	case errors.As(err, &certBad):
		return certBad
	case errors.As(err, &record):
		return record
	case errors.As(err, &alert):
		return alert
	}
	return nil
}
