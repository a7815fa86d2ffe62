package rancher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// fixtureHost is the base URL the upstream-shaped fixtures use.
const fixtureHost = "https://rancher.example.com"

// fixture reads testdata/fixtures/rancher/<name> with fixtureHost rewritten
// to base.
func fixture(t testing.TB, name, base string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", "rancher", name))
	require.NoError(t, err)
	return bytes.ReplaceAll(b, []byte(fixtureHost), []byte(base))
}

// fakeRancher serves the parts of Rancher's /v3 API that clientbase and
// this source use. Clusters are paged the way norman pages them (sorted by
// id, limit and marker, absolute next links carrying every query
// parameter), or, in fixture mode, the fixture pages are served verbatim.
type fakeRancher struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	tokens   map[string]bool   // accepted bearer tokens
	items    map[string]*item  // generated mode, by id
	static   map[string][]byte // fixture mode: page body by marker
	creds    map[string][]byte // cloud credentials by id (cloudcredentials_test.go)
	cacerts  string
	linkBase string // base of the links in answers; srv.URL when empty
	// hook, when set, may answer a clusters page itself (page counts from
	// 1) and reports whether it did.
	hook func(w http.ResponseWriter, r *http.Request, page int) bool
	// pathHook, when set, may answer any request itself, before anything
	// else, and reports whether it did.
	pathHook func(w http.ResponseWriter, r *http.Request) bool
	requests []seenRequest
}

type item struct {
	raw      []byte
	state    string
	internal bool
}

type seenRequest struct {
	Path, Query, Auth string
}

func newFake(t testing.TB, tls bool) *fakeRancher {
	var setting struct {
		Value string `json:"value"`
	}
	require.NoError(t, json.Unmarshal(fixture(t, "rancher-settings-cacerts.json", ""), &setting))
	f := &fakeRancher{t: t, tokens: map[string]bool{testToken: true}, items: map[string]*item{}, cacerts: setting.Value}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	// Quiet the handshake errors of the untrusted-certificate case.
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		f.srv.StartTLS()
	} else {
		f.srv.Start()
	}
	t.Cleanup(f.srv.Close)
	return f
}

// testToken has the shape of a Rancher token; tests check it never appears
// in errors.
const testToken = "token-abcde:sEcReTvAlUe5bcdfghjklmnpqrstvwxz2456789bcdfghjklmnpqrs"

// writeToken writes a token file and returns its path.
func writeToken(t testing.TB, dir, token string) string {
	t.Helper()
	p := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(p, []byte(token+"\n"), 0o600))
	return p
}

// config is a source configuration for f with a token file.
func config(t testing.TB, f *fakeRancher) Config {
	return Config{URL: f.srv.URL, Token: sources.SecretRef{File: writeToken(t, t.TempDir(), testToken)}}
}

// useFixturePages serves rancher-clusters-page1.json and page2 verbatim.
func (f *fakeRancher) useFixturePages() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.static = map[string][]byte{
		"":             fixture(f.t, "rancher-clusters-page1.json", f.base()),
		"c-m-2x7kqz4b": fixture(f.t, "rancher-clusters-page2.json", f.base()),
	}
}

// addFixtureClusters puts the four fixture clusters in the generated list.
func (f *fakeRancher) addFixtureClusters() {
	for _, name := range []string{"rancher-clusters-page1.json", "rancher-clusters-page2.json"} {
		var page struct {
			Data []json.RawMessage `json:"data"`
		}
		require.NoError(f.t, json.Unmarshal(fixture(f.t, name, f.srv.URL), &page))
		for _, raw := range page.Data {
			f.putRaw(raw)
		}
	}
}

// putRaw adds or replaces a cluster object.
func (f *fakeRancher) putRaw(raw []byte) {
	var meta struct {
		ID       string `json:"id"`
		State    string `json:"state"`
		Internal bool   `json:"internal"`
	}
	require.NoError(f.t, json.Unmarshal(raw, &meta))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items[meta.ID] = &item{raw: raw, state: meta.State, internal: meta.Internal}
}

