package rancher

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testenv"
)

// restConfig is the package's kube-apiserver, which the fake's auth proxy
// and authorized cluster endpoints forward to.
var restConfig *rest.Config

func TestMain(m *testing.M) { testenv.Main(m, "../../..", &restConfig) }

// apiToken is the fake's API token in these tests.
const apiToken = "token-fake0:0123456789abcdef0123456789abcdef0123456789abcdef0123"

// newKubeRancher is a fake Rancher of the repository's fixtures whose
// proxy and endpoints forward to the package's kube-apiserver.
func newKubeRancher(t *testing.T) *Fake {
	t.Helper()
	f, err := New(filepath.Join("..", "..", "..", "testdata", "fixtures", "rancher"), apiToken)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	if err := f.SetKube(restConfig); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFakeRancherTokensProxyACE drives a fake Rancher of its own with
// plain HTTP, forwarding to the suite's kube-apiserver: tokens scoped to a
// cluster, the auth proxy, an authorized cluster endpoint, deletion,
// expiry and a disconnected agent, as the scenarios rely on them.
func TestFakeRancherTokensProxyACE(t *testing.T) {
	f := newKubeRancher(t)
	v, err := kubernetes.NewForConfigOrDie(restConfig).Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDriver{t: t, f: f, want: v.GitVersion, http: &http.Client{Timeout: 10 * time.Second},
		ace:   Cluster{ID: "c-m-fake0001", Name: "fake-ace", State: "active", ACE: true},
		other: Cluster{ID: "c-m-fake0002", Name: "fake-proxy", State: "active"}}
	f.Set(d.ace)
	f.Set(d.other)

	t.Run("the listing shows the authorized cluster endpoint", d.listing)
	t.Run("a token scoped to a cluster", d.scoped)
	t.Run("a deleted token is refused", d.deleted)
	t.Run("an expired token is refused", d.expiry)
	t.Run("a cluster-scoped token generates an unscoped kubeconfig", d.generateKubeconfig)
	t.Run("a disconnected agent", d.disconnected)
	t.Run("a removed cluster's endpoint stops", d.removed)
}

// fakeDriver holds what the steps of TestFakeRancherTokensProxyACE share.
type fakeDriver struct {
	t          *testing.T
	f          *Fake
	want       string // the kube-apiserver's gitVersion
	http       *http.Client
	ace, other Cluster
	aceURL     string
	aceClient  *http.Client // trusts the endpoint's CA only
	token      string       // scoped to ace
	tokenName  string
}

// call makes one request (bearer token unless "", JSON body unless nil)
// and returns the status and the body.
func (d *fakeDriver) call(c *http.Client, method, url, token string, body any) (int, []byte) {
	d.t.Helper()
	var in io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, in)
	if err != nil {
		d.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// expect checks a request's status, and for a 200 on /version that it is
// the kube-apiserver's.
func (d *fakeDriver) expect(c *http.Client, url, token string, want int) {
	d.t.Helper()
	code, body := d.call(c, http.MethodGet, url, token, nil)
	if code != want {
		d.t.Fatalf("GET %s: %d %s, want %d", url, code, body, want)
	}
	if want == http.StatusOK && strings.HasSuffix(url, "/version") {
		var v struct{ GitVersion string }
		if err := json.Unmarshal(body, &v); err != nil || v.GitVersion != d.want {
			d.t.Fatalf("GET %s: %s, want gitVersion %s", url, body, d.want)
		}
	}
}

func (d *fakeDriver) proxy(id string) string { return d.f.Server(id) + "/version" }

// create makes a token scoped to cluster with POST /v3/tokens.
func (d *fakeDriver) create(cluster string, ttl time.Duration) map[string]any {
	d.t.Helper()
	code, body := d.call(d.http, http.MethodPost, d.f.URL()+"/v3/tokens", apiToken,
		map[string]any{"type": "token", "clusterId": cluster, "ttl": ttl.Milliseconds(), "description": "e2e self-test"})
	var tok map[string]any
	if err := json.Unmarshal(body, &tok); code != http.StatusCreated || err != nil {
		d.t.Fatalf("POST /v3/tokens: %d %s, want 201", code, body)
	}
	return tok
}

func (d *fakeDriver) listing(t *testing.T) {
	code, body := d.call(d.http, http.MethodGet, d.f.URL()+"/v3/clusters", apiToken, nil)
	var col struct {
		Data []struct {
			ID   string
			LCAE struct {
				Enabled       bool
				FQDN, CACerts string
			} `json:"localClusterAuthEndpoint"`
		}
	}
	if err := json.Unmarshal(body, &col); code != http.StatusOK || err != nil || len(col.Data) != 2 {
		t.Fatalf("GET /v3/clusters: %d %s", code, body)
	}
	server, caPEM, err := d.f.ACE(d.ace.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range col.Data {
		switch {
		case c.ID == d.ace.ID && (!c.LCAE.Enabled || "https://"+c.LCAE.FQDN != server || c.LCAE.CACerts != string(caPEM)):
			t.Fatalf("ACE cluster's localClusterAuthEndpoint %+v, want enabled, %s and its CA", c.LCAE, server)
		case c.ID == d.other.ID && (c.LCAE.Enabled || c.LCAE.FQDN != ""):
			t.Fatalf("proxy cluster's localClusterAuthEndpoint %+v, want disabled", c.LCAE)
		}
	}
	pool := x509.NewCertPool()
	if !strings.HasPrefix(server, "https://127.0.0.1:") || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ACE %s with CA %q", server, caPEM)
	}
	d.aceURL = server + "/version"
	d.aceClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if _, err := d.http.Get(d.aceURL); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("ACE without its CA: %v, want a certificate error", err)
	}
	if code, body := d.call(d.http, http.MethodGet, d.f.URL()+"/v3/schemas", apiToken, nil); code != http.StatusOK ||
		!strings.Contains(string(body), `"id":"token"`) {
		t.Fatalf("GET /v3/schemas: %d, want the token schema", code)
	}
}

func (d *fakeDriver) scoped(t *testing.T) {
	before := time.Now()
	tok := d.create(d.ace.ID, time.Hour)
	d.token, _ = tok["token"].(string)
	d.tokenName, _ = tok["name"].(string)
	name, secret, _ := strings.Cut(d.token, ":")
	expires, err := time.Parse(time.RFC3339, tok["expiresAt"].(string))
	if !strings.HasPrefix(d.tokenName, "token-") || len(d.tokenName) != 11 || name != d.tokenName || len(secret) != 54 ||
		tok["clusterId"] != d.ace.ID || tok["ttl"] != float64(3600000) || tok["expired"] != false ||
		tok["userId"] != fakeUserID || tok["description"] != "e2e self-test" ||
		err != nil || expires.Before(before.Add(time.Hour-time.Second)) || expires.After(time.Now().Add(time.Hour)) {
		t.Fatalf("created token %v", tok)
	}
	if d.f.LiveTokens(d.ace.ID) != 1 || d.f.TokensCreated() != 1 {
		t.Fatalf("live %d, created %d, want 1 and 1", d.f.LiveTokens(d.ace.ID), d.f.TokensCreated())
	}
	otherTok := d.f.IssueToken(d.other.ID, 0)
	d.expect(d.http, d.proxy(d.ace.ID), d.token, http.StatusOK)
	d.expect(d.http, d.proxy(d.ace.ID), apiToken, http.StatusOK)
	d.expect(d.http, d.proxy(d.ace.ID), otherTok, http.StatusUnauthorized)
	d.expect(d.http, d.proxy(d.ace.ID), "", http.StatusUnauthorized)
	d.expect(d.http, d.proxy(d.other.ID), d.token, http.StatusUnauthorized)
	d.expect(d.http, d.proxy("c-m-unknown"), apiToken, http.StatusNotFound)
	for _, p := range []string{"/v3", "/v3/clusters", "/v3/tokens"} {
		d.expect(d.http, d.f.URL()+p, d.token, http.StatusUnauthorized)
	}
	d.expect(d.aceClient, d.aceURL, d.token, http.StatusOK)
	d.expect(d.aceClient, d.aceURL, apiToken, http.StatusUnauthorized)
	d.expect(d.aceClient, d.aceURL, otherTok, http.StatusUnauthorized)
	code, body := d.call(d.http, http.MethodGet, d.f.URL()+"/v3/tokens", apiToken, nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"name":"`+d.tokenName+`"`) ||
		strings.Contains(string(body), secret) || !strings.Contains(string(body), `"type":"collection"`) {
		t.Fatalf("GET /v3/tokens: %d %s, want the token listed without its secret", code, body)
	}
}

func (d *fakeDriver) deleted(t *testing.T) {
	url := d.f.URL() + "/v3/tokens/" + d.tokenName
	if code, body := d.call(d.http, http.MethodDelete, url, apiToken, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE %s: %d %s", url, code, body)
	}
	if code, _ := d.call(d.http, http.MethodDelete, url, apiToken, nil); code != http.StatusNotFound {
		t.Fatalf("DELETE %s again: %d, want 404", url, code)
	}
	d.expect(d.http, d.proxy(d.ace.ID), d.token, http.StatusUnauthorized)
	d.expect(d.aceClient, d.aceURL, d.token, http.StatusUnauthorized)
	if d.f.LiveTokens(d.ace.ID) != 0 || d.f.TokensDeleted() != 1 {
		t.Fatalf("live %d, deleted %d, want 0 and 1", d.f.LiveTokens(d.ace.ID), d.f.TokensDeleted())
	}
}

func (d *fakeDriver) expiry(t *testing.T) {
	tok := d.create(d.ace.ID, time.Minute)
	bearer, _ := tok["token"].(string)
	d.expect(d.http, d.proxy(d.ace.ID), bearer, http.StatusOK)
	d.expect(d.aceClient, d.aceURL, bearer, http.StatusOK)
	d.f.AdvanceClock(time.Minute + time.Second)
	d.expect(d.http, d.proxy(d.ace.ID), bearer, http.StatusUnauthorized)
	d.expect(d.aceClient, d.aceURL, bearer, http.StatusUnauthorized)
	code, body := d.call(d.http, http.MethodGet, d.f.URL()+"/v3/tokens/"+tok["name"].(string), apiToken, nil)
	var got map[string]any
	if err := json.Unmarshal(body, &got); code != http.StatusOK || err != nil || got["expired"] != true {
		t.Fatalf("GET the expired token: %d %s, want expired: true", code, body)
	}
	if d.f.LiveTokens(d.ace.ID) != 0 || d.f.TokensCreated() != 2 {
		t.Fatalf("live %d, created %d, want 0 and 2", d.f.LiveTokens(d.ace.ID), d.f.TokensCreated())
	}
}

// generateKubeconfig: what makes a scoped token worth stealing. With the
// endpoint off, a token scoped to a cluster gets from Rancher a kubeconfig
// whose token opens every cluster of its user; with the endpoint on, the
// kubeconfig's token stays scoped to that cluster.
func (d *fakeDriver) generateKubeconfig(t *testing.T) {
	kubeconfigToken := func(c Cluster) string {
		scoped := d.f.IssueToken(c.ID, time.Hour)
		code, body := d.call(d.http, http.MethodPost, d.f.URL()+"/v3/clusters/"+c.ID+"?action=generateKubeconfig", scoped, nil)
		var out struct{ Config string }
		if err := json.Unmarshal(body, &out); code != http.StatusOK || err != nil {
			t.Fatalf("generateKubeconfig of %s with a token scoped to it: %d %s, want 200", c.ID, code, body)
		}
		_, tok, ok := strings.Cut(out.Config, "token: ")
		if !ok {
			t.Fatalf("no token in the kubeconfig:\n%s", out.Config)
		}
		return strings.Trim(strings.TrimSpace(tok), `"`)
	}
	unscoped := kubeconfigToken(d.other)
	d.expect(d.http, d.f.URL()+"/v3/clusters", unscoped, http.StatusOK)
	d.expect(d.http, d.proxy(d.ace.ID), unscoped, http.StatusOK) // another cluster
	scoped := kubeconfigToken(d.ace)
	d.expect(d.http, d.f.URL()+"/v3/clusters", scoped, http.StatusUnauthorized)
	d.expect(d.http, d.proxy(d.other.ID), scoped, http.StatusUnauthorized)
}

func (d *fakeDriver) disconnected(t *testing.T) {
	const wait = 300 * time.Millisecond
	d.f.SetDisconnectWait(wait)
	bearer := d.f.IssueToken(d.ace.ID, 0) // synced to the endpoint while the agent is connected
	for _, c := range []Cluster{d.ace, d.other} {
		c.Disconnected = true
		d.f.Set(c)
	}
	unsynced := d.f.IssueToken(d.ace.ID, 0)
	d.expect(d.aceClient, d.aceURL, unsynced, http.StatusUnauthorized) // not synced: the agent is away
	start := time.Now()
	code, body := d.call(d.http, http.MethodGet, d.proxy(d.other.ID), apiToken, nil)
	if code != http.StatusInternalServerError || string(body) != "cluster agent disconnected" || time.Since(start) < wait {
		t.Fatalf("proxy to a disconnected cluster: %d %q after %s, want 500 after %s", code, body, time.Since(start), wait)
	}
	d.expect(d.http, d.proxy(d.ace.ID), bearer, http.StatusInternalServerError)
	d.expect(d.aceClient, d.aceURL, bearer, http.StatusOK) // bypasses the agent
	d.expect(d.http, d.proxy(d.other.ID), d.token, http.StatusUnauthorized)
	d.f.Set(d.ace) // the agent is back: it syncs the token
	d.expect(d.aceClient, d.aceURL, unsynced, http.StatusOK)
}

func (d *fakeDriver) removed(t *testing.T) {
	d.f.Remove(d.ace.ID)
	if _, err := d.aceClient.Get(d.aceURL); err == nil {
		t.Fatalf("GET %s after the cluster left: no error", d.aceURL)
	}
	if _, _, err := d.f.ACE(d.ace.ID); err == nil {
		t.Fatal("ACE of a removed cluster: no error")
	}
}

// TestClusterPages: /v3/clusters pages as norman does: limit clusters
// from the marker on, an absolute next link that carries the query and
// the next id, partial while more follow; every cluster once.
func TestClusterPages(t *testing.T) {
	f := newTestRancher(t)
	for _, id := range []string{"c-3", "c-1", "c-2"} {
		f.Set(Cluster{ID: id, Name: "n" + id, State: "active"})
	}
	d := &fakeDriver{t: t, f: f, http: &http.Client{Timeout: 10 * time.Second}}
	var ids []string
	link := f.URL() + "/v3/clusters?limit=2&state=active"
	for pages := 0; link != ""; pages++ {
		if pages == 3 {
			t.Fatal("the pages do not end")
		}
		code, body := d.call(d.http, http.MethodGet, link, apiToken, nil)
		var col struct {
			Pagination struct {
				Next    string `json:"next"`
				Partial bool   `json:"partial"`
				Total   int    `json:"total"`
			} `json:"pagination"`
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &col) != nil {
			t.Fatalf("GET %s: %d %s", link, code, body)
		}
		for _, c := range col.Data {
			ids = append(ids, c.ID)
		}
		if col.Pagination.Total != 3 || col.Pagination.Partial != (col.Pagination.Next != "") {
			t.Errorf("pagination %+v", col.Pagination)
		}
		if n := col.Pagination.Next; n != "" && !strings.Contains(n, "state=active") {
			t.Errorf("next link %s lost the filter", n)
		}
		link = col.Pagination.Next
	}
	if strings.Join(ids, ",") != "c-1,c-2,c-3" {
		t.Errorf("listed %v, want c-1,c-2,c-3 once each", ids)
	}
	if f.Served() != 2 {
		t.Errorf("%d pages served, want 2", f.Served())
	}
}
