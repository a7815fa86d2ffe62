package rancher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// secretMark is in every secret the fake mints; tests check it never
// appears in errors or logs.
const secretMark = "sEcReTmInTeD"

// fakeToken is a token stored by fakeTokens, as Rancher's v3 Token.
type fakeToken struct {
	Name, Secret, ClusterID, Description, UserID string
	Derived, Current                             bool
	TTL                                          int64
	Created                                      time.Time
}

// fakeTokens serves /v3/tokens as Rancher does: POST mints a derived token
// (201, the only answer with its value), GET lists the user's tokens in
// norman's collection envelope (paged by name with limit and marker),
// DELETE removes one (404 when it is gone). Requests must carry the
// listing token.
type fakeTokens struct {
	t     *testing.T
	srv   *httptest.Server
	clock *clocktesting.FakeClock

	mu        sync.Mutex
	tokens    map[string]*fakeToken
	seq       int
	bearer    string        // the accepted listing token
	maxTTL    time.Duration // Rancher's max-ttl setting, 0 for none
	pageSize  int
	delay     time.Duration // before answering a POST
	created   []map[string]any
	postAuth  []string
	removed   []string
	seen      []string // "METHOD path" of every request
	intercept func(w http.ResponseWriter, r *http.Request) bool
}

func newFakeTokens(t *testing.T) *fakeTokens {
	f := &fakeTokens{t: t, clock: clocktesting.NewFakeClock(time.Date(2026, 8, 21, 10, 0, 0, 0, time.UTC)),
		tokens: map[string]*fakeToken{}, bearer: testToken, pageSize: 1000}
	f.tokens["token-abcde"] = &fakeToken{Name: "token-abcde", UserID: "u-b4qkhsnliz", Current: true,
		Description: "listing", Created: f.clock.Now()}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeTokens) with(change func(f *fakeTokens)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// creates, posts and deleted return copies of the recorded POST bodies,
// POST Authorization headers and deleted names.
func (f *fakeTokens) creates() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.created...)
}

func (f *fakeTokens) posts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.postAuth...)
}

func (f *fakeTokens) deleted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.removed...)
}

func (f *fakeTokens) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

