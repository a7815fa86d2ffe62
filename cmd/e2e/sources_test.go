package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
)

// The static fleet of the scenarios below. Every static cluster of tenant
// globex gets an Application of globex-monitoring (Argo CD's cluster
// generator over our Secrets).
var (
	// globexOnprem is the onprem cluster as the start writes it (onprem).
	globexOnprem = staticCluster{Name: "globex-onprem", Server: "https://globex-onprem.example.com",
		Tenant: "globex", Project: "globex", Labels: map[string]string{"env": "prod"}}
	// labA has a fixed identity: the rename scenario renames it labB.
	labA = staticCluster{Name: "lab-a", ID: "lab-0001", Server: "https://lab.example.com"}
	labB = staticCluster{Name: "lab-b", ID: "lab-0001", Server: "https://lab.example.com"}
	// awsProdEU (source aws) and awsEU (source aws-prod) join into the same
	// "aws-prod-eu"; their Secrets must still be two.
	awsProdEU = staticCluster{Name: "prod-eu", Server: "https://prod-eu.aws.example.com", Tenant: "globex", Project: "globex"}
	awsEU     = staticCluster{Name: "eu", Server: "https://eu.aws-prod.example.com", Tenant: "globex", Project: "globex"}
	// stores are the fleet source's clusters (the mass drop).
	stores = func() []staticCluster {
		var out []staticCluster
		for i := 1; i <= 4; i++ {
			out = append(out, staticCluster{Name: fmt.Sprintf("store-%d", i), Server: fmt.Sprintf("https://store-%d.example.com", i),
				Tenant: "globex", Project: "globex"})
		}
		return out
	}()
)

// staticSecret is the name of a static cluster's Secret.
func staticSecret(source string, c staticCluster) string {
	id := c.ID
	if id == "" {
		id = c.Name
	}
	return clustersecret.SecretName("cluster", source, c.Name, id)
}

// fleet is every Application of the suite's ApplicationSets and every
// cluster Secret at one moment.
type fleet struct {
	apps    map[string]app // by "<ApplicationSet>/<name>"
	secrets map[string]corev1.Secret
}

func fleetNow() (*fleet, error) {
	f := &fleet{apps: map[string]app{}}
	for _, as := range []string{"acme-guestbook", "globex-monitoring"} {
		apps, err := e.apps(as)
		if err != nil {
			return nil, err
		}
		for n, a := range apps {
			f.apps[as+"/"+n] = a
		}
	}
	secrets, err := e.clusterSecrets()
	if err != nil {
		return nil, err
	}
	f.secrets = secrets
	return f, nil
}

// settledFleet waits until the Applications match the Secrets (appsAre
// for both ApplicationSets) and returns the fleet.
func settledFleet(t *testing.T) *fleet {
	t.Helper()
	eventually(t, 2*interval+20*time.Second, "Applications of both ApplicationSets as expected", func() error {
		return errors.Join(appsAre("acme-guestbook", "acme", acmeApps), appsAre("globex-monitoring", "globex", globexApps))
	})
	f, err := fleetNow()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// sameFleet returns a check that every Application of was is still there,
// the same object (UID) with the same destination and project, that every
// cluster Secret of was is still there, the same object with the same data,
// annotations and labels (the phase and state labels aside), and that no
// Application or cluster Secret was added. skip names objects the scenario
// changes ("app:<ApplicationSet>/<name>", "secret:<name>"): they are not
// compared.
func sameFleet(was *fleet, skip ...string) func() error {
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[s] = true
	}
	withoutPhase := func(m map[string]string) map[string]string {
		m = maps.Clone(m)
		delete(m, clustersecret.LabelPhase)
		delete(m, clustersecret.LabelState)
		return m
	}
	return func() error {
		now, err := fleetNow()
		if err != nil {
			return err
		}
		var errs []error
		for k, a := range was.apps {
			if skipped["app:"+k] {
				continue
			}
			switch b, ok := now.apps[k]; {
			case !ok:
				errs = append(errs, fmt.Errorf("Application %s was deleted", k))
			case b != a:
				errs = append(errs, fmt.Errorf("Application %s changed or was replaced: %+v, was %+v", k, b, a))
			}
		}
		for k := range now.apps {
			if _, ok := was.apps[k]; !ok && !skipped["app:"+k] {
				errs = append(errs, fmt.Errorf("Application %s was created", k))
			}
		}
		for n, s := range was.secrets {
			if skipped["secret:"+n] {
				continue
			}
			c, ok := now.secrets[n]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("Secret %s was deleted", n))
			case c.UID != s.UID:
				errs = append(errs, fmt.Errorf("Secret %s was replaced (UID %s, was %s)", n, c.UID, s.UID))
			case !maps.EqualFunc(c.Data, s.Data, bytes.Equal):
				errs = append(errs, fmt.Errorf("Secret %s: data changed (name %q server %q, were %q %q)", n, c.Data["name"], c.Data["server"], s.Data["name"], s.Data["server"]))
			case !maps.Equal(withoutPhase(c.Labels), withoutPhase(s.Labels)):
				errs = append(errs, fmt.Errorf("Secret %s: labels %v, were %v", n, c.Labels, s.Labels))
			case !maps.Equal(c.Annotations, s.Annotations):
				errs = append(errs, fmt.Errorf("Secret %s: annotations %v, were %v", n, c.Annotations, s.Annotations))
			}
		}
		for n := range now.secrets {
			if _, ok := was.secrets[n]; !ok && !skipped["secret:"+n] {
				errs = append(errs, fmt.Errorf("Secret %s was created", n))
			}
		}
		return errors.Join(errs...)
	}
}

