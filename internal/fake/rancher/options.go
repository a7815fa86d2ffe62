package rancher

import (
	"crypto/x509"
	"net/http"

	"k8s.io/utils/clock"
)

// The options of New: what a unit test sets that the end-to-end suite
// leaves at Rancher's defaults.

// Option configures a fake at New.
type Option func(*Fake)

// WithClock makes the fake's token clock c (default: the wall clock):
// tokens are created at c.Now() and expire by it, AdvanceClock adding to
// it. A test that steps a k8s.io/utils/clock/testing FakeClock steps the
// fake's tokens with it.
func WithClock(c clock.PassiveClock) Option {
	return func(f *Fake) { f.clock = c }
}

// WithTokenNames names the tokens the fake creates (POST /v3/tokens,
// IssueToken, generateKubeconfig, AddToken without a name) with
// names(n) instead of Rancher's random ones: n counts them from 1, a name
// already in use skips to the next n. For tests that assert on names and
// secrets, e.g. "token-00001" with a secret carrying a mark that must
// never show in a log.
func WithTokenNames(names func(n int) (name, secret string)) Option {
	return func(f *Fake) { f.names = names }
}

// WithLoginAPIToken makes the API token a login (session) token, as when
// the credential is a UI session's: not derived, listed with current:
// true to its own requests, and not deletable with itself (DELETE answers
// 400 "Cannot delete token for current session", as Rancher's token
// manager does). Without it the API token is an API key: derived, never
// current, deletable.
func WithLoginAPIToken() Option {
	return func(f *Fake) { f.loginAPIToken = true }
}

// WithRecording makes the fake record every request it receives
// (Requests), bodies included.
func WithRecording() Option {
	return func(f *Fake) { f.record = true }
}

// WithTLS serves the fake over HTTPS with httptest's certificate
// (Certificate), as a Rancher whose certificate chains to a private CA:
// Client trusts it, a client that does not fails its handshake (not
// logged). The cacerts setting stays the fixture's (SetCACerts).
func WithTLS() Option {
	return func(f *Fake) { f.tls = true }
}

// Client is an http.Client for the fake's server (trusting it, WithTLS).
func (f *Fake) Client() *http.Client { return f.srv.Client() }

// Certificate is the server's certificate, WithTLS; nil without.
func (f *Fake) Certificate() *x509.Certificate { return f.srv.Certificate() }
