package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
)

var (
	gvrApplications    = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
	gvrApplicationSets = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applicationsets"}
	// resources of the kinds the manifests hold
	gvrByKind = map[string]schema.GroupVersionResource{
		"Namespace":      {Version: "v1", Resource: "namespaces"},
		"ConfigMap":      {Version: "v1", Resource: "configmaps"},
		"Secret":         {Version: "v1", Resource: "secrets"},
		"AppProject":     {Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"},
		"ApplicationSet": gvrApplicationSets,
	}
)

// installArgoCD creates the argocd namespace and what an Argo CD
// installation and our plugin's wiring put there.
func (x *env) installArgoCD() error {
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": argoNS}}}
	if _, err := x.dyn.Resource(gvrByKind["Namespace"]).Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, m := range []string{"argocd.yaml", "plugin.yaml"} {
		if _, err := x.apply(m); err != nil {
			return err
		}
	}
	return nil
}

// apply creates the objects of testdata/manifests/<name>, with ${PLUGIN_URL}
// and ${TOKEN} replaced, and returns them as created.
func (x *env) apply(name string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(filepath.Join("testdata", "manifests", name))
	if err != nil {
		return nil, err
	}
	doc := strings.NewReplacer("${PLUGIN_URL}", "http://"+x.apiAddr, "${TOKEN}", pluginToken).Replace(string(raw))
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvr, ok := gvrByKind[obj.GetKind()]
		if !ok {
			return nil, fmt.Errorf("%s: kind %s not known to the suite", name, obj.GetKind())
		}
		created, err := x.dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(context.Background(), obj, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: create %s %s: %w", name, obj.GetKind(), obj.GetName(), err)
		}
		out = append(out, created)
	}
}

// writeConfig writes the service's configuration with the given Secret
// policy and returns its path.
func (x *env) writeConfig(policy string) (string, error) {
	files := map[string]string{
		"token":         pluginToken + "\n",
		"rancher-token": rancherTok + "\n",
		"config-" + policy + ".yaml": fmt.Sprintf(`log: {level: debug, format: json}
server:
  listen: %s
  tokens: [{file: token}]
  shutdownTimeout: 2s
inventory: {interval: %s, timeout: 5s}
# a departure is confirmed after departureListings listings without the
# cluster and departureGrace; a listing that drops more than a quarter of a
# source's served clusters (and more than one) is held for heldListings
# (one cluster leaving is never a mass drop)
departure: {afterListings: %d, gracePeriod: %s, maxFraction: %g, heldListings: %d}
sources:
  - name: rancher
    provider: rancher
    rancher:
      url: %s
      token: {file: rancher-token}
      requestTimeout: 2s
  - name: onprem
    provider: static
    static: {file: onprem.yaml}
  # two sources whose names and cluster names join the same way
  # (aws + prod-eu, aws-prod + eu): their Secret names must not collide
  - name: aws
    provider: static
    static: {file: aws.yaml}
  - name: aws-prod
    provider: static
    static: {file: aws-prod.yaml}
  # the source of the mass-drop scenario
  - name: fleet
    provider: static
    static: {file: fleet.yaml}
secrets:
  enabled: true
  namespace: %s
  ownerID: %s
  policy: %s
  resync: 2s
  # the countdown of Secrets whose cluster this process never served (none
  # in this suite): departures of served clusters follow departure above
  prune: {afterListings: 2, gracePeriod: 3s}
  leaderElection: {leaseName: acd-e2e, leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 500ms}
  kubeconfig: %s
applicationSetRefresh: {enabled: true, debounce: 500ms}
`, x.apiAddr, interval, departureListings, departureGrace, departureMaxFraction, departureHeldListings, x.rancher.URL(), argoNS, ownerID, policy, x.kubeconfig),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(x.dir, name), []byte(content), 0o600); err != nil {
			return "", err
		}
	}
	return filepath.Join(x.dir, "config-"+policy+".yaml"), nil
}

// writeStatic writes the static source's file.
func (x *env) writeStatic(content string) error {
	x.staticFile = filepath.Join(x.dir, "onprem.yaml")
	return os.WriteFile(x.staticFile, []byte(content), 0o600)
}

