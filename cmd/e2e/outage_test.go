package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
)

// state is what must not change while Rancher is down.
func state() (string, error) {
	var parts []string
	for _, as := range []string{"acme-guestbook", "globex-monitoring"} {
		apps, err := e.Apps(as)
		if err != nil {
			return "", err
		}
		parts = append(parts, as+"="+strings.Join(Names(apps), ","))
	}
	secrets, err := e.ClusterSecrets()
	if err != nil {
		return "", err
	}
	return strings.Join(append(parts, "secrets="+strings.Join(Names(secrets), ",")), " "), nil
}

// unchanged returns a check that the state is still before.
func unchanged(before string) func() error {
	return func() error {
		now, err := state()
		if err != nil {
			return err
		}
		if now != before {
			return fmt.Errorf("changed:\n  before %s\n  now    %s", before, now)
		}
		return nil
	}
}

var beforeOutage string

func testOutageStale(t *testing.T) {
	var err error
	if beforeOutage, err = state(); err != nil {
		t.Fatal(err)
	}
	t.Logf("before the outage: %s", beforeOutage)
	e.Rancher.SetDown(true)
	e.Eventually(t, Interval+10*time.Second, "/status shows the rancher source stale", func() error {
		st, err := e.Status()
		if err != nil {
			return err
		}
		if r := st["rancher"]; !r.Stale || !strings.Contains(r.LastError, "500") {
			return fmt.Errorf("rancher: %+v", r)
		}
		return nil
	})
	e.Holds(t, 3*Interval, "nothing disappears while the last complete listing is served", unchanged(beforeOutage))
	st, err := e.Status()
	if err != nil {
		t.Fatal(err)
	}
	if r := st["rancher"]; !r.Stale || r.ConsecutiveFailures < 3 {
		t.Errorf("after several intervals, rancher: %+v", r)
	}
	if s, msg, err := e.Condition("acme-guestbook", "ErrorOccurred"); err != nil || s == "True" {
		t.Errorf("a stale answer is a 200: no error expected, got ErrorOccurred=%s %q (%v)", s, msg, err)
	}
}

// testOutageRestart: the service restarts while Rancher is down. The
// ledger says the source has listed, so the new process answers at once
// with the last complete listing (stale), exactly as before the restart;
// no ApplicationSet shows an error and nothing is removed.
func testOutageRestart(t *testing.T) {
	before, err := AnswerBytes(e.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	e.StopService(t)
	e.StartService(t, "upsert-only") // Rancher is still down
	e.Eventually(t, 30*time.Second, "/readyz after the restart", func() error { return GetOK("http://" + e.APIAddr + "/readyz") })
	after, err := AnswerBytes(e.APIAddr)
	if err != nil {
		t.Fatalf("the first answer after the restart: %v", err)
	}
	if string(after) != string(before) {
		t.Fatalf("the first answer after the restart differs:\n  before %s\n  after  %s", before, after)
	}
	e.Eventually(t, Interval+10*time.Second, "/status: rancher synced from the ledger, stale", func() error {
		st, err := e.Status()
		if err != nil {
			return err
		}
		if r := st["rancher"]; !r.Synced || !r.Stale || !strings.Contains(r.LastError, "500") {
			return fmt.Errorf("rancher: %+v", r)
		}
		return nil
	})
	e.Holds(t, 2*Interval, "Argo CD keeps every Application; no Secret is touched", unchanged(beforeOutage))
	if s, msg, err := e.Condition("acme-guestbook", "ErrorOccurred"); err != nil || s == "True" {
		t.Errorf("the answer is the ledger's, a 200: no error expected, got ErrorOccurred=%s %q (%v)", s, msg, err)
	}
}

func testRecovery(t *testing.T) {
	e.Rancher.SetDown(false)
	recovered := time.Now()
	e.Eventually(t, Interval+10*time.Second, "/status: rancher synced and fresh", func() error {
		st, err := e.Status()
		if err != nil {
			return err
		}
		if r := st["rancher"]; !r.Synced || r.Stale || r.LastError != "" {
			return fmt.Errorf("rancher: %+v", r)
		}
		return nil
	})
	t.Logf("Rancher's source fresh %.1fs after Rancher came back", time.Since(recovered).Seconds())
	if s, msg, err := e.Condition("acme-guestbook", "ErrorOccurred"); err != nil || s == "True" {
		t.Errorf("no error through the outage: ErrorOccurred=%s %q (%v)", s, msg, err)
	}
	if err := unchanged(beforeOutage)(); err != nil {
		t.Fatal(err)
	}
}
