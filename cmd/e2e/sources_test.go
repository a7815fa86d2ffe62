package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
)

// The static fleet of the scenarios below. Every static cluster of tenant
// globex gets an Application of globex-monitoring (Argo CD's cluster
// generator over our Secrets).
var (
	// globexOnprem is the onprem cluster as the start writes it (onprem).
	globexOnprem = StaticCluster{Name: "globex-onprem", Server: "https://globex-onprem.example.com",
		Tenant: "globex", Project: "globex", Labels: map[string]string{"env": "prod"}}
	// labA has a fixed identity: the rename scenario renames it labB.
	labA = StaticCluster{Name: "lab-a", ID: "lab-0001", Server: "https://lab.example.com"}
	labB = StaticCluster{Name: "lab-b", ID: "lab-0001", Server: "https://lab.example.com"}
	// awsProdEU (source aws) and awsEU (source aws-prod) join into the same
	// "aws-prod-eu"; their Secrets must still be two.
	awsProdEU = StaticCluster{Name: "prod-eu", Server: "https://prod-eu.aws.example.com", Tenant: "globex", Project: "globex"}
	awsEU     = StaticCluster{Name: "eu", Server: "https://eu.aws-prod.example.com", Tenant: "globex", Project: "globex"}
	// stores are the fleet source's clusters (the mass drop).
	stores = func() []StaticCluster {
		var out []StaticCluster
		for i := 1; i <= 4; i++ {
			out = append(out, StaticCluster{Name: fmt.Sprintf("store-%d", i), Server: fmt.Sprintf("https://store-%d.example.com", i),
				Tenant: "globex", Project: "globex"})
		}
		return out
	}()
)

// settledFleet waits until the Applications are those the scenarios of
// TestEndToEnd expect by now (acmeApps, globexApps: AppsAre for both
// ApplicationSets) and returns the fleet.
func settledFleet(t *testing.T) *Fleet {
	t.Helper()
	e.Eventually(t, 2*Interval+20*time.Second, "Applications of both ApplicationSets as expected", func() error {
		return errors.Join(e.AppsAre("acme-guestbook", "acme", acmeApps), e.AppsAre("globex-monitoring", "globex", globexApps))
	})
	f, err := e.FleetNow()
	if err != nil {
		t.Fatal(err)
	}
	return f
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
			doc, err := e.StatusDoc()
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
	inAnswer := e.Served("globex", globexOnprem.Name, "onprem", globexOnprem.Server, "ready")
	t.Run("not ready: its CA could not be fetched", func(t *testing.T) {
		n0 := e.WriteSourceAt(t, "onprem", notReady)
		e.Through(t, "onprem", n0, SteadyListings, e.SameFleet(was), func() error {
			return errors.Join(inAnswer(), keptIs(true)())
		})
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("ready again", func(t *testing.T) {
		n0 := e.WriteSourceAt(t, "onprem", globexOnprem)
		e.Through(t, "onprem", n0, 2, e.SameFleet(was), func() error {
			return errors.Join(inAnswer(), keptIs(false)())
		})
	})
}
