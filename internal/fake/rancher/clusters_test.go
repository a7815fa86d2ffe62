package rancher

import (
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rancher/norman/clientbase"
	"github.com/rancher/norman/types"
)

// normanCluster is a cluster as a client decodes it through norman.
type normanCluster struct {
	types.Resource
	Name       string            `json:"name"`
	State      string            `json:"state"`
	Internal   bool              `json:"internal"`
	Labels     map[string]string `json:"labels"`
	Driver     string            `json:"driver"`
	Conditions []struct {
		Type, Status string
	} `json:"conditions"`
}

type normanClusters struct {
	types.Collection
	Data []normanCluster `json:"data"`
}

// newNormanClient is norman's client of f with the API token.
func newNormanClient(t *testing.T, f *Fake, caPEM string) clientbase.APIBaseClient {
	t.Helper()
	c, err := clientbase.NewAPIClient(&clientbase.ClientOpts{URL: f.URL() + "/v3", TokenKey: apiToken, CACerts: caPEM,
		Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// listClusters lists the clusters through norman with filters, following
// every next link, and returns them by id and the number of pages.
func listClusters(t *testing.T, c clientbase.APIBaseClient, filters map[string]any) (map[string]normanCluster, int, error) {
	t.Helper()
	var col normanClusters
	got, pages, next := map[string]normanCluster{}, 0, ""
	err := c.List("cluster", &types.ListOpts{Filters: filters}, &col)
	for ; err == nil; err = c.Ops.DoNext(next, &col) {
		if pages++; pages > 20 {
			t.Fatal("the pages do not end")
		}
		for _, x := range col.Data {
			if _, dup := got[x.ID]; dup {
				t.Fatalf("%s listed twice", x.ID)
			}
			got[x.ID] = x
		}
		if col.Pagination == nil || col.Pagination.Next != "" && !col.Pagination.Partial {
			t.Fatalf("pagination %+v, want partial while more follow", col.Pagination)
		}
		if next = col.Pagination.Next; next == "" {
			return got, pages, nil
		}
		col = normanClusters{}
	}
	return got, pages, err
}

// TestRawClustersThroughNorman: raw cluster objects (the recorded pages'
// clusters, generated ones, one put by hand, edited copies) and a cluster
// a test describes are one collection, filtered by state and internal and
// paged as norman pages, each object listed as it was put.
func TestRawClustersThroughNorman(t *testing.T) {
	f := newTestRancher(t)
	f.Set(Cluster{ID: "c-m-typed001", Name: "typed", State: "active", Labels: map[string]string{"team": "a"}})
	f.PutFixtureClusters()
	f.Generate(3)
	if err := f.PutRaw([]byte(`{"id": "c-hand1", "name": "hand", "state": "provisioning", "driver": "imported"}`)); err != nil {
		t.Fatal(err)
	}
	err := f.Edit(fixtureID, func(o map[string]any) {
		o["id"], o["name"], o["state"] = "c-m-copy", "copy", "updating"
		SetConditions(o, Condition{Type: "Connected", Status: "False"}, Condition{Type: "Waiting"},
			Condition{Type: "Hibernated", Status: "True"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Edit("c-m-typed001", func(o map[string]any) { o["labels"] = map[string]any{"team": "b"} }); err != nil {
		t.Fatal(err)
	}
	c := newNormanClient(t, f, "")
	got, pages, err := listClusters(t, c, map[string]any{"limit": 3, "internal": false})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"c-5tbxq", "c-7qgnz", "c-hand1", "c-m-00000000", "c-m-00000001", "c-m-00000002",
		"c-m-2x7kqz4b", "c-m-copy", "c-m-typed001"}
	if ids := slices.Sorted(maps.Keys(got)); !slices.Equal(ids, want) || pages != 3 {
		t.Fatalf("listed %v in %d pages, want %v in 3", ids, pages, want)
	}
	if x := got["c-hand1"]; x.Name != "hand" || x.State != "provisioning" || x.Driver != "imported" || x.Labels != nil {
		t.Fatalf("the object put by hand listed %+v, want it as put", x)
	}
	if x := got["c-m-00000002"]; x.Name != "cluster-00000002" || x.State != "active" || len(x.Conditions) != 19 {
		t.Fatalf("a generated cluster listed %+v, want the fixture renamed", x)
	}
	if x := got["c-m-typed001"]; x.Labels["team"] != "b" || x.Name != "typed" {
		t.Fatalf("the edited described cluster listed %+v", x)
	}
	conds := map[string]string{}
	for _, cond := range got["c-m-copy"].Conditions {
		conds[cond.Type] = cond.Status
	}
	if _, waiting := conds["Waiting"]; waiting || conds["Connected"] != "False" || conds["Hibernated"] != "True" ||
		conds["Ready"] != "True" || got[fixtureID].State != "active" {
		t.Fatalf("edited copy's conditions %v, original %+v", conds, got[fixtureID])
	}
	checkFilters(t, f, c)
}

// checkFilters checks the state and internal filters, Remove and the
// errors of the raw clusters' methods.
func checkFilters(t *testing.T, f *Fake, c clientbase.APIBaseClient) {
	t.Helper()
	for _, tc := range []struct {
		filters map[string]any
		want    string
	}{
		{map[string]any{"state": "updating"}, "c-m-copy"},
		{map[string]any{"internal": true}, "local"},
		{map[string]any{"state": "unavailable", "internal": false}, "c-5tbxq"},
	} {
		got, _, err := listClusters(t, c, tc.filters)
		if ids := strings.Join(slices.Sorted(maps.Keys(got)), ","); err != nil || ids != tc.want {
			t.Fatalf("filters %v: %s (%v), want %s", tc.filters, ids, err, tc.want)
		}
	}
	f.Remove("c-hand1")
	if _, err := f.ClusterObject("c-hand1"); err == nil {
		t.Fatal("ClusterObject of a removed cluster: no error")
	}
	for name, err := range map[string]error{
		"not JSON":       f.PutRaw([]byte(`{"id":`)),
		"no id":          f.PutRaw([]byte(`{"name":"x"}`)),
		"unknown id":     f.Edit("c-none", func(map[string]any) {}),
		"id taken away":  f.Edit("c-7qgnz", func(o map[string]any) { delete(o, "id") }),
		"internal a str": f.PutRaw([]byte(`{"id":"c-x","internal":"yes"}`)),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestFixturePagesAndPageHook: the recorded pages are served as they are
// (two clusters, then two more with local among them whatever the
// filters), norman following their next link; the page hook sees each page
// of an authenticated listing with its number and may answer it.
func TestFixturePagesAndPageHook(t *testing.T) {
	f := newTestRancher(t)
	f.Generate(5)
	f.ServeFixturePages(true)
	c := newNormanClient(t, f, "")
	var mu sync.Mutex
	var seen []int
	f.InterceptPages(func(w http.ResponseWriter, _ *http.Request, page int) bool {
		mu.Lock()
		defer mu.Unlock()
		if seen = append(seen, page); page == 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	got, pages, err := listClusters(t, c, map[string]any{"limit": 1000, "internal": false})
	ids := strings.Join(slices.Sorted(maps.Keys(got)), ",")
	if err != nil || pages != 2 || ids != "c-5tbxq,c-7qgnz,c-m-2x7kqz4b,local" || !got["local"].Internal || f.Served() != 2 {
		t.Fatalf("recorded pages: %s in %d pages (%v), served %d", ids, pages, err, f.Served())
	}
	var col normanClusters
	var apiErr *clientbase.APIError
	if err := c.Ops.DoGet(f.URL()+"/v3/clusters?marker=c-other", nil, &col); !errors.As(err, &apiErr) ||
		apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("a marker of no recorded page: %v, want 404", err)
	}

	f.ServeFixturePages(false)
	d := &fakeDriver{t: t, f: f, http: &http.Client{Timeout: 10 * time.Second}}
	d.expect(d.http, f.URL()+"/v3/clusters", "", http.StatusUnauthorized) // not the hook's
	_, _, err = listClusters(t, c, map[string]any{"limit": 2})
	mu.Lock()
	defer mu.Unlock()
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable ||
		!slices.Equal(seen, []int{1, 2, 2, 1, 2, 3}) {
		t.Fatalf("the hook saw pages %v, the listing ended with %v; want 1 2 2 1 2 3 and its 503", seen, err)
	}
}
