package rancher

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The fake's clusters, one model for all: a cluster is what a test says of
// it (Cluster's fields, rendered on the single-cluster fixture at each
// listing) or a raw object it put as JSON (rawclusters.go), listed as it
// is. Both live in Fake.clusters by id, filtered and paged alike.

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

	// raw is the object of a cluster put as JSON (PutRaw, Edit, Generate,
	// PutFixtureClusters), compact, listed as it is; nil for a cluster
	// rendered from the fields above. ID, Name and State are then its
	// own, internal its internal field.
	raw      []byte
	internal bool
}

// Condition is one of a cluster's status.conditions, as /v3 shows
// them (flattened to the top level).
type Condition struct {
	Type, Status, Reason, Message string
}

// SetConditions sets conditions in a cluster object (for PutObject or
// Edit) as Cluster.Conditions sets them in the fixture's: each replaces the
// object's condition of its type (an empty Status removes it), and a type
// the object lacks is appended.
func SetConditions(obj map[string]any, set ...Condition) {
	obj["conditions"] = withConditions(obj["conditions"], set)
}

// serveClusters answers GET /v3/clusters: the recorded pages
// (ServeFixturePages), else the clusters' collection. Called with f.mu
// held.
func (f *Fake) serveClusters(w http.ResponseWriter, r *http.Request, caller *fakeToken) {
	var b []byte
	if f.fixturePages {
		recorded, ok := f.pages[r.URL.Query().Get("marker")]
		if !ok {
			writeAPIError(w, http.StatusNotFound, "NotFound", "not found")
			return
		}
		b = f.onLinkBase(recorded)
	} else {
		var err error
		if b, err = f.collection(r, caller); err != nil {
			writeRancher(w, http.StatusInternalServerError, []byte(`{"type":"error","status":"500","message":"fake: `+err.Error()+`"}`))
			return
		}
	}
	f.served++
	writeRancher(w, http.StatusOK, b)
}

// listed returns the ids of the clusters that the query's state and
// internal filters keep, sorted as norman sorts them. Called with f.mu
// held.
func (f *Fake) listed(q url.Values) []string {
	ids := make([]string, 0, len(f.clusters))
	for id, c := range f.clusters {
		if s := q.Get("state"); s != "" && s != c.State {
			continue
		}
		if v := q.Get("internal"); v != "" && v != strconv.FormatBool(c.internal) {
			continue // a cluster a test describes is never Rancher's own
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// collection renders the page of the listed clusters a request asks for,
// paged as norman pages them (paging.go). Called with f.mu held.
func (f *Fake) collection(r *http.Request, caller *fakeToken) ([]byte, error) {
	q := r.URL.Query()
	ids := slices.DeleteFunc(f.listed(q), func(id string) bool { return !f.sees(caller, id) })
	p := pageOf(ids, q, defaultLimit, maxLimit, f.links()+"/v3/clusters")
	data := make([][]byte, 0, p.end-p.start)
	for _, id := range ids[p.start:p.end] {
		b, err := f.clusterJSON(f.clusters[id])
		if err != nil {
			return nil, err
		}
		data = append(data, b)
	}
	return collectionJSON("cluster", f.links()+"/v3/clusters", p.pagination, data), nil
}

// clusterJSON is the cluster's object as listed. Called with f.mu held.
func (f *Fake) clusterJSON(c Cluster) ([]byte, error) {
	if c.raw != nil {
		return c.raw, nil
	}
	obj, err := f.render(c)
	if err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// render is a cluster a test describes on the single-cluster fixture: its
// id, name, state, transitioning, conditions, labels and authorized
// cluster endpoint. Called with f.mu held.
func (f *Fake) render(c Cluster) (map[string]any, error) {
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
	return obj, nil
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