// listingsOf returns how many listings of source our service made.
func listingsOf(t *testing.T, source string) int {
	t.Helper()
	var n int
	eventually(t, 10*time.Second, "listings of "+source, func() (err error) {
		n, err = e.listings(source)
		return err
	})
	return n
}

// through checks, through listings n0+1 .. n0+listings of source and one
// listing more, that same holds (fatal at once), and that want holds from
// the second listing on.
func through(t *testing.T, source string, n0, listings int, same, want func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(listings+3) * interval * 2)
	for {
		n, err := e.listings(source)
		if err != nil {
			t.Fatal(err)
		}
		if err := same(); err != nil {
			t.Fatalf("after %d listing(s) of %s: %v\n%s", n-n0, source, err, e.logs())
		}
		if n >= n0+2 && want != nil {
			if err := want(); err != nil {
				t.Fatalf("after %d listing(s) of %s: %v\n%s", n-n0, source, err, e.logs())
			}
		}
		if n > n0+listings {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d listings, want %d, by %s", source, n-n0, listings+1, deadline.Format(time.TimeOnly))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// writeSourceAt writes a static source's file and returns the count of its
// listings before the change.
func writeSourceAt(t *testing.T, source string, clusters ...staticCluster) int {
	t.Helper()
	n0 := listingsOf(t, source)
	if err := e.writeSource(source, clusters...); err != nil {
		t.Fatal(err)
	}
	return n0
}

// served returns a check that the plugin answer for tenant has the cluster
// from source, with server and phase.
func served(tenant, name, source, server, phase string) func() error {
	return func() error {
		ps, err := e.params(map[string]string{"tenant": tenant})
		if err != nil {
			return err
		}
		p, ok := ps[name]
		switch {
		case !ok:
			return fmt.Errorf("%s is not in the plugin answer for tenant %s", name, tenant)
		case p.Source != source || p.Server != server || p.Phase != phase:
			return fmt.Errorf("plugin answer for %s: %+v, want source %s server %s phase %s", name, p, source, server, phase)
		}
		return nil
	}
}

// testCAFetchFailure: a served static cluster becomes not ready, as a
// cluster whose CA could not be fetched is listed. It keeps its last good
// rendering: in the answer, its Secret and Application as they were, /status
// kept names it. Then it is ready again.
func testCAFetchFailure(t *testing.T) {
	was := settledFleet(t)
	const reason = `fetch CA of https://globex-onprem.example.com: Get "https://globex-onprem.example.com/ca.crt": dial tcp: lookup globex-onprem.example.com: no such host`
	notReady := globexOnprem
	notReady.Ready, notReady.NotReadyReason = new(bool), reason
	keptIs := func(want bool) func() error {
		return func() error {
			doc, err := e.statusDoc()
			if err != nil {
				return err
			}
			for _, k := range doc.Kept {
				if k.Name == globexOnprem.Name {
					if !want {
						return fmt.Errorf("/status kept still lists %+v", k)
					}
					if k.Source != "onprem" || k.Reason != reason {
						return fmt.Errorf("/status kept: %+v, want source onprem, reason %q", k, reason)
					}
					return nil
				}
			}
			if want {
				return fmt.Errorf("/status kept %+v: no %s", doc.Kept, globexOnprem.Name)
			}
			return nil
		}
	}
	inAnswer := served("globex", globexOnprem.Name, "onprem", globexOnprem.Server, "ready")
	t.Run("not ready: its CA could not be fetched", func(t *testing.T) {
		n0 := writeSourceAt(t, "onprem", notReady)
		through(t, "onprem", n0, steadyListings, sameFleet(was), func() error {
			return errors.Join(inAnswer(), keptIs(true)())
		})
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("ready again", func(t *testing.T) {
		n0 := writeSourceAt(t, "onprem", globexOnprem)
		through(t, "onprem", n0, 2, sameFleet(was), func() error {
			return errors.Join(inAnswer(), keptIs(false)())
		})
	})
}
