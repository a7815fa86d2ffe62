package e2e

// The ledger's promises, end to end: what decides a 200 is in the
// Kubernetes API, so a restart changes no answer and two replicas answer
// the same.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
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
	gone, n0 := e.Rancher.ListNothing()
	t.Cleanup(func() { e.Rancher.Change(gone) })
	e.Eventually(t, 2*Interval+10*time.Second, "/status holds the drop", func() error {
		st, err := e.Status()
		if err != nil {
			return err
		}
		if r := st["rancher"]; r.HeldDepartures == 0 {
			return fmt.Errorf("rancher: %+v", r)
		}
		return nil
	})
	// the leader's /status may say so before every ClusterProfile it wrote
	// has reached the answer: the last answer before the restart is the
	// one with the whole drop in it
	var before []byte
	e.Eventually(t, 30*time.Second, "the answer has every Rancher cluster absent", func() error {
		b, err := everyRancherClusterAbsent(e.APIAddr)
		before = b
		return err
	})
	for i := range 2 {
		e.StopService(t)
		e.StartService(t, currentPolicy)
		e.Eventually(t, 30*time.Second, "/readyz after the restart", func() error { return GetOK("http://" + e.APIAddr + "/readyz") })
		after, err := AnswerBytes(e.APIAddr)
		if err != nil {
			t.Fatalf("restart %d: the first answer: %v", i+1, err)
		}
		if !bytes.Equal(before, after) {
			t.Fatalf("restart %d: the first answer differs from the last one before it:\n  before %s\n  after  %s", i+1, before, after)
		}
		e.Holds(t, Interval, fmt.Sprintf("restart %d: every Application and Secret kept", i+1), e.SameFleet(was))
	}
	t.Logf("held through %d listings and two restarts", e.Rancher.Change(gone)-n0)
	e.Eventually(t, 2*Interval+10*time.Second, "access back: nothing held", func() error {
		st, err := e.Status()
		if err != nil {
			return err
		}
		if r := st["rancher"]; r.HeldDepartures != 0 || r.Absent != 0 {
			return fmt.Errorf("rancher: %+v", r)
		}
		return nil
	})
	e.Holds(t, Interval, "nothing moved", e.SameFleet(was))
}