// staticCluster is a cluster of a static source's file, as the scenarios
// write it (JSON is YAML).
type staticCluster struct {
	Name           string            `json:"name"`
	Server         string            `json:"server"`
	ID             string            `json:"id,omitempty"`
	Tenant         string            `json:"tenant,omitempty"`
	Project        string            `json:"project,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Ready          *bool             `json:"ready,omitempty"`
	NotReadyReason string            `json:"notReadyReason,omitempty"`
}

// sourceFile is the path of a static source's file.
func (x *env) sourceFile(source string) string {
	return filepath.Join(x.dir, source+".yaml")
}

// writeSource replaces a static source's file at once (a listing never
// reads it half written).
func (x *env) writeSource(source string, clusters ...staticCluster) error {
	if clusters == nil {
		clusters = []staticCluster{}
	}
	b, err := json.MarshalIndent(map[string]any{"clusters": clusters}, "", "  ")
	if err != nil {
		return err
	}
	tmp := x.sourceFile(source) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, x.sourceFile(source))
}

// listings returns how many listings of a source our service completed or
// attempted: Rancher's cluster lists answered, or a static source's
// listings (the count of its listing duration histogram).
func (x *env) listings(source string) (int, error) {
	if source == "rancher" {
		return x.rancher.Served(), nil
	}
	n, err := x.metric("argocd_cluster_discovery_source_listing_duration_seconds_count", `{source="`+source+`"}`)
	return int(n), err
}

// startService runs our binary with the Secret policy given, and waits
// until it serves /healthz.
func (x *env) startService(t *testing.T, policy string) {
	t.Helper()
	path, err := x.writeConfig(policy)
	if err != nil {
		t.Fatal(err)
	}
	p, err := startProc("argocd-cluster-discovery", filepath.Join(x.dir, "argocd-cluster-discovery.log"),
		[]string{"KUBECONFIG=" + x.kubeconfig}, x.binary, "serve", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	x.mu.Lock()
	x.service = p
	x.mu.Unlock()
	if err := waitHTTP(p, "http://"+x.apiAddr+"/healthz", 60*time.Second); err != nil {
		t.Fatalf("our service did not start: %v\n%s", err, p.tail(40))
	}
}

// stopService sends SIGTERM to our service and waits for it.
func (x *env) stopService(t *testing.T) {
	t.Helper()
	x.mu.Lock()
	p := x.service
	x.service = nil
	x.mu.Unlock()
	if p == nil {
		return
	}
	p.stop()
	if p.err != nil {
		t.Errorf("our service did not stop cleanly on SIGTERM: %v\n%s", p.err, p.tail(20))
	}
}

// logs returns the tails of the processes' logs, for failure messages.
func (x *env) logs() string {
	x.mu.Lock()
	svc := x.service
	x.mu.Unlock()
	var parts []string
	if svc != nil {
		parts = append(parts, svc.tail(40))
	}
	parts = append(parts, x.controller.tail(25))
	return strings.Join(parts, "\n")
}

// eventually polls f until it returns nil, failing the test with f's last
// error and the logs after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	poll(t, timeout, what, f, e.logs)
}

// poll polls f until it returns nil, failing the test with f's last error
// and what logs returns after timeout.
func poll(t *testing.T, timeout time.Duration, what string, f func() error, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v\n%s", what, timeout, err, logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// holds checks for the whole duration that f returns nil.
func holds(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := f(); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, e.logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// app is what the scenarios read of an Application.
type app struct {
	Name, Project, Server string
	UID                   types.UID
}

// apps returns the Applications generated by an ApplicationSet of the
// suite, by name.
func (x *env) apps(appSet string) (map[string]app, error) {
	l, err := x.dyn.Resource(gvrApplications).Namespace(argoNS).List(context.Background(), metav1.ListOptions{LabelSelector: "e2e.appset=" + appSet})
	if err != nil {
		return nil, err
	}
	out := map[string]app{}
	for _, u := range l.Items {
		project, _, _ := unstructured.NestedString(u.Object, "spec", "project")
		server, _, _ := unstructured.NestedString(u.Object, "spec", "destination", "server")
		out[u.GetName()] = app{Name: u.GetName(), Project: project, Server: server, UID: u.GetUID()}
	}
	return out, nil
}

// clusterSecrets returns every cluster Secret of Argo CD's namespace, ours
// or not, by name.
func (x *env) clusterSecrets() (map[string]corev1.Secret, error) {
	l, err := x.kube.CoreV1().Secrets(argoNS).List(context.Background(), metav1.ListOptions{LabelSelector: "argocd.argoproj.io/secret-type=cluster"})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Secret{}
	for _, s := range l.Items {
		out[s.Name] = s
	}
	return out, nil
}

// condition returns the status and message of an ApplicationSet condition.
func (x *env) condition(appSet, typ string) (status, message string, err error) {
	u, err := x.dyn.Resource(gvrApplicationSets).Namespace(argoNS).Get(context.Background(), appSet, metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			msg, _ := m["message"].(string)
			return s, msg, nil
		}
	}
	return "", "", nil
}

// sourceStatus is what /status says about one source.
type sourceStatus struct {
	Name                string `json:"name"`
	Synced              bool   `json:"synced"`
	Stale               bool   `json:"stale"`
	LastError           string `json:"lastError"`
	ConsecutiveFailures int    `json:"consecutiveFailures"`
	Clusters            int    `json:"clusters"`
	Served              int    `json:"served"`
	Absent              int    `json:"absent"`
	HeldDepartures      int    `json:"heldDepartures"`
}

// statusDoc is what the scenarios read of /status.
type statusDoc struct {
	Sources   []sourceStatus `json:"sources"`
	Conflicts []struct {
		Name       string   `json:"name"`
		Sources    []string `json:"sources"`
		KeptSource string   `json:"keptSource"`
	} `json:"conflicts"`
	Unserved []struct {
		Name, Source, ID, Phase, State string
	} `json:"unserved"`
	Departed []struct {
		Name, Source, ID string
	} `json:"departed"`
	Duplicates []struct {
		Name       string `json:"name"`
		Source     string `json:"source"`
		KeptName   string `json:"keptName"`
		KeptSource string `json:"keptSource"`
		Reason     string `json:"reason"`
	} `json:"duplicates"`
	Kept []struct {
		Name, Source, Reason string
	} `json:"kept"`
	Secrets struct {
		Clashes []struct {
			Cluster string `json:"cluster"`
			Secret  string `json:"secret"`
			By      string `json:"by"`
		} `json:"clashes"`
	} `json:"secrets"`
}

// statusDoc reads our service's /status.
func (x *env) statusDoc() (*statusDoc, error) {
	resp, err := http.Get("http://" + x.apiAddr + "/status")
	if err != nil {
		return nil, err
	}
	defer drain(resp.Body)
	var doc statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode /status: %w", err)
	}
	return &doc, nil
}

// status reads the sources of our service's /status.
func (x *env) status() (map[string]sourceStatus, error) {
	doc, err := x.statusDoc()
	if err != nil {
		return nil, err
	}
	out := map[string]sourceStatus{}
	for _, s := range doc.Sources {
		out[s.Name] = s
	}
	return out, nil
}

// param is what the scenarios read of one parameter set of the plugin
// answer.
type param struct {
	Name, Server, Source, Phase, State string
}

// params asks our plugin API what Argo CD asks it for the acme
// ApplicationSet, and returns the answer by cluster name.
func (x *env) params(parameters map[string]string) (map[string]param, error) {
	body, err := json.Marshal(map[string]any{"applicationSetName": "e2e", "input": map[string]any{"parameters": parameters}})
	if err != nil {
		return nil, err
	}
	var ps []param
	if err := getParams(x.apiAddr, pluginToken, body, &ps); err != nil {
		return nil, err
	}
	out := map[string]param{}
	for _, p := range ps {
		out[p.Name] = p
	}
	return out, nil
}

// getParams asks a deployment's plugin API at addr what Argo CD asks it,
// with token, and decodes the parameter sets of a 200 into params.
func getParams(addr, token string, body []byte, params any) error {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/getparams.execute", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("getparams: %s %s", resp.Status, b)
	}
	doc := struct {
		Output struct {
			Parameters any `json:"parameters"`
		} `json:"output"`
	}{}
	doc.Output.Parameters = params
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return fmt.Errorf("decode getparams: %w", err)
	}
	return nil
}

// metric returns the value of one sample of our service's /metrics.
func (x *env) metric(name, labels string) (float64, error) {
	resp, err := http.Get("http://" + x.apiAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer drain(resp.Body)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+labels) + ` (\S+)$`)
	m := re.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no sample %s%s", name, labels)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func names[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// getOK returns nil when url answers 200.
func getOK(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s %s", url, resp.Status, b)
	}
	return nil
}

// drain reads and discards a response body.
func drain(r io.ReadCloser) {
	_, _ = io.Copy(io.Discard, r)
	_ = r.Close()
}

// sameSecret returns why Secret s is not the one it was: the same object
// (UID), data, annotations, and labels but for the phase and state, which
// follow the cluster's lifecycle.
func sameSecret(s, was *corev1.Secret) error {
	withoutPhase := func(m map[string]string) map[string]string {
		m = maps.Clone(m)
		delete(m, clustersecret.LabelPhase)
		delete(m, clustersecret.LabelState)
		return m
	}
	switch {
	case s.UID != was.UID:
		return fmt.Errorf("Secret %s was replaced (UID %s, was %s)", s.Name, s.UID, was.UID)
	case !maps.EqualFunc(s.Data, was.Data, bytes.Equal):
		return fmt.Errorf("Secret %s: data changed", s.Name)
	case !maps.Equal(withoutPhase(s.Labels), withoutPhase(was.Labels)):
		return fmt.Errorf("Secret %s: labels %v, were %v", s.Name, s.Labels, was.Labels)
	case !maps.Equal(s.Annotations, was.Annotations):
		return fmt.Errorf("Secret %s: annotations %v, were %v", s.Name, s.Annotations, was.Annotations)
	}
	return nil
}