// put adds or replaces a cluster given as a map.
func (f *fakeRancher) put(c map[string]any) {
	raw, err := json.Marshal(c)
	require.NoError(f.t, err)
	f.putRaw(raw)
}

// edit changes the cluster with that id.
func (f *fakeRancher) edit(id string, change func(c map[string]any)) {
	f.mu.Lock()
	it := f.items[id]
	f.mu.Unlock()
	require.NotNil(f.t, it, "no cluster %s", id)
	var c map[string]any
	require.NoError(f.t, json.Unmarshal(it.raw, &c))
	change(c)
	f.put(c)
}

// remove deletes the cluster with that id.
func (f *fakeRancher) remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Contains(f.t, f.items, id)
	delete(f.items, id)
}

// setCondition sets the status of the cluster's condition typ, adding the
// condition when it has none, as Rancher's controllers do.
func setCondition(c map[string]any, typ, status string) {
	conds, _ := c["conditions"].([]any)
	for _, x := range conds {
		if m := x.(map[string]any); m["type"] == typ {
			m["status"] = status
			return
		}
	}
	c["conditions"] = append(conds, map[string]any{"type": typ, "status": status, "lastUpdateTime": "2026-08-21T10:00:00Z"})
}

// dropCondition removes the cluster's condition typ.
func dropCondition(c map[string]any, typ string) {
	conds, _ := c["conditions"].([]any)
	var out []any
	for _, x := range conds {
		if x.(map[string]any)["type"] != typ {
			out = append(out, x)
		}
	}
	c["conditions"] = out
}

// generate adds n clusters built from the single-cluster fixture, with ids
// c-m-00000000, c-m-00000001, ... and names cluster-00000000, ...
func (f *fakeRancher) generate(n int) {
	tmpl := fixture(f.t, "rancher-cluster-single.json", f.srv.URL)
	tmpl = bytes.ReplaceAll(tmpl, []byte("\n"), nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range n {
		id := fmt.Sprintf("c-m-%08d", i)
		raw := bytes.ReplaceAll(tmpl, []byte("c-m-2x7kqz4b"), []byte(id))
		raw = bytes.ReplaceAll(raw, []byte("prod-eu-west"), []byte(fmt.Sprintf("cluster-%08d", i)))
		f.items[id] = &item{raw: raw, state: "active"}
	}
}

func (f *fakeRancher) base() string {
	if f.linkBase != "" {
		return f.linkBase
	}
	return f.srv.URL
}

func (f *fakeRancher) setCACerts(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cacerts = v
}

func (f *fakeRancher) setLinkBase(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.linkBase = v
}

func (f *fakeRancher) setTokens(tokens ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens = map[string]bool{}
	for _, t := range tokens {
		f.tokens[t] = true
	}
}

func (f *fakeRancher) setHook(h func(w http.ResponseWriter, r *http.Request, page int) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = h
}

// answer makes the fake answer every request for path with status and
// body, without X-Api-Schemas (as a proxy in front of Rancher would).
func (f *fakeRancher) answer(path string, status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pathHook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != path {
			return false
		}
		w.Header().Del("X-Api-Schemas")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
		return true
	}
}

// seen returns the requests received so far and forgets them.
func (f *fakeRancher) seen() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.requests
	f.requests = nil
	return out
}

// paths counts requests by path.
func paths(reqs []seenRequest) map[string]int {
	out := map[string]int{}
	for _, r := range reqs {
		out[r.Path]++
	}
	return out
}

const mustAuthenticate = `{"type":"error","status":"401","message":"must authenticate"}`

