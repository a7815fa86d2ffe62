package rancher

import (
	"encoding/pem"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rancher/norman/clientbase"
	"github.com/rancher/norman/types"
)

// TestLinkBaseThroughNorman: with a link base, every link norman follows
// is on it (here the fake under another name, localhost): X-Api-Schemas,
// the schemas' collection links, the next links of the clusters, the
// recorded pages and the cloud credentials.
func TestLinkBaseThroughNorman(t *testing.T) {
	f := newTestRancher(t)
	u, _ := url.Parse(f.URL())
	other := "http://localhost:" + u.Port()
	f.SetLinkBase(other + "/")
	f.Generate(3)
	f.PutCloudCredentials(CloudCredential{ID: "cattle-global-data:cc-a", Driver: "azure"},
		CloudCredential{ID: "cattle-global-data:cc-b", Driver: "azure"})
	requests := make(chan string, 100)
	f.Intercept(func(_ http.ResponseWriter, r *http.Request, _ http.Handler) bool {
		requests <- r.Method + " " + r.Host + r.URL.Path
		return false
	})
	c := newNormanClient(t, f, "")
	if got, pages, err := listClusters(t, c, map[string]any{"limit": 2}); err != nil || len(got) != 3 || pages != 2 {
		t.Fatalf("listed %d clusters in %d pages: %v", len(got), pages, err)
	}
	f.ServeFixturePages(true)
	if got, pages, err := listClusters(t, c, nil); err != nil || len(got) != 4 || pages != 2 {
		t.Fatalf("recorded pages: %d clusters in %d pages: %v", len(got), pages, err)
	}
	var creds normanCredentials
	if err := c.Ops.DoGet(f.URL()+"/v3/cloudcredentials", &types.ListOpts{Filters: map[string]any{"limit": 1}}, &creds); err != nil {
		t.Fatal(err)
	}
	if err := c.Ops.DoNext(creds.Pagination.Next, &creds); err != nil || len(creds.Data) != 1 || creds.Data[0].ID != "cattle-global-data:cc-b" {
		t.Fatalf("cloud credentials page 2: %+v (%v)", creds.Data, err)
	}
	f.Intercept(nil)
	close(requests)
	var hosts []string
	for h := range requests {
		hosts = append(hosts, h)
	}
	want := []string{"/v3", "/v3/schemas", "/v3/clusters", "/v3/clusters", "/v3/clusters", "/v3/clusters",
		"/v3/cloudcredentials", "/v3/cloudcredentials"}
	asked := map[int]bool{0: true, 6: true} // on the URL the test gives; the others on the links
	if len(hosts) != len(want) {
		t.Fatalf("requests %v, want %d", hosts, len(want))
	}
	for i, h := range hosts {
		host := strings.TrimPrefix(other, "http://")
		if asked[i] {
			host = u.Host
		}
		if h != "GET "+host+want[i] {
			t.Errorf("request %d: %s, want GET %s%s", i, h, host, want[i])
		}
	}
}

type normanCredentials struct {
	types.Collection
	Data []struct {
		types.Resource
		Name  string         `json:"name"`
		Azure map[string]any `json:"azurecredentialConfig"`
		EC2   map[string]any `json:"amazonec2credentialConfig"`
	} `json:"data"`
}