func (f *fakeTokens) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.tokens {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// object is the token as Rancher renders it; the value only on create.
func (f *fakeTokens) object(tk *fakeToken, withValue bool) map[string]any {
	base := f.srv.URL + "/v3/tokens/" + tk.Name
	o := map[string]any{
		"authProvider": "local", "baseType": "token", "clusterId": tk.ClusterID, "created": tk.Created.Format(time.RFC3339),
		"createdTS": tk.Created.UnixMilli(), "creatorId": nil, "current": tk.Current, "description": tk.Description,
		"enabled": true, "expired": false, "id": tk.Name, "isDerived": tk.Derived,
		"labels":         map[string]string{"authn.management.cattle.io/token-userId": tk.UserID, "cattle.io/creator": "norman"},
		"lastUpdateTime": "", "links": map[string]string{"self": base, "remove": base, "update": base}, "name": tk.Name,
		"ttl": tk.TTL, "type": "token", "userId": tk.UserID, "userPrincipal": "local://" + tk.UserID, "uuid": "6f1c" + tk.Name,
	}
	if tk.TTL > 0 {
		exp := tk.Created.Add(time.Duration(tk.TTL) * time.Millisecond)
		o["expiresAt"], o["expired"] = exp.Format(time.RFC3339), !f.clock.Now().Before(exp)
	}
	if withValue {
		o["token"] = tk.Name + ":" + tk.Secret
	}
	return o
}

func (f *fakeTokens) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	intercept, ok := f.intercept, r.Header.Get("Authorization") == "Bearer "+f.bearer
	f.seen = append(f.seen, r.Method+" "+r.URL.Path)
	if r.Method == http.MethodPost {
		f.postAuth = append(f.postAuth, r.Header.Get("Authorization"))
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if intercept != nil && intercept(w, r) {
		return
	}
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(mustAuthenticate))
		return
	}
	name, item := strings.CutPrefix(r.URL.Path, "/v3/tokens/")
	switch {
	case r.URL.Path == "/v3/tokens" && r.Method == http.MethodPost:
		f.create(w, r)
	case r.URL.Path == "/v3/tokens" && r.Method == http.MethodGet:
		f.list(w, r)
	case item && r.Method == http.MethodDelete:
		f.mu.Lock()
		tk := f.tokens[name]
		if tk != nil && !tk.Current {
			delete(f.tokens, name)
			f.removed = append(f.removed, name)
		}
		f.mu.Unlock()
		switch {
		case tk == nil:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"baseType":"error","code":"NotFound","message":"` + name + ` not found","status":404,"type":"error"}`))
		case tk.Current:
			http.Error(w, `{"type":"error","status":400,"message":"Cannot delete token for current session. Use logout instead"}`, 400)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	default:
		http.Error(w, `{"type":"error","status":405}`, http.StatusMethodNotAllowed)
	}
}

func (f *fakeTokens) create(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		f.t.Errorf("token create: %v", err) // require would stop the handler's goroutine, not the test
		http.Error(w, `{"type":"error","status":400}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	delay := f.delay
	f.created = append(f.created, in)
	f.seq++
	ttl := int64(in["ttl"].(float64))
	if m := f.maxTTL.Milliseconds(); m > 0 && (ttl == 0 || ttl > m) {
		ttl = m
	}
	cluster, _ := in["clusterId"].(string)
	desc, _ := in["description"].(string)
	tk := &fakeToken{Name: fmt.Sprintf("token-%05d", f.seq), Secret: fmt.Sprintf("%s%042d", secretMark, f.seq),
		ClusterID: cluster, Description: desc, UserID: "u-b4qkhsnliz", Derived: true, TTL: ttl, Created: f.clock.Now()}
	f.tokens[tk.Name] = tk
	body, err := json.Marshal(f.object(tk, true))
	f.mu.Unlock()
	if err != nil {
		f.t.Errorf("token create: %v", err)
		http.Error(w, `{"type":"error","status":500}`, http.StatusInternalServerError)
		return
	}
	time.Sleep(delay)
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

func (f *fakeTokens) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.tokens))
	for n := range f.tokens {
		names = append(names, n)
	}
	sort.Strings(names)
	start := 0
	if m := r.URL.Query().Get("marker"); m != "" {
		start = sort.SearchStrings(names, m)
	}
	end := min(start+f.pageSize, len(names))
	data := []any{}
	for _, n := range names[start:end] {
		data = append(data, f.object(f.tokens[n], false))
	}
	self := f.srv.URL + "/v3/tokens"
	pagination := map[string]any{"limit": f.pageSize, "total": len(names)}
	if end < len(names) {
		// As Rancher behind a proxy may: a link on another host.
		pagination["next"] = "http://rancher.example.com/v3/tokens?limit=" + strconv.Itoa(f.pageSize) + "&marker=" + names[end]
		pagination["partial"] = true
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "collection", "resourceType": "token", "links": map[string]string{"self": self},
		"createTypes": map[string]string{"token": self}, "actions": map[string]string{"logout": self + "?action=logout"},
		"pagination": pagination, "data": data,
	})
}

type testManager struct {
	*tokenManager
	logs *bytes.Buffer
}

func newTestManager(t *testing.T, f *fakeTokens, ttl time.Duration, listingToken func() (string, error)) testManager {
	t.Helper()
	if listingToken == nil {
		listingToken = func() (string, error) { return testToken, nil }
	}
	logs := &bytes.Buffer{}
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	base, err := url.Parse(f.srv.URL)
	require.NoError(t, err)
	m, err := newTokenManager(base, f.srv.Client(), listingToken, "prod-a", ttl, f.clock.Now, logger)
	require.NoError(t, err)
	m.adopted = true // as after an Adopt with no Secrets (the Adopt tests call it)
	return testManager{tokenManager: m, logs: logs}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// assertNoSecret checks that no secret (minted or listing) is in s.
func assertNoSecret(t *testing.T, s string) {
	t.Helper()
	assert.NotContains(t, s, secretMark)
	assert.NotContains(t, s, strings.SplitN(testToken, ":", 2)[1])
}
