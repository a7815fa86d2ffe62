package rancher

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rancher/norman/clientbase"
	"github.com/rancher/norman/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// newTestRancher is a fake Rancher of the repository's fixtures, without
// a kube-apiserver behind its proxy.
func newTestRancher(t *testing.T, opts ...Option) *Fake {
	t.Helper()
	f, err := New(filepath.Join("..", "..", "..", "testdata", "fixtures", "rancher"), apiToken, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// normanToken is a token as norman's clientbase decodes it.
type normanToken struct {
	types.Resource
	Name      string `json:"name"`
	Token     string `json:"token"`
	ClusterID string `json:"clusterId"`
	Current   bool   `json:"current"`
	IsDerived bool   `json:"isDerived"`
	Expired   bool   `json:"expired"`
	TTL       int64  `json:"ttl"`
	CreatedTS int64  `json:"createdTS"`
}

type normanTokens struct {
	types.Collection
	Data []normanToken `json:"data"`
}

// TestTokensThroughNorman drives the options a unit test of the token
// manager relies on through norman's own client: tokens named by
// WithTokenNames, on the WithClock clock, listed in pages of
// SetTokenPageSize that norman follows, the login API token current and
// not deletable with itself, deletions through the API and behind its
// back, and AddToken.
func TestTokensThroughNorman(t *testing.T) {
	start := time.Date(2026, 8, 21, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	f := newTestRancher(t, WithClock(clk), WithLoginAPIToken(), WithTokenNames(func(n int) (string, string) {
		return fmt.Sprintf("token-%05d", n), fmt.Sprintf("mark%050d", n)
	}))
	c, err := clientbase.NewAPIClient(&clientbase.ClientOpts{URL: f.URL() + "/v3", TokenKey: apiToken, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i, cluster := range []string{"c-a", "c-b", "c-a"} {
		var tok normanToken
		if err := c.Create("token", map[string]any{"type": "token", "clusterId": cluster, "ttl": time.Hour.Milliseconds()}, &tok); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("token-%05d", i+1)
		if tok.Name != name || tok.Token != fmt.Sprintf("%s:mark%050d", name, i+1) || tok.ClusterID != cluster ||
			tok.CreatedTS != start.UnixMilli() || !tok.IsDerived || tok.Current {
			t.Fatalf("created %+v, want %s on the fake clock", tok, name)
		}
	}
	added := f.AddToken(Token{Name: "token-added", ClusterID: "c-a", Description: "an earlier run's", TTL: 3 * time.Hour,
		Created: start.Add(-time.Hour)})
	if !strings.HasPrefix(added, "token-added:") || len(added) != len("token-added:")+54 {
		t.Fatalf("AddToken: %q, want token-added with a secret of 54", added)
	}
	if n := f.AddToken(Token{ClusterID: "c-b"}); !strings.HasPrefix(n, "token-00004:mark") {
		t.Fatalf("AddToken without a name: %q, want the next name", n)
	}
	f.SetTokenPageSize(2)
	clk.Step(time.Hour) // the three created expire; the added one has an hour left

	got := listThroughNorman(t, c)
	if len(got) != 6 || strings.Join(f.TokenNames(), ",") != "token-00001,token-00002,token-00003,token-00004,token-added,token-fake0" {
		t.Fatalf("listed %d, stored %v, want six tokens", len(got), f.TokenNames())
	}
	if api := got["token-fake0"]; !api.Current || api.IsDerived || api.Expired {
		t.Fatalf("the login API token listed %+v, want current, not derived", api)
	}
	if !got["token-00001"].Expired || got["token-added"].Expired || got["token-added"].Current {
		t.Fatalf("expiry by the fake clock: %+v and %+v", got["token-00001"], got["token-added"])
	}

	api := got["token-fake0"]
	var apiErr *clientbase.APIError
	if err := c.Delete(&api.Resource); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest ||
		!strings.Contains(apiErr.Body, "Cannot delete token for current session") {
		t.Fatalf("deleting the login token with itself: %v, want 400", err)
	}
	one := got["token-00001"]
	if err := c.Delete(&one.Resource); err != nil {
		t.Fatal(err)
	}
	if !f.DeleteToken("token-00002") || f.DeleteToken("token-00002") {
		t.Fatal("DeleteToken: want true once, then false")
	}
	if d := f.DeletedTokens(); len(d) != 1 || d[0] != "token-00001" || f.TokensDeleted() != 1 {
		t.Fatalf("deleted through the API %v (%d), want token-00001 only", d, f.TokensDeleted())
	}
	if got := listThroughNorman(t, c); len(got) != 4 {
		t.Fatalf("listed %d after two deletions, want 4", len(got))
	}
	if f.TokensCreated() != 3 {
		t.Fatalf("%d created through the API, want 3 (AddToken is not counted)", f.TokensCreated())
	}
}

// TestAPITokenAndLinks: the API token rotates (SetAPIToken), an API key
// (the default) is neither current nor kept from deleting itself, and
// SetLinkBase moves the pagination links to another host, the query kept.
func TestAPITokenAndLinks(t *testing.T) {
	f := newTestRancher(t)
	d := &fakeDriver{t: t, f: f, http: &http.Client{Timeout: 10 * time.Second}}
	const rotated = "token-rot01:rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr"
	f.SetAPIToken(rotated)
	d.expect(d.http, f.URL()+"/v3/tokens", apiToken, http.StatusUnauthorized)
	d.expect(d.http, f.URL()+"/v3/tokens", rotated, http.StatusOK)
	f.SetAPIToken("")
	d.expect(d.http, f.URL()+"/v3/tokens", rotated, http.StatusUnauthorized)
	f.SetAPIToken(apiToken)
	d.expect(d.http, f.URL()+"/v3/tokens", apiToken, http.StatusOK)
	if names := f.TokenNames(); len(names) != 1 || names[0] != "token-fake0" {
		t.Fatalf("tokens %v, want the API token alone", names)
	}

	for i := range 3 {
		f.IssueToken(fmt.Sprintf("c-%d", i), 0)
	}
	f.SetTokenPageSize(2)
	f.SetLinkBase("https://rancher.example.com/")
	code, body := d.call(d.http, http.MethodGet, f.URL()+"/v3/tokens?foo=bar", apiToken, nil)
	var col struct {
		Links      map[string]string `json:"links"`
		Pagination struct {
			Next    string `json:"next"`
			Partial bool   `json:"partial"`
			Total   int    `json:"total"`
		} `json:"pagination"`
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &col); code != http.StatusOK || err != nil {
		t.Fatalf("GET /v3/tokens: %d %s", code, body)
	}
	next, err := url.Parse(col.Pagination.Next)
	if err != nil || next.Host != "rancher.example.com" || next.Path != "/v3/tokens" || next.Query().Get("foo") != "bar" ||
		next.Query().Get("limit") != "2" || next.Query().Get("marker") == "" || !col.Pagination.Partial ||
		col.Pagination.Total != 4 || len(col.Data) != 2 || col.Links["self"] != "https://rancher.example.com/v3/tokens" {
		t.Fatalf("page 1: links %v, pagination %+v, %d tokens", col.Links, col.Pagination, len(col.Data))
	}
	listed := col.Data
	next.Scheme, next.Host = "http", strings.TrimPrefix(f.URL(), "http://") // on the fake's origin
	code, body = d.call(d.http, http.MethodGet, next.String(), apiToken, nil)
	col.Data, col.Pagination.Next, col.Pagination.Partial = nil, "", false
	if err := json.Unmarshal(body, &col); code != http.StatusOK || err != nil || len(col.Data) != 2 ||
		col.Pagination.Next != "" || col.Pagination.Partial {
		t.Fatalf("page 2: %d %s", code, body)
	}
	if listed = append(listed, col.Data...); listed[1]["name"] == listed[2]["name"] {
		t.Fatalf("%v listed twice", listed[1]["name"])
	}
	found := false
	for _, tk := range listed {
		if tk["name"] == "token-fake0" {
			if found = true; tk["current"] != false || tk["isDerived"] != true {
				t.Fatalf("the API key listed %v, want derived, not current", tk)
			}
		}
	}
	if !found {
		t.Fatal("the API key is not listed")
	}
	f.Set(Cluster{ID: "c-1", Name: "one", State: "active"})
	f.Set(Cluster{ID: "c-2", Name: "two", State: "active"})
	code, body = d.call(d.http, http.MethodGet, f.URL()+"/v3/clusters?limit=1", apiToken, nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"next":"https://rancher.example.com/v3/clusters?limit=1\u0026marker=c-2"`) {
		t.Fatalf("GET /v3/clusters: %d %s, want the next link on the link base", code, body)
	}
	if code, body := d.call(d.http, http.MethodDelete, f.URL()+"/v3/tokens/token-fake0", apiToken, nil); code != http.StatusNoContent {
		t.Fatalf("an API key deleting itself: %d %s, want 204", code, body)
	}
	d.expect(d.http, f.URL()+"/v3/tokens", apiToken, http.StatusUnauthorized)
}

// TestRecordingInterceptAndMintDelay: WithRecording keeps every request,
// body and Authorization header included; Intercept answers in the fake's
// place or lets it answer (a token made, its answer lost); SetMintDelay
// holds the answer to a token creation, the token made and the fake free
// to serve meanwhile.
func TestRecordingInterceptAndMintDelay(t *testing.T) {
	f := newTestRancher(t, WithRecording())
	d := &fakeDriver{t: t, f: f, http: &http.Client{Timeout: 10 * time.Second}}
	tok := d.create("c-a", time.Hour)
	d.expect(d.http, f.URL()+"/v3/clusters?state=active", apiToken, http.StatusOK)
	reqs := f.Requests()
	if len(reqs) != 2 || reqs[0].Method != http.MethodPost || reqs[0].Path != "/v3/tokens" ||
		reqs[0].Authorization != "Bearer "+apiToken || !strings.Contains(string(reqs[0].Body), `"clusterId":"c-a"`) ||
		reqs[1].Method != http.MethodGet || reqs[1].Path != "/v3/clusters" || reqs[1].RawQuery != "state=active" || reqs[1].Body != nil {
		t.Fatalf("recorded %+v", reqs)
	}

	f.Intercept(func(w http.ResponseWriter, r *http.Request, fake http.Handler) bool {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v3/clusters":
			w.WriteHeader(http.StatusTeapot)
			return true
		case r.Method == http.MethodPost:
			fake.ServeHTTP(httptest.NewRecorder(), r) // made, and the answer lost
			w.WriteHeader(http.StatusBadGateway)
			return true
		}
		return false
	})
	d.expect(d.http, f.URL()+"/v3/clusters", "", http.StatusTeapot) // before authentication
	d.expect(d.http, f.URL()+"/v3/tokens", apiToken, http.StatusOK)
	if code, _ := d.call(d.http, http.MethodPost, f.URL()+"/v3/tokens", apiToken, map[string]any{"clusterId": "c-b"}); code != http.StatusBadGateway ||
		f.TokensCreatedFor("c-b") != 1 {
		t.Fatalf("a lost answer: %d, %d created for c-b; want 502 and 1", code, f.TokensCreatedFor("c-b"))
	}
	f.Intercept(nil)
	d.expect(d.http, f.URL()+"/v3/clusters", "", http.StatusUnauthorized)
	if n := len(f.Requests()); n != 6 {
		t.Fatalf("%d requests recorded, want 6 (the intercepted ones included)", n)
	}

	const delay = 1500 * time.Millisecond
	f.SetMintDelay(delay)
	done := make(chan struct{})
	begin := time.Now()
	go func() {
		defer close(done)
		if code, body := d.call(d.http, http.MethodPost, f.URL()+"/v3/tokens", apiToken, map[string]any{"clusterId": "c-c"}); code != http.StatusCreated {
			t.Errorf("POST with a delay: %d %s", code, body)
		}
	}()
	for f.TokensCreatedFor("c-c") == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	d.expect(d.http, f.URL()+"/v3/tokens/"+tok["name"].(string), apiToken, http.StatusOK) // not held up
	select {
	case <-done:
		t.Fatalf("the creation answered after %s, before its delay", time.Since(begin))
	default:
	}
	<-done
	if took := time.Since(begin); took < delay {
		t.Fatalf("the creation answered after %s, want %s", took, delay)
	}
}

// listThroughNorman lists the tokens with norman's client, following its
// pages (two tokens each), and returns them by name.
func listThroughNorman(t *testing.T, c clientbase.APIBaseClient) map[string]normanToken {
	t.Helper()
	var col normanTokens
	pages, got, next := 0, map[string]normanToken{}, ""
	err := c.List("token", &types.ListOpts{Filters: map[string]any{"limit": 1000}}, &col)
	for ; err == nil; err = c.Ops.DoNext(next, &col) {
		pages++
		for _, tk := range col.Data {
			if _, dup := got[tk.Name]; dup {
				t.Fatalf("%s listed twice", tk.Name)
			}
			got[tk.Name] = tk
		}
		if col.Pagination.Limit == nil || *col.Pagination.Limit != 2 || col.Pagination.Partial != (col.Pagination.Next != "") {
			t.Fatalf("pagination %+v, want limit 2 (the page size caps limit=1000), partial while more follow", col.Pagination)
		}
		if next = col.Pagination.Next; next == "" {
			break
		}
		col = normanTokens{}
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := (len(got) + 1) / 2; pages != want {
		t.Fatalf("%d pages of %d tokens, want %d", pages, len(got), want)
	}
	return got
}