// TestTLSCACertsAndCloudCredentials: WithTLS serves over HTTPS, trusted
// by Client and by norman with Certificate's PEM, not by a client of its
// own; the cacerts setting is the fixture's until SetCACerts; the cloud
// credentials are listed in Rancher's shape, secrets never.
func TestTLSCACertsAndCloudCredentials(t *testing.T) {
	f := newTestRancher(t, WithTLS())
	if !strings.HasPrefix(f.URL(), "https://") || f.Certificate() == nil {
		t.Fatalf("WithTLS: %s, certificate %v", f.URL(), f.Certificate())
	}
	if _, err := (&http.Client{Timeout: 10 * time.Second}).Get(f.URL() + "/v3"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an untrusting client: %v, want a certificate error", err)
	}
	if resp, err := f.Client().Get(f.URL() + "/v3/settings/cacerts"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("Client: %v", err)
	} else {
		_ = resp.Body.Close()
	}
	c := newNormanClient(t, f, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw})))
	var setting struct {
		types.Resource
		Value string `json:"value"`
	}
	if err := c.Ops.DoGet(f.URL()+"/v3/settings/cacerts", nil, &setting); err != nil || setting.ID != "cacerts" ||
		!strings.HasPrefix(setting.Value, "-----BEGIN CERTIFICATE-----") || setting.Value != f.CACerts() {
		t.Fatalf("cacerts: %+v (%v), want the fixture's PEM", setting, err)
	}
	f.SetCACerts("")
	if err := c.Ops.DoGet(f.URL()+"/v3/settings/cacerts", nil, &setting); err != nil || setting.Value != "" || f.CACerts() != "" {
		t.Fatalf("cacerts after SetCACerts(\"\"): %q (%v)", setting.Value, err)
	}

	f.PutCloudCredentials(CloudCredential{ID: "cattle-global-data:cc-q7t2w", Name: "azure-payments", Driver: "azure",
		SubscriptionID: "0b1f6471-1bf0-4dda-aec3-cb9272f09590"},
		CloudCredential{ID: "cattle-global-data:cc-9vb2x", Name: "aws-prod", Driver: "amazonec2"})
	var creds normanCredentials
	if err := c.Ops.DoGet(f.URL()+"/v3/cloudcredentials", &types.ListOpts{Filters: map[string]any{"limit": 1}}, &creds); err != nil ||
		len(creds.Data) != 1 || creds.Data[0].ID != "cattle-global-data:cc-9vb2x" || creds.Data[0].EC2["accessKey"] == nil ||
		creds.Data[0].EC2["secretKey"] != nil || !creds.Pagination.Partial {
		t.Fatalf("cloud credentials page 1: %+v (%v)", creds, err)
	}
	if err := c.Ops.DoNext(creds.Pagination.Next, &creds); err != nil || len(creds.Data) != 1 ||
		creds.Data[0].Azure["subscriptionId"] != "0b1f6471-1bf0-4dda-aec3-cb9272f09590" ||
		creds.Data[0].Azure["clientSecret"] != nil || creds.Data[0].Name != "azure-payments" {
		t.Fatalf("cloud credentials page 2: %+v (%v)", creds.Data, err)
	}
}

// TestAnswerAndTakeRequests: a canned answer stands for path before
// authentication, without X-Api-Schemas, until removed; TakeRequests
// returns the requests and forgets them.
func TestAnswerAndTakeRequests(t *testing.T) {
	f := newTestRancher(t, WithRecording())
	d := &fakeDriver{t: t, f: f, http: &http.Client{Timeout: 10 * time.Second}}
	f.Answer("/v3", http.StatusOK, "{}")
	resp, err := d.http.Get(f.URL() + "/v3")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Api-Schemas") != "" {
		t.Fatalf("canned /v3: %d, X-Api-Schemas %q", resp.StatusCode, resp.Header.Get("X-Api-Schemas"))
	}
	if _, err := clientbase.NewAPIClient(&clientbase.ClientOpts{URL: f.URL() + "/v3", TokenKey: apiToken}); err == nil ||
		!strings.Contains(err.Error(), "Failed to find schema") {
		t.Fatalf("norman on a canned /v3: %v, want no schemas", err)
	}
	f.Answer("/v3/schemas", http.StatusTooManyRequests, "{}")
	d.expect(d.http, f.URL()+"/v3/schemas", apiToken, http.StatusTooManyRequests)
	f.Answer("/v3", 0, "")
	d.expect(d.http, f.URL()+"/v3", "", http.StatusUnauthorized)
	if reqs := f.TakeRequests(); len(reqs) != 4 || reqs[3].Path != "/v3" || reqs[3].Authorization != "" {
		t.Fatalf("taken %+v, want 4 requests", reqs)
	}
	if reqs := f.Requests(); len(reqs) != 0 {
		t.Fatalf("after TakeRequests: %+v, want none", reqs)
	}
	d.expect(d.http, f.URL()+"/v3/settings/cacerts", "", http.StatusOK)
	if reqs := f.TakeRequests(); len(reqs) != 1 || reqs[0].Path != "/v3/settings/cacerts" {
		t.Fatalf("taken %+v, want the cacerts request alone", reqs)
	}
	var apiErr *clientbase.APIError
	if _, err := clientbase.NewAPIClient(&clientbase.ClientOpts{URL: f.URL() + "/v3", TokenKey: apiToken}); !errors.As(err, &apiErr) ||
		apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("norman with the schemas canned: %v, want 429", err)
	}
}