func (f *fakeRancher) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, seenRequest{Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization")})
	authorized := f.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	base, pathHook := f.base(), f.pathHook
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Api-Schemas", base+"/v3/schemas")
	if pathHook != nil && pathHook(w, r) {
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, `{"type":"error","status":"405"}`, http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/v3/settings/cacerts" { // unauthenticated in Rancher
		f.mu.Lock()
		v := f.cacerts
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "cacerts", "type": "setting", "name": "cacerts", "value": v})
		return
	}
	if !authorized {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(mustAuthenticate))
		return
	}
	switch r.URL.Path {
	case "/v3":
		_, _ = fmt.Fprintf(w, `{"type":"apiRoot","links":{"self":%q,"clusters":%q}}`, base+"/v3", base+"/v3/clusters")
	case "/v3/schemas":
		_, _ = w.Write(fixture(f.t, "rancher-schemas-min.json", base))
	case "/v3/clusters":
		f.serveClusters(w, r, base)
	case "/v3/cloudcredentials":
		f.serveCloudCredentials(w, r, base)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"baseType":"error","code":"NotFound","message":"not found","status":404,"type":"error"}`))
	}
}

func (f *fakeRancher) serveClusters(w http.ResponseWriter, r *http.Request, base string) {
	f.mu.Lock()
	static, hook := f.static, f.hook
	f.mu.Unlock()
	if static != nil {
		f.serveFixturePage(w, r, static, hook)
		return
	}
	f.serveGeneratedPage(w, r, base, hook)
}

// serveFixturePage serves a fixture page verbatim: page 1 without a
// marker, page 2 with one.
func (f *fakeRancher) serveFixturePage(w http.ResponseWriter, r *http.Request, static map[string][]byte,
	hook func(w http.ResponseWriter, r *http.Request, page int) bool) {
	marker := r.URL.Query().Get("marker")
	page := 1
	if marker != "" {
		page = 2
	}
	if hook != nil && hook(w, r, page) {
		return
	}
	body, ok := static[marker]
	if !ok {
		http.Error(w, `{"type":"error","status":"404"}`, http.StatusNotFound)
		return
	}
	_, _ = w.Write(body)
}

// listed returns the ids and objects of the generated clusters that the
// query's filters keep, sorted by id as norman sorts them.
func (f *fakeRancher) listed(q url.Values) ([]string, [][]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id, it := range f.items {
		if s := q.Get("state"); s != "" && it.state != s {
			continue
		}
		if q.Get("internal") == "false" && it.internal {
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	data := make([][]byte, 0, len(ids))
	for _, id := range ids {
		data = append(data, f.items[id].raw)
	}
	return ids, data
}

// serveGeneratedPage pages the generated clusters as norman does: limit
// and marker, absolute links carrying every query parameter.
func (f *fakeRancher) serveGeneratedPage(w http.ResponseWriter, r *http.Request, base string,
	hook func(w http.ResponseWriter, r *http.Request, page int) bool) {
	q := r.URL.Query()
	ids, data := f.listed(q)
	limit := 1000
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 {
		limit = min(l, 10000)
	}
	start := 0
	if marker := q.Get("marker"); marker != "" {
		start = sort.SearchStrings(ids, marker)
		if start == len(ids) || ids[start] != marker {
			start = 0 // as norman: an unknown marker starts over
		}
	}
	end := min(start+limit, len(ids))
	if hook != nil && hook(w, r, start/limit+1) {
		return
	}
	link := func(m string) string {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("marker", m)
		return base + "/v3/clusters?" + v.Encode()
	}
	pagination := map[string]any{"limit": limit, "total": len(ids)}
	if end < len(ids) {
		pagination["next"] = link(ids[end])
	}
	if start > 0 || end < len(ids) {
		pagination["partial"] = true
		pagination["marker"] = q.Get("marker")
		pagination["first"] = link(ids[0])
	}
	head, err := json.Marshal(map[string]any{
		"type": "collection", "resourceType": "cluster", "actions": map[string]string{},
		"links": map[string]string{"self": base + "/v3/clusters"}, "pagination": pagination,
	})
	if err != nil {
		panic(err)
	}
	var b bytes.Buffer
	b.Write(head[:len(head)-1])
	b.WriteString(`,"data":[`)
	b.Write(bytes.Join(data[start:end], []byte(",")))
	b.WriteString("]}")
	_, _ = w.Write(b.Bytes())
}
