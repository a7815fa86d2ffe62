package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
)

// testDuplicate: a second source lists an established Rancher cluster under
// the same name and server (Rancher's proxy URL). It is served once, from
// the established Rancher listing; no name conflict; /status duplicates
// lists it; no Application or Secret changes, none is created.
func testDuplicate(t *testing.T) {
	was := settledFleet(t)
	dup := StaticCluster{Name: acmeProd.Name, Server: e.Rancher.Server(acmeProd.ID), Tenant: "acme", Project: "acme"}
	duplicate := func(want bool) func() error {
		return func() error {
			doc, err := e.StatusDoc()
			if err != nil {
				return err
			}
			found := false
			for _, d := range doc.Duplicates {
				if d.Name == dup.Name && d.Source == "onprem" {
					if d.KeptName != acmeProd.Name || d.KeptSource != "rancher" || d.Reason != "server" {
						return fmt.Errorf("/status duplicate %+v, want kept rancher %s by server", d, acmeProd.Name)
					}
					found = true
				}
			}
			if found != want {
				return fmt.Errorf("/status duplicates %+v: onprem %s listed %v, want %v", doc.Duplicates, dup.Name, found, want)
			}
			for _, c := range doc.Conflicts {
				if c.Name == dup.Name {
					return fmt.Errorf("/status reports a name conflict on %s: %+v", dup.Name, c)
				}
			}
			return nil
		}
	}
	t.Run("listed by onprem with Rancher's proxy URL: served once, from Rancher", func(t *testing.T) {
		n0 := e.WriteSourceAt(t, "onprem", globexOnprem, dup)
		e.Through(t, "onprem", n0, SteadyListings, e.SameFleet(was), func() error {
			return errors.Join(e.Served("acme", acmeProd.Name, "rancher", e.Rancher.Server(acmeProd.ID), "ready")(), duplicate(true)())
		})
		if _, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), StaticSecret("onprem", dup), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s of the duplicate: %v, want not found", StaticSecret("onprem", dup), err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("onprem no longer lists it: nothing changes", func(t *testing.T) {
		// onprem's listing of it departs like any other: the duplicate is
		// reported until that departure is confirmed
		n0 := e.WriteSourceAt(t, "onprem", globexOnprem)
		e.Through(t, "onprem", n0, DepartureListings+1, e.SameFleet(was), e.Served("acme", acmeProd.Name, "rancher", e.Rancher.Server(acmeProd.ID), "ready"))
		e.Eventually(t, 2*Interval, "no duplicate left", duplicate(false))
		if err := e.SameFleet(was)(); err != nil {
			t.Fatal(err)
		}
	})
}

// testForeignClash: a cluster Secret that is not ours (no owner label) with
// the server of an established cluster. Ours keeps its UID and content,
// /status reports the clash, the foreign one is never modified.
func testForeignClash(t *testing.T) {
	was := settledFleet(t)
	ours := onpremSecret
	if _, ok := was.Secrets[ours]; !ok {
		t.Fatalf("no Secret %s", ours)
	}
	f, err := e.Kube.CoreV1().Secrets(ArgoNS).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "handmade-globex-onprem", Namespace: ArgoNS,
			Labels: map[string]string{clustersecret.LabelSecretType: "cluster"}},
		StringData: map[string]string{"name": "globex-onprem-by-hand", "server": globexOnprem.Server,
			"config": `{"tlsClientConfig":{"insecure":false}}`},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// the suite's own clean-up: later scenarios count the cluster Secrets
		if err := e.Kube.CoreV1().Secrets(ArgoNS).Delete(context.Background(), f.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete %s: %v", f.Name, err)
		}
	}()
	untouched := func() error {
		now, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), f.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if now.ResourceVersion != f.ResourceVersion {
			return fmt.Errorf("the foreign Secret %s was modified (resourceVersion %s → %s): labels %v annotations %v",
				f.Name, f.ResourceVersion, now.ResourceVersion, now.Labels, now.Annotations)
		}
		return nil
	}
	clash := func() error {
		doc, err := e.StatusDoc()
		if err != nil {
			return err
		}
		for _, c := range doc.Secrets.Clashes {
			if c.Cluster == globexOnprem.Name && c.Secret == f.Name && c.By == "server" {
				return nil
			}
		}
		return fmt.Errorf("/status secrets.clashes %+v: no clash of %s with %s by server", doc.Secrets.Clashes, globexOnprem.Name, f.Name)
	}
	n0 := e.ListingsOf(t, "onprem")
	same := e.SameFleet(was, "secret:"+f.Name)
	e.Through(t, "onprem", n0, SteadyListings, func() error { return errors.Join(same(), untouched()) }, clash)
	t.Logf("%d listings with the foreign Secret %s: ours (%s) and its Application unchanged, the clash reported", SteadyListings, f.Name, ours)
}

