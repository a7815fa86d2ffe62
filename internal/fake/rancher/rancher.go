// Package rancher is a fake Rancher for tests, in Rancher's own shapes: the
// /v3 API (clusters, settings, schemas, tokens), the auth proxy and the
// authorized cluster endpoints, forwarding to a real kube-apiserver. See
// README.md for what it models and what it does not.
package rancher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// Fake serves the parts of Rancher that the service and Argo CD
// use, in Rancher's shapes: the API root with X-Api-Schemas, the schemas,
// the cacerts setting (settings.go), the cluster collection (clusters.go;
// raw objects in rawclusters.go), filtered by state and internal as
// Rancher filters them and paged as norman pages (paging.go), the cloud
// credentials (cloudcredentials.go), the tokens API (tokens.go; a test's
// handles on them in tokencontrol.go), the auth proxy /k8s/clusters/<id>
// and one authorized cluster endpoint per ACE cluster, both forwarding to
// the suite's kube-apiserver (proxy.go). Down makes every request to
// Rancher a 500 (the authorized cluster endpoints still serve). What a
// unit test needs besides (a clock of its own, names it can predict, TLS,
// recorded requests, hooks and canned answers in the fake's place) is in
// the options of New (options.go) and in requests.go.
type Fake struct {
	srv *httptest.Server

	schemas, cacerts, cluster []byte // fixtures, host rewritten
	// pages are the recorded cluster pages by marker (ServeFixturePages),
	// recorded their clusters (PutFixtureClusters), clusterRaw the
	// single-cluster fixture as a raw cluster (Generate): host rewritten.
	pages      map[string][]byte
	recorded   []Cluster
	clusterRaw Cluster
	tls        bool // WithTLS

	mu           sync.Mutex
	clusters     map[string]Cluster
	creds        map[string]CloudCredential
	down         bool
	fixturePages bool // ServeFixturePages
	served       int  // cluster lists answered 200
	// linkBase is the base URL of the links the fake writes ("": srv.URL).
	linkBase string

	tokenState
	proxyState
	requestState
	subscribeState
}

// New starts a fake Rancher serving the fixtures of the directory fixtures
// (testdata/fixtures/rancher) with no cluster; token is its API token, the
// listing credential. Close stops it.
func New(fixtures, token string, opts ...Option) (*Fake, error) {
	f := &Fake{clusters: map[string]Cluster{}, creds: map[string]CloudCredential{}}
	for _, o := range opts {
		o(f)
	}
	f.initTokens(token)
	f.initProxy()
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	if f.tls {
		f.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes of clients that do not trust it
		f.srv.StartTLS()
	} else {
		f.srv.Start()
	}
	var page1, page2 []byte
	for name, dst := range map[string]*[]byte{"rancher-schemas-min.json": &f.schemas,
		"rancher-settings-cacerts.json": &f.cacerts, "rancher-cluster-single.json": &f.cluster,
		"rancher-clusters-page1.json": &page1, "rancher-clusters-page2.json": &page2} {
		b, err := os.ReadFile(filepath.Join(fixtures, name))
		if err != nil {
			f.srv.Close()
			return nil, fmt.Errorf("rancher fixture: %w", err)
		}
		*dst = bytes.ReplaceAll(b, []byte(fixtureHost), []byte(f.srv.URL))
	}
	var err error
	if f.schemas, err = withTokenSchema(f.schemas, f.srv.URL); err == nil {
		err = f.loadRecorded(page1, page2)
	}
	if err != nil {
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
	f.CutSubscribers()
	f.srv.CloseClientConnections()
	f.srv.Close()
}

// Set adds or replaces a cluster.
func (f *Fake) Set(c Cluster) { f.set(c) }

// set adds or replaces clusters, described or raw.
func (f *Fake) set(cs ...Cluster) {
	f.mu.Lock()
	f.changed(cs, nil)
	for _, c := range cs {
		f.clusters[c.ID] = c
		if !c.Disconnected { // the agent syncs the cluster's tokens to its endpoint
			for _, t := range f.tokens {
				if t.ClusterID == c.ID {
					t.Synced = true
				}
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
	if c, ok := f.clusters[id]; ok {
		f.changed(nil, []Cluster{c})
	}
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
	var removed []Cluster
	for _, id := range remove {
		if c, ok := f.clusters[id]; ok {
			removed = append(removed, c)
		}
	}
	f.changed(set, removed)
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
// (Intercept), then a canned answer (Answer), else answers it as Rancher.
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
	f.mu.Lock()
	canned, ok := f.answers[r.URL.Path]
	f.mu.Unlock()
	if ok {
		writeRancher(w, canned.status, []byte(canned.body))
		return
	}
	f.answer(w, r)
}

// answer answers a request as Rancher: the API's answers are made under
// f.mu and written once it is released, a token creation's after the
// mint delay (SetMintDelay); a page of clusters the page hook may answer
// first (InterceptPages).
func (f *Fake) answer(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, proxyPrefix) {
		f.serveProxy(w, r) // takes the lock only to authorize
		return
	}
	if r.URL.Path == "/v3/subscribe" {
		f.serveSubscribe(w, r) // a websocket: takes the lock only to authorize and register
		return
	}
	if f.hookPage(w, r) {
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
		w.Header().Set("X-Api-Schemas", f.links()+"/v3/schemas")
		writeJSON(http.StatusOK, f.root())
	case "/v3/schemas":
		writeJSON(http.StatusOK, f.onLinkBase(f.schemas))
	case "/v3/settings/cacerts":
		writeJSON(http.StatusOK, f.cacerts)
	case "/v3/clusters":
		f.serveClusters(w, r, caller)
	case "/v3/cloudcredentials":
		f.serveCloudCredentials(w, r)
	default:
		writeJSON(http.StatusNotFound, []byte(`{"type":"error","status":"404","code":"NotFound","message":"not found"}`))
	}
}
