package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/clusterprofile"
)

func testRemovalSync(t *testing.T) {
	secret := secretName(acmeStaging)
	left := time.Now()
	n0 := e.rancher.Change(nil, acmeStaging.ID)
	phases := map[string]bool{}
	untilConfirmed(t, n0, "acme-staging", func() error {
		if err := appsAre("acme-guestbook", "acme", acmeApps); err != nil {
			return err
		}
		s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phases[s.Labels[clustersecret.LabelPhase]] = true
		return nil
	})
	delete(acmeApps, "guestbook-acme-staging")
	eventually(t, 2*interval+10*time.Second, "the Application of the cluster that left is removed", func() error {
		return appsAre("acme-guestbook", "acme", acmeApps)
	})
	eventually(t, 2*interval+10*time.Second, "its Secret is pruned", func() error {
		_, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
	gone := time.Since(left)
	t.Logf("Application and Secret %s removed %.1fs after the cluster left (%d listings, grace period %s)", secret, gone.Seconds(), departureListings, departureGrace)
	if !phases["absent"] {
		t.Errorf("the Secret never showed phase absent before its departure was confirmed (phases seen: %v)", names(phases))
	}
	if err := departedListed(acmeStaging); err != nil {
		t.Error(err)
	}
	// the other deployment's Secret for a cluster of that name is not ours
	if _, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), "cluster-rancher-acme-staging-other", metav1.GetOptions{}); err != nil {
		t.Errorf("another deployment's Secret: %v", err)
	}
}

// untilConfirmed checks, from the listing after n0 (the count of Rancher
// listings answered before the cluster left) until the listing that
// confirms the departure, that the cluster is still served: in the plugin
// answer, with phase absent or leaving once a listing missed it, and check
// (its Application and Secret are there) holds. It returns when the
// confirming listing has been answered, and fails if the cluster left
// earlier.
func untilConfirmed(t *testing.T, n0 int, name string, check func() error) {
	t.Helper()
	confirm := n0 + departureListings
	deadline := time.Now().Add(time.Duration(departureListings+3) * interval * 2)
	sawTwo := false
	for {
		n := e.rancher.Served()
		if n >= confirm {
			break
		}
		err := check()
		if err == nil {
			var ps map[string]param
			if ps, err = e.params(map[string]string{"tenant": "acme"}); err == nil {
				p, ok := ps[name]
				switch {
				case !ok:
					err = fmt.Errorf("%s is not in the plugin answer", name)
				case n >= n0+e.settleListings() && p.Phase != "absent" && p.Phase != "leaving":
					err = fmt.Errorf("%s in the plugin answer after %d listings without it: phase %q", name, n-n0, p.Phase)
				}
			}
		}
		// a check that ran into the confirming listing proves nothing
		if after := e.rancher.Served(); err != nil && after < confirm {
			t.Fatalf("%s removed after %d listing(s) without it, before the confirmation (%d listings): %v\n%s", name, after-n0, departureListings, err, e.logs())
		}
		if n >= n0+2 {
			sawTwo = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("Rancher answered %d listings since the cluster left, want %d, by %s", n-n0, departureListings, deadline.Format(time.TimeOnly))
		}
		time.Sleep(150 * time.Millisecond)
	}
	if !sawTwo {
		t.Fatalf("never checked %s after 2 listings without it", name)
	}
}

// departedListed checks that /status lists the cluster's departure.
func departedListed(c fakerancher.Cluster) error {
	if e.rolling.Load() {
		// /status lists the departures its own process confirmed, and the
		// replica that did may have restarted since: the ledger is the
		// record of it
		return noClusterProfile(c)
	}
	doc, err := e.statusDoc()
	if err != nil {
		return err
	}
	for _, d := range doc.Departed {
		if d.Source == "rancher" && d.ID == c.ID {
			return nil
		}
	}
	return fmt.Errorf("/status departed %+v: no rancher %s", doc.Departed, c.ID)
}

// noClusterProfile checks that the ledger holds no record of the Rancher
// cluster c: its departure was confirmed.
func noClusterProfile(c fakerancher.Cluster) error {
	list, err := e.dyn.Resource(clusterprofile.Resource).Namespace(argoNS).List(context.Background(),
		metav1.ListOptions{LabelSelector: clusterprofile.LabelSource + "=rancher"})
	if err != nil {
		return err
	}
	for _, p := range list.Items {
		if strings.Contains(p.GetAnnotations()[clusterprofile.AnnotationRecord], `"id":"`+c.ID+`"`) {
			return fmt.Errorf("ClusterProfile %s still holds %s", p.GetName(), c.ID)
		}
	}
	return nil
}

func testRemovalUpsertOnly(t *testing.T) {
	secret := secretName(acmeDev)
	before, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameSecret := func() error {
		s, err := e.kube.CoreV1().Secrets(argoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.UID != before.UID || string(s.Data["server"]) != string(before.Data["server"]) {
			return fmt.Errorf("Secret %s replaced or changed", secret)
		}
		return nil
	}
	n0 := e.rancher.Change(nil, acmeDev.ID)
	untilConfirmed(t, n0, "acme-dev", func() error {
		if err := appsAre("acme-guestbook", "acme", acmeApps); err != nil {
			return err
		}
		return sameSecret()
	})
	delete(acmeApps, "guestbook-acme-dev")
	eventually(t, 2*interval+10*time.Second, "the Application goes (the plugin no longer lists the cluster)", func() error {
		return appsAre("acme-guestbook", "acme", acmeApps)
	})
	if err := departedListed(acmeDev); err != nil {
		t.Error(err)
	}
	holds(t, 3*interval, "under upsert-only the Secret stays", sameSecret)
}
