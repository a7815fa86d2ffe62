package rancher

import (
	"bytes"
	"io"
	"net/http"
	"slices"
)

// Request is a request the fake's server received (WithRecording): /v3,
// the auth proxy, whatever the hook (Intercept) answered. The requests to
// the authorized cluster endpoints are not recorded.
type Request struct {
	Method, Path, RawQuery string
	// Authorization is the request's Authorization header, bearer value
	// included: the test's to check, never to print.
	Authorization string
	// Body is the request's body, up to maxRecordedBody bytes.
	Body []byte
}

// maxRecordedBody is the most bytes of a body Requests keeps.
const maxRecordedBody = 1 << 20

// Hook may answer a request in the fake's place: it returns true when it
// did, false to let the fake answer. fake is the fake's own answer (the
// hook is not called again), for a hook that lets the fake act and answers
// otherwise: fake.ServeHTTP(httptest.NewRecorder(), r) then a 502 is a
// token Rancher created whose answer a proxy lost. A hook runs without the
// fake's lock: it may call the fake's methods, Intercept(nil) included.
type Hook func(w http.ResponseWriter, r *http.Request, fake http.Handler) bool

// Intercept sets the hook that sees every request to the fake's server
// (not to the authorized cluster endpoints) after it is recorded, before
// the fake authenticates it; nil removes it.
func (f *Fake) Intercept(h Hook) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = h
}

// requestState is the fake's part that the recording and the hook keep,
// under f.mu.
type requestState struct {
	record   bool // WithRecording
	requests []Request
	hook     Hook
}

// Requests returns the requests received so far, oldest first, if the
// fake was made WithRecording (else none).
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	reqs := slices.Clone(f.requests)
	f.mu.Unlock()
	return reqs
}

// recordRequest records r, reading its body and putting it back for the
// handler.
func (f *Fake) recordRequest(r *http.Request) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		body, _ = io.ReadAll(io.LimitReader(r.Body, maxRecordedBody))
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Authorization: r.Header.Get("Authorization"), Body: body})
}
