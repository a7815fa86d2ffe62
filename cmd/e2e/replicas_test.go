package e2e

// The ledger's promises, end to end: what decides a 200 is in the
// Kubernetes API, so a restart changes no answer and two replicas answer
// the same.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
)

// currentPolicy is the Secret policy the scenarios run the service with at
// this point of TestEndToEnd (testOutageRestart switched to upsert-only).
const currentPolicy = "upsert-only"

// testHeldDropSurvivesRestarts: Rancher's token loses its access (a 200
// with no clusters). The drop is held; the service is restarted twice
// while it is held, and each new process answers with every cluster at
// once: no Application is recreated and no Secret replaced. When access
// comes back, nothing has moved.
func testHeldDropSurvivesRestarts(t *testing.T) {
	was := settledFleet(t)
	gone, n0 := e.rancher.ListNothing()
	t.Cleanup(func() { e.rancher.Change(gone) })
	eventually(t, 2*interval+10*time.Second, "/status holds the drop", func() error {
		st, err := e.status()
		if err != nil {
			return err
		}
		if r := st["rancher"]; r.HeldDepartures == 0 {
			return fmt.Errorf("rancher: %+v", r)
		}
		return nil
	})
	before, err := answerBytes(e.apiAddr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		e.stopService(t)
		e.startService(t, currentPolicy)
		eventually(t, 30*time.Second, "/readyz after the restart", func() error { return getOK("http://" + e.apiAddr + "/readyz") })
		after, err := answerBytes(e.apiAddr)
		if err != nil {
			t.Fatalf("restart %d: the first answer: %v", i+1, err)
		}
		if !bytes.Equal(before, after) {
			t.Fatalf("restart %d: the first answer differs from the last one before it:\n  before %s\n  after  %s", i+1, before, after)
		}
		holds(t, interval, fmt.Sprintf("restart %d: every Application and Secret kept", i+1), sameFleet(was))
	}
	t.Logf("held through %d listings and two restarts", e.rancher.Change(gone)-n0)
	eventually(t, 2*interval+10*time.Second, "access back: nothing held", func() error {
		st, err := e.status()
		if err != nil {
			return err
		}
		if r := st["rancher"]; r.HeldDepartures != 0 || r.Absent != 0 {
			return fmt.Errorf("rancher: %+v", r)
		}
		return nil
	})
	holds(t, interval, "nothing moved", sameFleet(was))
}