// testReplicas: two processes of the service behind a proxy that sends
// each request to the next live one, as the chart's two replicas behind
// one Service. They give the same
// answer; a new cluster reaches both within the watch latency; the leader
// is stopped and the other takes over without an Application recreated;
// a removal still goes once confirmed.
func testReplicas(t *testing.T) {
	settledFleet(t) // the fleet as the single process left it
	e.StopService(t)
	addrs := ReplicaAddrs(t)
	replicas := [2]*Proc{e.StartReplica(t, "a", addrs[0], currentPolicy), e.StartReplica(t, "b", addrs[1], currentPolicy)}
	pool := StartPool(t, e.APIAddr, addrs[:])
	pool.SetAlive(0, true)
	pool.SetAlive(1, true)
	defer func() {
		pool.Close()
		for _, p := range replicas {
			p.Stop()
		}
		e.StartService(t, currentPolicy)
		e.Eventually(t, 30*time.Second, "/readyz of the single process again", func() error { return GetOK("http://" + e.APIAddr + "/readyz") })
	}()
	for _, a := range addrs {
		e.Eventually(t, 30*time.Second, "/readyz of "+a, func() error { return GetOK("http://" + a + "/readyz") })
	}
	e.Eventually(t, 10*time.Second, "both replicas give the same answer", func() error { return sameAnswers(addrs[:]) })

	newcomer := fakerancher.Cluster{ID: "c-m-acme0077", Name: "acme-replica", State: "active",
		Labels: map[string]string{"tenant": "acme", "argocd-project": "acme", "env": "replica"}}
	e.Rancher.Set(newcomer)
	seen := [2]time.Time{}
	deadline := time.Now().Add(2*Interval + 20*time.Second)
	for seen[0].IsZero() || seen[1].IsZero() {
		if time.Now().After(deadline) {
			t.Fatalf("the new cluster did not reach both replicas: seen at %v\n%s", seen, e.Logs())
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
	acmeApps["guestbook-"+newcomer.Name] = RancherSecret(newcomer)
	e.Eventually(t, 2*Interval+10*time.Second, "its Application", func() error { return e.AppsAre("acme-guestbook", "acme", acmeApps) })
	was := settledFleet(t)

	leader := -1
	e.Eventually(t, 20*time.Second, "one replica leads", func() error {
		for i, a := range addrs {
			if Leads(a) {
				leader = i
				return nil
			}
		}
		return fmt.Errorf("no leader yet")
	})
	other := 1 - leader
	pool.SetAlive(leader, false) // the Service sends to the ready replica only
	replicas[leader].Stop()
	e.Eventually(t, 30*time.Second, "the other replica takes over", func() error {
		if !Leads(addrs[other]) {
			return fmt.Errorf("not leading yet")
		}
		return nil
	})
	e.Holds(t, 2*Interval, "no Application recreated, no Secret replaced across the leader change", e.SameFleet(was))

	e.Rancher.Remove(newcomer.ID)
	delete(acmeApps, "guestbook-"+newcomer.Name)
	e.Eventually(t, time.Duration(DepartureListings+3)*Interval+DepartureGrace+10*time.Second, "a confirmed removal still goes",
		func() error { return e.AppsAre("acme-guestbook", "acme", acmeApps) })
}

// answerParam is what the tests read of one parameter set of an answer.
type answerParam struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Phase  string `json:"phase"`
}

// answerAt returns the answer at addr for tenant acme, and its parameter
// sets.
func answerAt(addr string) ([]byte, []answerParam, error) {
	b, err := AnswerBytes(addr)
	if err != nil {
		return nil, nil, err
	}
	var doc struct {
		Output struct {
			Parameters []answerParam `json:"parameters"`
		} `json:"output"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, nil, err
	}
	return b, doc.Output.Parameters, nil
}

// everyRancherClusterAbsent returns the answer at addr, and an error unless
// it has Rancher clusters and every one is in the phase absent.
func everyRancherClusterAbsent(addr string) ([]byte, error) {
	b, params, err := answerAt(addr)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, p := range params {
		if p.Source != "rancher" {
			continue
		}
		n++
		if p.Phase != "absent" {
			return nil, fmt.Errorf("%s is %s", p.Name, p.Phase)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("no rancher cluster in the answer: %s", b)
	}
	return b, nil
}

// paramsAt returns the names the answer at addr lists for tenant acme.
func paramsAt(addr string) ([]string, error) {
	_, params, err := answerAt(addr)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range params {
		out = append(out, p.Name)
	}
	return out, nil
}

// sameAnswers checks that every replica gives the same answer.
func sameAnswers(addrs []string) error {
	var first []byte
	for i, a := range addrs {
		b, err := AnswerBytes(a)
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

// testLifecycleRolling runs the lifecycle table again (testLifecycle)
// with two replicas behind a proxy that sends each request to a live one,
// as a Service does, while the service is restarted every two listings:
// replica 0, then replica 1, then the whole service (both stopped, then
// both started: meanwhile the proxy answers 503, as a Service with no
// ready endpoint leaves Argo CD without an answer), and again. Each
// process starts from the ledger, the Lease changes hands at every restart
// of the leader, and after a whole restart no process remembers anything.
// Every assertion of the table must hold as with one process that never
// restarts.
func testLifecycleRolling(t *testing.T) {
	e.StopService(t)
	defer func() {
		e.StartService(t, currentPolicy)
		e.Eventually(t, 30*time.Second, "/readyz of the single process again", func() error { return GetOK("http://" + e.APIAddr + "/readyz") })
	}()
	addrs := ReplicaAddrs(t)
	pool := StartPool(t, e.APIAddr, addrs[:])
	defer pool.Close()
	var mu sync.Mutex
	replicas := [2]*Proc{}
	for i, a := range addrs {
		replicas[i] = e.StartReplica(t, fmt.Sprint(i), a, "sync")
		e.Eventually(t, 30*time.Second, "/readyz of "+a, func() error { return GetOK("http://" + a + "/readyz") })
		pool.SetAlive(i, true)
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range replicas {
			p.Stop()
		}
	}()
	e.Rolling.Store(true)
	defer e.Rolling.Store(false)
	ctx, cancel := context.WithCancel(context.Background())
	rolled := make(chan [2]int, 1) // restarts of one replica, of the whole service
	go func() {
		var n [2]int
		defer func() { rolled <- n }()
		for step := 0; ; step = (step + 1) % 3 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * Interval):
			}
			which := []int{step} // 0, 1: that replica; 2: both, the whole service
			if step == 2 {
				which = []int{0, 1}
			}
			for _, i := range which {
				pool.SetAlive(i, false)
			}
			time.Sleep(300 * time.Millisecond) // in-flight requests end
			mu.Lock()
			for _, i := range which {
				replicas[i].Stop()
			}
			for _, i := range which {
				replicas[i] = e.StartReplica(t, fmt.Sprint(i), addrs[i], "sync")
			}
			mu.Unlock()
			for _, i := range which {
				if err := WaitOK("http://"+addrs[i]+"/readyz", 30*time.Second); err != nil {
					t.Errorf("replica %d not ready after its restart: %v", i, err)
					return
				}
				pool.SetAlive(i, true)
			}
			n[len(which)-1]++
		}
	}()
	testLifecycle(t)
	cancel()
	n := <-rolled
	t.Logf("%d restarts of a replica and %d of the whole service during the lifecycle table", n[0], n[1])
	if n[1] == 0 {
		t.Error("the whole service was never restarted during the lifecycle table")
	}
}
