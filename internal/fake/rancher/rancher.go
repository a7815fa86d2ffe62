// Package rancher is a fake Rancher for tests, in Rancher's own shapes: the
// /v3 API (clusters, settings, schemas, tokens), the auth proxy and the
// authorized cluster endpoints, forwarding to a real kube-apiserver. See
// README.md for what it models and what it does not.
package rancher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fixtureHost and fixtureID are the base URL and cluster id the
// upstream-shaped fixtures use; the fake rewrites them.
const (
	fixtureHost = "https://rancher.example.com"
	fixtureID   = "c-m-2x7kqz4b"
	fixtureName = "prod-eu-west"
)

// Cluster is what a test says about a Rancher cluster; the rest of
// the object comes from the single-cluster fixture (an established, active
// cluster: every condition True, Waiting included).
type Cluster struct {
	ID, Name, State string
	Labels          map[string]string
	// Conditions replace the fixture's conditions of the same type (a
	// condition with an empty Status removes that type), as Rancher's
	// controllers set them for State (see rancherState).
	Conditions []Condition
	// Transitioning and Message are Rancher's transitioning (no, yes,
	// error; default: no when active, else yes) and transitioningMessage.
	Transitioning, Message string
	// Removed is metadata.removed (the deletion timestamp), "" when unset.
	Removed string
	// ACE enables the cluster's authorized cluster endpoint: its own TLS
	// listener (see ACE), shown in localClusterAuthEndpoint. Without it
	// the endpoint is shown disabled.
	ACE bool
	// ACEFQDN, when set, is an authorized cluster endpoint its owner
	// enabled with this fqdn (and no listener behind it): what the owner of
	// a cluster can write in Rancher.
	ACEFQDN string
	// Disconnected is a cluster whose agent is not connected: the proxy
	// answers 500 "cluster agent disconnected" after a short wait. Its
	// authorized cluster endpoint, which bypasses the agent, still serves.
	Disconnected bool
}

// Condition is one of a cluster's status.conditions, as /v3 shows
// them (flattened to the top level).
type Condition struct {
	Type, Status, Reason, Message string
}

// Fake serves the parts of Rancher that the service and Argo CD
// use, in Rancher's shapes: the API root with X-Api-Schemas, the schemas,
// the cacerts setting, the cluster collection (filtered by state and
// internal as Rancher filters them), the tokens API
// (tokens.go; a test's handles on them in tokencontrol.go), the auth proxy
// /k8s/clusters/<id> and one authorized cluster endpoint per ACE cluster,
// both forwarding to the suite's kube-apiserver (proxy.go). Down makes
// every request to Rancher a 500 (the authorized cluster endpoints still
// serve). What a unit test needs besides (a clock of its own, names it can
// predict, paging, recorded requests, a hook that answers in the fake's
// place) is in the options of New (options.go) and in requests.go.
type Fake struct {
	srv *httptest.Server

	schemas, cacerts, cluster []byte // fixtures, host rewritten

	mu       sync.Mutex
	clusters map[string]Cluster
	down     bool
	served   int // cluster lists answered 200
	// linkBase is the base URL of the pagination links ("": srv.URL).
	linkBase string

	tokenState
	proxyState
	requestState
}

// New starts a fake Rancher serving the fixtures of the directory fixtures
// (testdata/fixtures/rancher) with no cluster; token is its API token, the
// listing credential. Close stops it.
func New(fixtures, token string, opts ...Option) (*Fake, error) {
	f := &Fake{clusters: map[string]Cluster{}}
	for _, o := range opts {
		o(f)
	}
	f.initTokens(token)
	f.initProxy()
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	for name, dst := range map[string]*[]byte{"rancher-schemas-min.json": &f.schemas,
		"rancher-settings-cacerts.json": &f.cacerts, "rancher-cluster-single.json": &f.cluster} {
		b, err := os.ReadFile(filepath.Join(fixtures, name))
		if err != nil {
			f.srv.Close()
			return nil, fmt.Errorf("rancher fixture: %w", err)
		}
		*dst = bytes.ReplaceAll(b, []byte(fixtureHost), []byte(f.srv.URL))
	}
	var err error
	if f.schemas, err = withTokenSchema(f.schemas, f.srv.URL); err != nil {
		f.srv.Close()
		return nil, fmt.Errorf("rancher fixture: %w", err)
	}
	return f, nil
}

// URL of the fake Rancher server.
func (f *Fake) URL() string { return f.srv.URL }

// Server is the URL at which the source serves a cluster (Rancher's proxy).
func (f *Fake) Server(id string) string { return f.srv.URL + "/k8s/clusters/" + id }

