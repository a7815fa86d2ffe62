package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// state is what must not change while Rancher is down.
func state() (string, error) {
	var parts []string
	for _, as := range []string{"acme-guestbook", "globex-monitoring"} {
		apps, err := e.apps(as)
		if err != nil {
			return "", err
		}
		parts = append(parts, as+"="+strings.Join(names(apps), ","))
	}
	secrets, err := e.clusterSecrets()
	if err != nil {
		return "", err
	}
	return strings.Join(append(parts, "secrets="+strings.Join(names(secrets), ",")), " "), nil
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
	e.rancher.SetDown(true)
	eventually(t, interval+10*time.Second, "/status shows the rancher source stale", func() error {
		st, err := e.status()
		if err != nil {
			return err
		}
		if r := st["rancher"]; !r.Stale || !strings.Contains(r.LastError, "500") {
			return fmt.Errorf("rancher: %+v", r)
		}
		return nil
	})
	holds(t, 3*interval, "nothing disappears while the last complete listing is served", unchanged(beforeOutage))
	st, err := e.status()
	if err != nil {
		t.Fatal(err)
	}
	if r := st["rancher"]; !r.Stale || r.ConsecutiveFailures < 3 {
		t.Errorf("after several intervals, rancher: %+v", r)
	}
	if s, msg, err := e.condition("acme-guestbook", "ErrorOccurred"); err != nil || s == "True" {
		t.Errorf("a stale answer is a 200: no error expected, got ErrorOccurred=%s %q (%v)", s, msg, err)
	}
}

func testOutageRestart(t *testing.T) {
	e.stopService(t)
	e.startService(t, "upsert-only") // Rancher is still down
	st, err := e.status()
	if err != nil {
		t.Fatal(err)
	}
	if r := st["rancher"]; r.Synced {
		t.Fatalf("rancher synced while down: %+v", r)
	}
	const ours = "source(s) rancher have not completed a listing yet"
	eventually(t, 20*time.Second, "the ApplicationSet shows our 503 message", func() error {
		s, msg, err := e.condition("acme-guestbook", "ErrorOccurred")
		if err != nil {
			return err
		}
		if s != "True" || !strings.Contains(msg, ours) {
			return fmt.Errorf("ErrorOccurred=%s %q", s, msg)
		}
		return nil
	})
	_, msg, _ := e.condition("acme-guestbook", "ErrorOccurred")
	t.Logf("ApplicationSet condition: %s", msg)
	holds(t, 2*interval, "Argo CD keeps every Application on an error; no Secret of an unsynced source is touched", unchanged(beforeOutage))
}

func testRecovery(t *testing.T) {
	e.rancher.SetDown(false)
	recovered := time.Now()
	eventually(t, interval+10*time.Second, "/status: rancher synced and fresh", func() error {
		st, err := e.status()
		if err != nil {
			return err
		}
		if r := st["rancher"]; !r.Synced || r.Stale || r.LastError != "" {
			return fmt.Errorf("rancher: %+v", r)
		}
		return nil
	})
	eventually(t, interval+10*time.Second, "the ApplicationSet error clears without waiting for Argo CD's 3-minute retry", func() error {
		s, msg, err := e.condition("acme-guestbook", "ErrorOccurred")
		if err != nil {
			return err
		}
		if s != "False" {
			return fmt.Errorf("ErrorOccurred=%s %q", s, msg)
		}
		return nil
	})
	t.Logf("ApplicationSet healthy %.1fs after Rancher came back", time.Since(recovered).Seconds())
	if err := unchanged(beforeOutage)(); err != nil {
		t.Fatal(err)
	}
	// the annotation was still set by the failed reconcile: set again
	if n, err := e.metric("argocd_cluster_discovery_appset_refresh_patches_total", `{outcome="repatched"}`); err != nil || n < 1 {
		t.Errorf("repatched refreshes: %v (%v)", n, err)
	}
}