// testReplicas: two processes of the service behind a proxy that sends
// each request to the next live one, as the chart's two replicas behind
// one Service. They give the same
// answer; a new cluster reaches both within the watch latency; the leader
// is stopped and the other takes over without an Application recreated;
// a removal still goes once confirmed.
func testReplicas(t *testing.T) {
	settledFleet(t) // the fleet as the single process left it
	e.stopService(t)
	addrs := replicaAddrs(t)
	replicas := [2]*proc{e.startReplica(t, "a", addrs[0], currentPolicy), e.startReplica(t, "b", addrs[1], currentPolicy)}
	pool := startPool(t, e.apiAddr, addrs[:])
	pool.setAlive(0, true)
	pool.setAlive(1, true)
	defer func() {
		pool.close()
		for _, p := range replicas {
			p.stop()
		}
		e.startService(t, currentPolicy)
		eventually(t, 30*time.Second, "/readyz of the single process again", func() error { return getOK("http://" + e.apiAddr + "/readyz") })
	}()
	for _, a := range addrs {
		eventually(t, 30*time.Second, "/readyz of "+a, func() error { return getOK("http://" + a + "/readyz") })
	}
	eventually(t, 10*time.Second, "both replicas give the same answer", func() error { return sameAnswers(addrs[:]) })

	newcomer := fakerancher.Cluster{ID: "c-m-acme0077", Name: "acme-replica", State: "active",
		Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "replica"}}
	e.rancher.Set(newcomer)
	seen := [2]time.Time{}
	deadline := time.Now().Add(2*interval + 20*time.Second)
	for seen[0].IsZero() || seen[1].IsZero() {
		if time.Now().After(deadline) {
			t.Fatalf("the new cluster did not reach both replicas: seen at %v\n%s", seen, e.logs())
		}
		for i, a := range addrs {
			if ps, err := paramsAt(a); err == nil && seen[i].IsZero() && slices.Contains(ps, newcomer.Name) {
				seen[i] = time.Now()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	skew := seen[0].Sub(seen[1]).Abs()
	t.Logf("a new cluster reached the two replicas %s apart", skew.Round(time.Millisecond))
	if skew > 3*time.Second {
		t.Errorf("the replicas answered differently for %s (the watch latency is well under a second)", skew)
	}
	acmeApps["guestbook-"+newcomer.Name] = secretName(newcomer)
	eventually(t, 2*interval+10*time.Second, "its Application", func() error { return appsAre("acme-guestbook", "acme", acmeApps) })
	was := settledFleet(t)

	leader := -1
	eventually(t, 20*time.Second, "one replica leads", func() error {
		for i, a := range addrs {
			if leads(a) {
				leader = i
				return nil
			}
		}
		return fmt.Errorf("no leader yet")
	})
	other := 1 - leader
	pool.setAlive(leader, false) // the Service sends to the ready replica only
	replicas[leader].stop()
	eventually(t, 30*time.Second, "the other replica takes over", func() error {
		if !leads(addrs[other]) {
			return fmt.Errorf("not leading yet")
		}
		return nil
	})
	holds(t, 2*interval, "no Application recreated, no Secret replaced across the leader change", sameFleet(was))

	e.rancher.Remove(newcomer.ID)
	delete(acmeApps, "guestbook-"+newcomer.Name)
	eventually(t, time.Duration(departureListings+3)*interval+departureGrace+10*time.Second, "a confirmed removal still goes",
		func() error { return appsAre("acme-guestbook", "acme", acmeApps) })
}

// replicaAddrs are two free loopback addresses for two replicas.
func replicaAddrs(t *testing.T) [2]string {
	t.Helper()
	var addrs [2]string
	for i := range addrs {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", port)
	}
	return addrs
}

// startReplica runs a process of our service on addr, with the
// configuration of the single one and the Secret policy given.
func (x *env) startReplica(t *testing.T, name, addr, policy string) *proc {
	t.Helper()
	path, err := x.writeConfig(policy)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, serviceRun{name: "replica-" + name, dir: x.dir, config: path, flags: []string{"--listen", addr}, healthz: addr})
}

// answerBytes is the body of the plugin answer for tenant acme at addr.
func answerBytes(addr string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/getparams.execute",
		bytes.NewReader([]byte(`{"applicationSetName":"e2e","input":{"parameters":{"tenant":"acme"}}}`)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+pluginToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer drain(resp.Body)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("getparams: %s %s", resp.Status, b)
	}
	return b, nil
}

// paramsAt returns the names the answer at addr lists for tenant acme.
func paramsAt(addr string) ([]string, error) {
	b, err := answerBytes(addr)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Output struct {
			Parameters []struct {
				Name string `json:"name"`
			} `json:"parameters"`
		} `json:"output"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range doc.Output.Parameters {
		out = append(out, p.Name)
	}
	return out, nil
}

// sameAnswers checks that every replica gives the same answer.
func sameAnswers(addrs []string) error {
	var first []byte
	for i, a := range addrs {
		b, err := answerBytes(a)
		if err != nil {
			return err
		}
		if i > 0 && !bytes.Equal(first, b) {
			return fmt.Errorf("%s and %s answer differently:\n  %s\n  %s", addrs[0], a, first, b)
		}
		first = b
	}
	return nil
}

// leads reports whether the replica at addr holds the lease (its /status).
func leads(addr string) bool {
	c := &http.Client{Timeout: 2 * time.Second} // a frozen replica answers nothing
	resp, err := getStatus(c, addr, pluginToken)
	if err != nil {
		return false
	}
	defer drain(resp.Body)
	var doc struct {
		Secrets struct {
			Leader bool `json:"leader"`
		} `json:"secrets"`
	}
	return json.NewDecoder(resp.Body).Decode(&doc) == nil && doc.Secrets.Leader
}

// testLifecycleRolling runs the lifecycle table again (testLifecycle)
// with two replicas behind a proxy that sends each request to a live one,
// as a Service does, while the replicas are restarted in turn every two
// listings: each process starts from the ledger, and the Lease changes
// hands at every restart of the leader. Every assertion of the table must
// hold as with one process that never restarts.
func testLifecycleRolling(t *testing.T) {
	e.stopService(t)
	defer func() {
		e.startService(t, currentPolicy)
		eventually(t, 30*time.Second, "/readyz of the single process again", func() error { return getOK("http://" + e.apiAddr + "/readyz") })
	}()
	addrs := replicaAddrs(t)
	pool := startPool(t, e.apiAddr, addrs[:])
	defer pool.close()
	var mu sync.Mutex
	replicas := [2]*proc{}
	for i, a := range addrs {
		replicas[i] = e.startReplica(t, fmt.Sprint(i), a, "sync")
		eventually(t, 30*time.Second, "/readyz of "+a, func() error { return getOK("http://" + a + "/readyz") })
		pool.setAlive(i, true)
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range replicas {
			p.stop()
		}
	}()
	e.rolling.Store(true)
	defer e.rolling.Store(false)
	ctx, cancel := context.WithCancel(context.Background())
	rolled := make(chan int, 1)
	go func() {
		n := 0
		defer func() { rolled <- n }()
		for i := 0; ; i = 1 - i {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * interval):
			}
			pool.setAlive(i, false)
			time.Sleep(300 * time.Millisecond) // in-flight requests end
			mu.Lock()
			replicas[i].stop()
			replicas[i] = e.startReplica(t, fmt.Sprint(i), addrs[i], "sync")
			mu.Unlock()
			if err := waitOK("http://"+addrs[i]+"/readyz", 30*time.Second); err != nil {
				t.Errorf("replica %d not ready after its restart: %v", i, err)
				return
			}
			pool.setAlive(i, true)
			n++
		}
	}()
	testLifecycle(t)
	cancel()
	t.Logf("%d restarts of a replica during the lifecycle table", <-rolled)
}

// settleListings is how many listings after a change its effects must
// show: 2 with one process; while replicas restart in turn, two listings
// can come from two processes a moment apart (the leader that stops, the
// one that takes over), before the new one has written, so 4. What must
// never change (Application UIDs, Secret content) is checked at every
// listing either way.
func (x *env) settleListings() int {
	if x.rolling.Load() {
		return 4
	}
	return 2
}

// waitOK polls url until it answers 200 or timeout.
func waitOK(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := getOK(url)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pool is a proxy on one address that sends each request to the next live
// backend in turn, as a Service sends only to ready pods.
type pool struct {
	srv     *http.Server
	proxies []*httputil.ReverseProxy
	mu      sync.Mutex
	alive   []bool
	next    int
}

func startPool(t *testing.T, addr string, backends []string) *pool {
	t.Helper()
	p := &pool{alive: make([]bool, len(backends))}
	for _, b := range backends {
		p.proxies = append(p.proxies, httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: b}))
	}
	var ln net.Listener
	var err error
	for range 50 { // the port was just released by the process that had it
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	p.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxy := p.pick()
		if proxy == nil {
			http.Error(w, "no live replica", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p
}

func (p *pool) pick() *httputil.ReverseProxy {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range p.alive {
		i := p.next % len(p.alive)
		p.next++
		if p.alive[i] {
			return p.proxies[i]
		}
	}
	return nil
}

func (p *pool) setAlive(i int, alive bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.alive[i] = alive
}

func (p *pool) close() { _ = p.srv.Close() }