// Close stops the fake and every authorized cluster endpoint, cutting
// the connections still open (watches through the proxy).
func (f *Fake) Close() {
	f.mu.Lock()
	aces := f.dropACE(func(string) bool { return true })
	f.mu.Unlock()
	closeACE(aces)
	f.srv.CloseClientConnections()
	f.srv.Close()
}

// Set adds or replaces a cluster.
func (f *Fake) Set(c Cluster) {
	f.mu.Lock()
	f.clusters[c.ID] = c
	if !c.Disconnected { // the agent syncs the cluster's tokens to its endpoint
		for _, t := range f.tokens {
			if t.ClusterID == c.ID {
				t.Synced = true
			}
		}
	}
	stale := f.dropACE(f.aceStale)
	f.mu.Unlock()
	closeACE(stale)
}

// Remove deletes a cluster from Rancher (and stops its authorized cluster
// endpoint).
func (f *Fake) Remove(id string) {
	f.mu.Lock()
	delete(f.clusters, id)
	stale := f.dropACE(f.aceStale)
	f.mu.Unlock()
	closeACE(stale)
}

// ListNothing empties the fleet, as a token that lost its access sees it
// (200 with no cluster). It returns the clusters it took away, for
// Change(gone) to bring back, and the count of lists answered before.
func (f *Fake) ListNothing() ([]Cluster, int) {
	f.mu.Lock()
	gone := make([]Cluster, 0, len(f.clusters))
	ids := make([]string, 0, len(f.clusters))
	for id, c := range f.clusters {
		gone, ids = append(gone, c), append(ids, id)
	}
	f.mu.Unlock()
	return gone, f.Change(nil, ids...)
}

// Change applies a change to the fleet and returns how many cluster lists
// were answered before it, atomically: every list counted after that
// number sees the change.
func (f *Fake) Change(set []Cluster, remove ...string) int {
	f.mu.Lock()
	for _, c := range set {
		f.clusters[c.ID] = c
	}
	for _, id := range remove {
		delete(f.clusters, id)
	}
	n := f.served
	stale := f.dropACE(f.aceStale)
	f.mu.Unlock()
	closeACE(stale)
	return n
}

// SetDown makes Rancher answer 500 to everything, or serve again.
func (f *Fake) SetDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// Served counts the successful cluster lists.
func (f *Fake) Served() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.served
}

// writeRancher writes a JSON answer.
func writeRancher(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// writeAPIError writes a norman error body (httperror: status a number).
func writeAPIError(w http.ResponseWriter, code int, errCode, message string) {
	b, _ := json.Marshal(map[string]any{"baseType": "error", "type": "error", "status": code, "code": errCode, "message": message})
	writeRancher(w, code, b)
}

// writeUnauthorized writes the 401 of Rancher's authentication filter
// (status a string), for /v3 and /k8s/clusters alike.
func writeUnauthorized(w http.ResponseWriter, message string) {
	b, _ := json.Marshal(map[string]string{"type": "error", "status": "401", "code": "Unauthorized", "message": message})
	writeRancher(w, http.StatusUnauthorized, b)
}

// serve records the request (WithRecording), lets the hook answer it
// (Intercept), else answers it as Rancher.
func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	record, hook := f.record, f.hook
	f.mu.Unlock()
	if record {
		f.recordRequest(r)
	}
	if hook != nil && hook(w, r, http.HandlerFunc(f.answer)) {
		return
	}
	f.answer(w, r)
}

// answer answers a request as Rancher: the API's answers are made under
// f.mu and written once it is released, a token creation's after the
// mint delay (SetMintDelay).
func (f *Fake) answer(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, proxyPrefix) {
		f.serveProxy(w, r) // takes the lock only to authorize
		return
	}
	rec := httptest.NewRecorder()
	f.mu.Lock()
	f.serveAPI(rec, r)
	var delay time.Duration
	if r.Method == http.MethodPost && r.URL.Path == "/v3/tokens" {
		delay = f.mintDelay
	}
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// serveAPI answers a request to /v3. Called with f.mu held.
func (f *Fake) serveAPI(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(code int, b []byte) { writeRancher(w, code, b) }
	if f.down {
		writeJSON(http.StatusInternalServerError, []byte(`{"type":"error","status":"500","code":"ServerError","message":"Internal error occurred: etcdserver: request timed out"}`))
		return
	}
	if id, ok := strings.CutPrefix(r.URL.Path, "/v3/clusters/"); ok && r.Method == http.MethodPost &&
		r.URL.Query().Get("action") == "generateKubeconfig" {
		f.generateKubeconfig(w, r, id)
		return
	}
	var caller *fakeToken
	if r.URL.Path != "/v3/settings/cacerts" {
		// /v3 is routed to no cluster: a cluster-scoped token is refused
		var msg string
		if caller, msg = f.authorize(r, "", false); msg != "" {
			writeUnauthorized(w, msg)
			return
		}
	}
	if r.URL.Path == "/v3/tokens" || strings.HasPrefix(r.URL.Path, "/v3/tokens/") {
		f.serveTokens(w, r, caller)
		return
	}
	switch r.URL.Path {
	case "/v3":
		w.Header().Set("X-Api-Schemas", f.srv.URL+"/v3/schemas")
		writeJSON(http.StatusOK, []byte(`{"type":"apiRoot","links":{"self":"`+f.srv.URL+`/v3"}}`))
	case "/v3/schemas":
		writeJSON(http.StatusOK, f.schemas)
	case "/v3/settings/cacerts":
		writeJSON(http.StatusOK, f.cacerts)
	case "/v3/clusters":
		b, err := f.collection(r)
		if err != nil {
			writeJSON(http.StatusInternalServerError, []byte(`{"type":"error","status":"500","message":"fake: `+err.Error()+`"}`))
			return
		}
		f.served++
		writeJSON(http.StatusOK, b)
	default:
		writeJSON(http.StatusNotFound, []byte(`{"type":"error","status":"404","code":"NotFound","message":"not found"}`))
	}
}

