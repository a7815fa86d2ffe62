package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
)

func testRemovalSync(t *testing.T) {
	secret := RancherSecret(acmeStaging)
	left := time.Now()
	n0 := e.Rancher.Change(nil, acmeStaging.ID)
	phases := map[string]bool{}
	e.UntilConfirmed(t, n0, "acme-staging", func() error {
		if err := e.AppsAre("acme-guestbook", "acme", acmeApps); err != nil {
			return err
		}
		s, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phases[s.Labels[clustersecret.LabelPhase]] = true
		return nil
	})
	delete(acmeApps, "guestbook-acme-staging")
	e.Eventually(t, 2*Interval+10*time.Second, "the Application of the cluster that left is removed", func() error {
		return e.AppsAre("acme-guestbook", "acme", acmeApps)
	})
	e.Eventually(t, 2*Interval+10*time.Second, "its Secret is pruned", func() error {
		_, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
	gone := time.Since(left)
	t.Logf("Application and Secret %s removed %.1fs after the cluster left (%d listings, grace period %s)", secret, gone.Seconds(), DepartureListings, DepartureGrace)
	if !phases["absent"] {
		t.Errorf("the Secret never showed phase absent before its departure was confirmed (phases seen: %v)", Names(phases))
	}
	if err := e.DepartedListed(acmeStaging); err != nil {
		t.Error(err)
	}
	// the other deployment's Secret for a cluster of that name is not ours
	if _, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), "cluster-rancher-acme-staging-other", metav1.GetOptions{}); err != nil {
		t.Errorf("another deployment's Secret: %v", err)
	}
}

func testRemovalUpsertOnly(t *testing.T) {
	secret := RancherSecret(acmeDev)
	before, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameSecret := func() error {
		s, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.UID != before.UID || string(s.Data["server"]) != string(before.Data["server"]) {
			return fmt.Errorf("Secret %s replaced or changed", secret)
		}
		return nil
	}
	n0 := e.Rancher.Change(nil, acmeDev.ID)
	e.UntilConfirmed(t, n0, "acme-dev", func() error {
		if err := e.AppsAre("acme-guestbook", "acme", acmeApps); err != nil {
			return err
		}
		return sameSecret()
	})
	delete(acmeApps, "guestbook-acme-dev")
	e.Eventually(t, 2*Interval+10*time.Second, "the Application goes (the plugin no longer lists the cluster)", func() error {
		return e.AppsAre("acme-guestbook", "acme", acmeApps)
	})
	if err := e.DepartedListed(acmeDev); err != nil {
		t.Error(err)
	}
	e.Holds(t, 3*Interval, "under upsert-only the Secret stays", sameSecret)
}
