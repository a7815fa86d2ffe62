package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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
# as the chart deploys it: the inventory's records are ClusterProfiles
ledger: {kind: kubernetes, namespace: %s}
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
%ssecrets:
  enabled: true
  namespace: %s
  ownerID: %s
  policy: %s
  resync: 2s
  # the tenants a Rancher cluster's labels may claim: only from the rancher
  # source (the static files are the operator's, trusted as written)
  tenants:
    acme: {project: acme, sources: [rancher]}
    globex: {project: globex, sources: [rancher]}
  # the countdown of Secrets whose cluster this process never served (none
  # in this suite): departures of served clusters follow departure above
  prune: {afterListings: 2, gracePeriod: 3s}
  leaderElection: {leaseName: acd-e2e, leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 500ms}
  kubeconfig: %s
applicationSetRefresh: {enabled: true, debounce: 500ms}
`, x.apiAddr, interval, departureListings, departureGrace, departureMaxFraction, departureHeldListings, argoNS, x.rancher.URL(), x.extraSources(), argoNS, ownerID, policy, x.kubeconfig),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(x.dir, name), []byte(content), 0o600); err != nil {
			return "", err
		}
	}
	return filepath.Join(x.dir, "config-"+policy+".yaml"), nil
}

// extraSources are the sources a scenario added to the configuration:
// testLateSource's, from then on.
func (x *env) extraSources() string {
	if !x.lateSource {
		return ""
	}
	return "  - name: " + lateSource + "\n    provider: static\n    static: {file: " + lateSource + ".yaml}\n"
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
	p := serve(t, serviceRun{name: "argocd-cluster-discovery", dir: x.dir, config: path}, func(p *proc) {
		x.mu.Lock()
		x.service = p
		x.mu.Unlock()
	})
	if err := waitHTTP(p, "http://"+x.apiAddr+"/healthz", 60*time.Second); err != nil {
		t.Fatalf("our service did not start: %v\n%s", err, p.tail(40))
	}
}

// serviceRun is one run of our binary, `serve --config config`: its name,
// its log (dir/<name>.log), what it adds to the suite's environment
// (KUBECONFIG), its own flags, and the address whose /healthz says it is
// up ("": not waited for).
type serviceRun struct {
	name, dir, config string
	env, flags        []string
	healthz           string
}

// serve starts our binary as run says, every scenario's instance alike:
// each started proc is handed to keep (when given) before the wait, so
// that a failed start can still be stopped and logged.
func serve(t *testing.T, run serviceRun, keep ...func(*proc)) *proc {
	t.Helper()
	args := append([]string{"serve", "--config", run.config}, run.flags...)
	p, err := startProc(run.name, filepath.Join(run.dir, run.name+".log"), append([]string{"KUBECONFIG=" + e.kubeconfig}, run.env...), e.binary, args...)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keep {
		k(p)
	}
	if run.healthz != "" {
		if err := waitHTTP(p, "http://"+run.healthz+"/healthz", 60*time.Second); err != nil {
			t.Fatalf("%s did not start: %v\n%s", run.name, err, p.tail(40))
		}
	}
	return p
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
