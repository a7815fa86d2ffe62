package rancher

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Raw clusters: objects a test puts as JSON, hand-edited or taken from the
// recorded pages, for the unit tests that map what Rancher lists (a hosted
// EKS or AKS cluster, a state and conditions of their own, an owner's
// authorized endpoint). They are clusters of the fake like the others
// (clusters.go): listed, filtered and paged alike, known to the proxy as
// connected clusters, without an authorized endpoint listener (an
// endpoint the object names is the object's word only).

// recordedPage2Marker is the marker of the second recorded page
// (rancher-clusters-page1.json's next link).
const recordedPage2Marker = "c-m-2x7kqz4b"

// PutRaw adds or replaces a cluster given as its /v3 object (JSON, with an
// id), listed as it is: its state and internal fields are what the filters
// read. It replaces a cluster of the same id that a test described
// (Set), and the other way round.
func (f *Fake) PutRaw(obj []byte) error {
	c, err := rawCluster(obj)
	if err != nil {
		return err
	}
	f.set(c)
	return nil
}

// PutObject is PutRaw of obj marshalled.
func (f *Fake) PutObject(obj map[string]any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("fake rancher: cluster object: %w", err)
	}
	return f.PutRaw(b)
}

// ClusterObject returns cluster id's object as /v3/clusters lists it (a
// cluster a test described rendered on the fixture), a copy of the
// caller's, or an error when there is no cluster id.
func (f *Fake) ClusterObject(id string) (map[string]any, error) {
	f.mu.Lock()
	c, ok := f.clusters[id]
	var b []byte
	var err error
	if ok {
		b, err = f.clusterJSON(c)
	}
	f.mu.Unlock()
	switch {
	case !ok:
		return nil, fmt.Errorf("fake rancher: no cluster %s", id)
	case err != nil:
		return nil, fmt.Errorf("fake rancher: cluster %s: %w", id, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("fake rancher: cluster %s: %w", id, err)
	}
	return obj, nil
}

// Edit changes a copy of cluster id's object (ClusterObject) and puts the
// result under the id it then has (PutObject): a change of "id" adds a
// cluster made from id's, which stays. A cluster a test described becomes
// raw: it keeps what was rendered, but its authorized endpoint listener,
// if any, stops (the object still names it) and its agent is connected.
// change runs without the fake's lock.
func (f *Fake) Edit(id string, change func(obj map[string]any)) error {
	obj, err := f.ClusterObject(id)
	if err != nil {
		return err
	}
	change(obj)
	return f.PutObject(obj)
}

// Generate adds n clusters made from the single-cluster fixture (an
// active, established cluster of ~10 KB), as raw objects: ids
// c-m-00000000, c-m-00000001, ..., names cluster-00000000, ..., the rest as
// recorded.
func (f *Fake) Generate(n int) {
	tmpl := f.clusterRaw.raw
	set := make([]Cluster, 0, n)
	for i := range n {
		c := f.clusterRaw
		c.ID, c.Name = fmt.Sprintf("c-m-%08d", i), fmt.Sprintf("cluster-%08d", i)
		c.raw = bytes.ReplaceAll(bytes.ReplaceAll(tmpl, []byte(fixtureID), []byte(c.ID)), []byte(fixtureName), []byte(c.Name))
		set = append(set, c)
	}
	f.set(set...)
}

// PutFixtureClusters puts the clusters of the recorded pages
// (rancher-clusters-page1.json and page2) as raw objects: c-5tbxq
// (edge-k3s-01, unavailable), c-7qgnz (staging-eks, a hosted EKS
// cluster), c-m-2x7kqz4b (prod-eu-west) and local (Rancher's own,
// internal).
func (f *Fake) PutFixtureClusters() { f.set(f.recorded...) }

// ServeFixturePages makes GET /v3/clusters answer the recorded pages as
// they are, whatever the clusters and the query, or the clusters again
// (false): rancher-clusters-page1.json without a marker (two clusters, a
// next link with limit=2), page2 for its marker c-m-2x7kqz4b (local among
// its clusters), 404 for another marker. Their links are on the fake's
// link base (SetLinkBase).
func (f *Fake) ServeFixturePages(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fixturePages = on
}

// rawCluster is a cluster of the object obj.
func rawCluster(obj []byte) (Cluster, error) {
	var meta struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		State    string `json:"state"`
		Internal bool   `json:"internal"`
	}
	if err := json.Unmarshal(obj, &meta); err != nil {
		return Cluster{}, fmt.Errorf("fake rancher: cluster object: %w", err)
	}
	if meta.ID == "" {
		return Cluster{}, errors.New("fake rancher: cluster object without an id")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, obj); err != nil {
		return Cluster{}, fmt.Errorf("fake rancher: cluster object: %w", err)
	}
	return Cluster{ID: meta.ID, Name: meta.Name, State: meta.State, raw: b.Bytes(), internal: meta.Internal}, nil
}

// loadRecorded reads the recorded pages (host rewritten) for
// ServeFixturePages, their clusters for PutFixtureClusters, and the
// single-cluster fixture as Generate's template. Called by New.
func (f *Fake) loadRecorded(page1, page2 []byte) error {
	f.pages = map[string][]byte{"": page1, recordedPage2Marker: page2}
	for _, b := range [][]byte{page1, page2} {
		var col struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(b, &col); err != nil {
			return err
		}
		for _, obj := range col.Data {
			c, err := rawCluster(obj)
			if err != nil {
				return err
			}
			f.recorded = append(f.recorded, c)
		}
	}
	var err error
	f.clusterRaw, err = rawCluster(f.cluster)
	return err
}