// testRename: a static cluster with a fixed id changes its name. Its one
// Secret is updated in place: the same object, the new name in its data; no
// second Secret for its server.
func testRename(t *testing.T) {
	secret := StaticSecret("onprem", labA)
	if err := e.WriteSource("onprem", globexOnprem, labA); err != nil {
		t.Fatal(err)
	}
	var before corev1.Secret
	e.Eventually(t, 2*Interval+10*time.Second, "the Secret of lab-a", func() error {
		s, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), secret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(s.Data["name"]) != labA.Name || string(s.Data["server"]) != labA.Server || s.Annotations[clustersecret.AnnotationClusterID] != labA.ID {
			return fmt.Errorf("Secret %s: name %q server %q cluster-id %q", secret, s.Data["name"], s.Data["server"], s.Annotations[clustersecret.AnnotationClusterID])
		}
		before = *s
		return nil
	})
	was := settledFleet(t)
	renamedInPlace := func() error {
		secrets, err := e.ClusterSecrets()
		if err != nil {
			return err
		}
		var forServer []string
		for n, s := range secrets {
			if string(s.Data["server"]) == labA.Server {
				forServer = append(forServer, n)
			}
		}
		if len(forServer) != 1 || forServer[0] != secret {
			return fmt.Errorf("Secrets for %s: %v, want only %s", labA.Server, forServer, secret)
		}
		s := secrets[secret]
		switch {
		case s.UID != before.UID:
			return fmt.Errorf("Secret %s was replaced (UID %s, was %s)", secret, s.UID, before.UID)
		case string(s.Data["name"]) != labB.Name:
			return fmt.Errorf("Secret %s: name %q, want %q", secret, s.Data["name"], labB.Name)
		case s.Annotations[clustersecret.AnnotationClusterID] != labA.ID:
			return fmt.Errorf("Secret %s: cluster-id %q, want %q", secret, s.Annotations[clustersecret.AnnotationClusterID], labA.ID)
		}
		return nil
	}
	n0 := e.WriteSourceAt(t, "onprem", globexOnprem, labB)
	e.Through(t, "onprem", n0, SteadyListings, e.SameFleet(was, "secret:"+secret), func() error {
		return errors.Join(renamedInPlace(), e.Served("", labB.Name, "onprem", labB.Server, "ready")())
	})
	if _, err := e.Kube.CoreV1().Secrets(ArgoNS).Get(context.Background(), StaticSecret("onprem", labB), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Secret under the new name's hash %s: %v, want not found", StaticSecret("onprem", labB), err)
	}
}

// testNameCollision: sources aws and aws-prod list prod-eu and eu, whose
// source-cluster names are both aws-prod-eu: two Secrets, each with its own
// server, neither overwritten by the other.
func testNameCollision(t *testing.T) {
	sa, sb := StaticSecret("aws", awsProdEU), StaticSecret("aws-prod", awsEU)
	if sa == sb {
		t.Fatalf("one Secret name %s for both clusters", sa)
	}
	t.Logf("Secrets %s (aws prod-eu) and %s (aws-prod eu)", sa, sb)
	if err := errors.Join(e.WriteSource("aws", awsProdEU), e.WriteSource("aws-prod", awsEU)); err != nil {
		t.Fatal(err)
	}
	globexApps["monitoring-prod-eu"] = sa
	globexApps["monitoring-eu"] = sb
	both := func() error {
		secrets, err := e.ClusterSecrets()
		if err != nil {
			return err
		}
		var errs []error
		for _, w := range []struct {
			secret, source string
			c              StaticCluster
		}{{sa, "aws", awsProdEU}, {sb, "aws-prod", awsEU}} {
			s, ok := secrets[w.secret]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("no Secret %s", w.secret))
			case string(s.Data["server"]) != w.c.Server || string(s.Data["name"]) != w.c.Name || s.Labels[clustersecret.LabelSource] != w.source:
				errs = append(errs, fmt.Errorf("Secret %s: name %q server %q source %q, want %s %s %s", w.secret,
					s.Data["name"], s.Data["server"], s.Labels[clustersecret.LabelSource], w.c.Name, w.c.Server, w.source))
			}
		}
		return errors.Join(errs...)
	}
	e.Eventually(t, 2*Interval+10*time.Second, "two Secrets, each with its own server", both)
	was := settledFleet(t)
	n0 := e.ListingsOf(t, "aws-prod")
	e.Through(t, "aws-prod", n0, SteadyListings, e.SameFleet(was), both)
}
