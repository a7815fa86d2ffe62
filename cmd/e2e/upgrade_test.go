package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/clusterprofile"
)

// testUpgradeFromNoLedger: an upgrade from a version without the ledger,
// at the worst moment: Rancher's token has just lost its access (Rancher
// answers 200 with no cluster). The new version starts from an empty
// ledger (no ClusterProfile, no ledger ConfigMap: all the old version left
// is its Secrets). Its first listing of rancher lacks every cluster our
// Secrets name, so it is refused: every answer is a 503 naming rancher,
// every Application and Secret is kept, the ApplicationSet shows our
// message, and no Secret is written. The access comes back: the listing is
// taken, the answer is a 200 again, and nothing was recreated.
func testUpgradeFromNoLedger(t *testing.T) {
	was := settledFleet(t)
	e.StopService(t)
	stopped, err := e.FleetNow()
	if err != nil {
		t.Fatal(err)
	}
	dropLedger(t)
	gone, n0 := e.Rancher.ListNothing()
	back := false
	t.Cleanup(func() {
		if !back {
			e.Rancher.Change(gone)
		}
	})
	e.StartService(t, currentPolicy)
	t.Run("the first listing lacks every cluster our Secrets name: 503, nothing removed, nothing written", func(t *testing.T) {
		e.Through(t, "rancher", n0, SteadyListings, func() error { return errors.Join(e.SameFleet(was)(), e.SecretsUnwritten(stopped)()) },
			e.Answers503("rancher"))
		e.Eventually(t, 20*time.Second, "the ApplicationSet shows the 503", func() error {
			s, msg, err := e.Condition("acme-guestbook", "ErrorOccurred")
			if err == nil && (s != "True" || !strings.Contains(msg, "rancher")) {
				err = fmt.Errorf("ErrorOccurred=%s %q", s, msg)
			}
			return err
		})
		_, msg, _ := e.Condition("acme-guestbook", "ErrorOccurred")
		t.Logf("ApplicationSet condition: %s", msg)
		st, err := e.Status()
		if err != nil {
			t.Fatal(err)
		}
		if r := st["rancher"]; !strings.Contains(r.LastError, fmt.Sprintf("lacks %d of the %d clusters served before it", len(gone), len(gone))) {
			t.Errorf("/status rancher: %+v, want the refused listing's reason", r)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	e.Rancher.Change(gone)
	back = true
	t.Run("access back: 200 again, every Application and Secret as before", func(t *testing.T) {
		e.Eventually(t, Interval+10*time.Second, "the plugin answers 200", func() error {
			_, err := e.Params(map[string]string{"tenant": "acme"})
			return err
		})
		e.Eventually(t, Interval+10*time.Second, "the ApplicationSet error clears without waiting for Argo CD's 3-minute retry", func() error {
			s, msg, err := e.Condition("acme-guestbook", "ErrorOccurred")
			if err == nil && s != "False" {
				err = fmt.Errorf("ErrorOccurred=%s %q", s, msg)
			}
			return err
		})
		// the annotation was still set by the failed reconcile: set again
		if n, err := e.Metric("argocd_cluster_discovery_appset_refresh_patches_total", `{outcome="repatched"}`); err != nil || n < 1 {
			t.Errorf("repatched refreshes: %v (%v)", n, err)
		}
		e.Holds(t, 2*Interval, "nothing recreated", e.SameFleet(was))
		list, err := e.Dyn.Resource(clusterprofile.Resource).Namespace(ArgoNS).List(context.Background(),
			metav1.ListOptions{LabelSelector: clusterprofile.LabelSource + "=rancher"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != len(gone) {
			t.Errorf("%d ClusterProfiles of rancher, want %d: the ledger is written from the listing", len(list.Items), len(gone))
		}
	})
}

// dropLedger deletes the ledger of the service's installation (its
// ClusterProfiles and its ConfigMap), leaving what a version without a
// ledger leaves: the cluster Secrets.
func dropLedger(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: clusterprofile.LabelManager + "=" + clusterprofile.Manager + "," + clusterprofile.LabelOwner + "=" + OwnerID}
	if err := e.Dyn.Resource(clusterprofile.Resource).Namespace(ArgoNS).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Fatal(err)
	}
	if err := e.Kube.CoreV1().ConfigMaps(ArgoNS).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		t.Fatal(err)
	}
	e.Eventually(t, 10*time.Second, "the ledger is gone", func() error {
		list, err := e.Dyn.Resource(clusterprofile.Resource).Namespace(ArgoNS).List(ctx, sel)
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d ClusterProfiles left", len(list.Items))
		}
		return nil
	})
}
