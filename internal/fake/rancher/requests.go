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

// requestState is the fake's part that the recording, the hooks and the
// canned answers keep, under f.mu.
type requestState struct {
	record   bool // WithRecording
	requests []Request
	hook     Hook
	pageHook PageHook
	answers  map[string]cannedAnswer // by path
}

// cannedAnswer is what Answer makes the fake answer.
type cannedAnswer struct {
	status int
	body   string
}

// PageHook may answer a page of GET /v3/clusters in the fake's place: page
// is its number, counting from 1 as a client following the next links
// counts them (1 + the marker's place / the limit; in ServeFixturePages
// mode, 2 with a marker). It returns true when it answered, false to let
// the fake answer. It runs without the fake's lock, on the request's
// goroutine: it may block until the request ends, or panic with
// http.ErrAbortHandler to cut the connection mid-listing.
type PageHook func(w http.ResponseWriter, r *http.Request, page int) bool

// InterceptPages sets the hook that sees every GET /v3/clusters the fake
// would answer: after Intercept and Answer, authenticated, while Rancher
// is not down (SetDown); w's Content-Type is JSON already. nil removes it.
func (f *Fake) InterceptPages(h PageHook) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pageHook = h
}

// hookPage lets the page hook answer r, and reports whether it did.
func (f *Fake) hookPage(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet || r.URL.Path != "/v3/clusters" {
		return false
	}
	f.mu.Lock()
	h, n := f.pageHook, 0
	if h != nil && !f.down {
		if _, msg := f.authorize(r, "", false); msg == "" {
			n = f.pageNumber(r)
		}
	}
	f.mu.Unlock()
	if n == 0 {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	return h(w, r, n)
}

// pageNumber is the number of the page of clusters r asks for. Called
// with f.mu held.
func (f *Fake) pageNumber(r *http.Request) int {
	q := r.URL.Query()
	if f.fixturePages {
		if q.Get("marker") != "" {
			return 2
		}
		return 1
	}
	return pageOf(f.listed(q), q, defaultLimit, maxLimit, "").number()
}

// Answer makes the fake answer every request for path (any method) with
// status and body, JSON, as a proxy in front of Rancher or a broken
// Rancher would: after Intercept's hook, before authentication, without
// the X-Api-Schemas header even on /v3. Status 0 removes path's answer.
func (f *Fake) Answer(path string, status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if status == 0 {
		delete(f.answers, path)
		return
	}
	if f.answers == nil {
		f.answers = map[string]cannedAnswer{}
	}
	f.answers[path] = cannedAnswer{status: status, body: body}
}

// Requests returns the requests received so far, oldest first, if the
// fake was made WithRecording (else none).
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	reqs := slices.Clone(f.requests)
	f.mu.Unlock()
	return reqs
}

// TakeRequests returns the requests received since the last TakeRequests
// (since New the first time), oldest first, if the fake was made
// WithRecording, and forgets them: Requests then holds only later ones.
func (f *Fake) TakeRequests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	reqs := f.requests
	f.requests = nil
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
