package e2e

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
)

// rancherEKSFront fronts the suite's fake Rancher for the cloud deployment:
// it passes every request through (links rewritten to its own address) and
// shows the clusters it hosts as Rancher shows an EKS cluster it manages:
// driver EKS, provider eks, and eksConfig and eksStatus.upstreamSpec naming
// the EKS cluster (display name, region, and the cluster role, whose ARN
// holds the account), in the fake EKS's account and region. What it adds to
// the fake Rancher it removes on Close, leaving it as it found it.
type rancherEKSFront struct {
	srv      *httptest.Server
	upstream *fakerancher.Fake

	mu     sync.Mutex
	hosted map[string]string // Rancher cluster id → EKS cluster name
	lists  int               // cluster lists requested
}

func newRancherEKSFront(upstream *fakerancher.Fake) *rancherEKSFront {
	f := &rancherEKSFront{upstream: upstream, hosted: map[string]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// URL of the front, the Rancher URL the cloud deployment is given.
func (f *rancherEKSFront) URL() string { return f.srv.URL }

// Server is the URL at which the source serves a Rancher cluster.
func (f *rancherEKSFront) Server(id string) string { return f.srv.URL + "/k8s/clusters/" + id }

// Host adds the Rancher cluster c, the hosted EKS cluster eksName, and
// returns how many cluster lists were requested before: every list counted
// after that number sees it.
func (f *rancherEKSFront) Host(c fakerancher.Cluster, eksName string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hosted[c.ID] = eksName
	f.upstream.Set(c)
	return f.lists
}

// Unhost removes the Rancher cluster id and returns how many cluster lists
// were requested before.
func (f *rancherEKSFront) Unhost(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.hosted, id)
	f.upstream.Remove(id)
	return f.lists
}

// Listings counts the cluster lists requested.
func (f *rancherEKSFront) Listings() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

// Close removes the clusters still hosted from the fake Rancher and stops
// the front.
func (f *rancherEKSFront) Close() {
	f.mu.Lock()
	for id := range f.hosted {
		f.upstream.Remove(id)
		delete(f.hosted, id)
	}
	f.mu.Unlock()
	f.srv.Close()
}

func (f *rancherEKSFront) serve(w http.ResponseWriter, r *http.Request) {
	clusters := r.URL.Path == "/v3/clusters"
	if clusters {
		f.mu.Lock()
		f.lists++
		f.mu.Unlock()
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, f.upstream.URL()+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for _, h := range []string{"Authorization", "Accept"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	body = []byte(strings.ReplaceAll(string(body), f.upstream.URL(), f.srv.URL))
	if clusters && resp.StatusCode == http.StatusOK {
		if body, err = f.hostEKS(body); err != nil {
			http.Error(w, "front: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if v := resp.Header.Get("X-Api-Schemas"); v != "" {
		w.Header().Set("X-Api-Schemas", strings.ReplaceAll(v, f.upstream.URL(), f.srv.URL))
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// hostEKS makes the hosted clusters of a cluster collection EKS clusters.
func (f *rancherEKSFront) hostEKS(body []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	data, _ := doc["data"].([]any)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, x := range data {
		c, _ := x.(map[string]any)
		id, _ := c["id"].(string)
		name, ok := f.hosted[id]
		if !ok {
			continue
		}
		spec := map[string]any{
			"displayName": name, "region": cloudAWSRegion, "imported": false,
			"serviceRole":       "arn:aws:iam::" + cloudAWSAccount + ":role/" + name + "-eks-cluster-role",
			"kubernetesVersion": "1.31",
		}
		c["driver"], c["provider"] = "EKS", "eks"
		c["eksConfig"] = spec
		c["eksStatus"] = map[string]any{"upstreamSpec": maps.Clone(spec)}
	}
	return json.Marshal(doc)
}