// collection renders the clusters matching the request's state and
// internal filters, sorted by id, a page of them as norman pages: limit
// clusters (default 1000) from the id marker on, with an absolute next
// link carrying the query and partial when more follow.
func (f *Fake) collection(r *http.Request) ([]byte, error) {
	q := r.URL.Query()
	ids := make([]string, 0, len(f.clusters))
	for id := range f.clusters {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	data, listed := []any{}, []string{}
	for _, id := range ids {
		c := f.clusters[id]
		if s := q.Get("state"); s != "" && s != c.State {
			continue
		}
		if q.Get("internal") == "true" {
			continue // no cluster of ours is Rancher's own
		}
		raw := strings.NewReplacer(fixtureID, c.ID, fixtureName, c.Name).Replace(string(f.cluster))
		var obj map[string]any
		if err := json.Unmarshal([]byte(raw), &obj); err != nil {
			return nil, err
		}
		obj["state"] = c.State
		obj["transitioning"] = map[bool]string{true: "no", false: "yes"}[c.State == "active"]
		if c.Transitioning != "" {
			obj["transitioning"] = c.Transitioning
		}
		obj["transitioningMessage"] = c.Message
		if c.Removed != "" {
			obj["removed"] = c.Removed
		}
		if len(c.Conditions) > 0 {
			obj["conditions"] = withConditions(obj["conditions"], c.Conditions)
		}
		obj["labels"] = c.Labels
		obj["uuid"] = "e2e-" + c.ID
		if err := f.renderACE(obj, c); err != nil {
			return nil, err
		}
		data = append(data, obj)
		listed = append(listed, c.ID)
	}
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit < 1 {
		limit = 1000
	}
	start := 0
	if m := q.Get("marker"); m != "" {
		start = sort.SearchStrings(listed, m)
	}
	end := min(start+limit, len(data))
	pagination := map[string]any{"limit": limit, "total": len(data)}
	if end < len(data) {
		q.Set("marker", listed[end])
		pagination["next"], pagination["partial"] = f.links()+"/v3/clusters?"+q.Encode(), true
	}
	return json.Marshal(map[string]any{
		"type": "collection", "resourceType": "cluster",
		"links":      map[string]string{"self": f.srv.URL + "/v3/clusters"},
		"pagination": pagination,
		"data":       data[start:end],
	})
}

// withConditions returns the fixture's conditions with those of the same
// type replaced by set (removed when set's Status is empty), and set's
// other types appended.
func withConditions(fixture any, set []Condition) []any {
	list, _ := fixture.([]any)
	byType := map[string]Condition{}
	for _, c := range set {
		byType[c.Type] = c
	}
	out := make([]any, 0, len(list)+len(set))
	done := map[string]bool{}
	render := func(c Condition) map[string]any {
		m := map[string]any{"type": c.Type, "status": c.Status, "lastUpdateTime": "2026-11-23T12:00:00Z"}
		if c.Reason != "" {
			m["reason"] = c.Reason
		}
		if c.Message != "" {
			m["message"] = c.Message
		}
		return m
	}
	for _, x := range list {
		m, _ := x.(map[string]any)
		typ, _ := m["type"].(string)
		c, ok := byType[typ]
		switch {
		case !ok:
			out = append(out, x)
		case c.Status != "":
			out = append(out, render(c))
		}
		done[typ] = true
	}
	for _, c := range set {
		if !done[c.Type] && c.Status != "" {
			out = append(out, render(c))
		}
	}
	return out
}
