package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/e2e/fixture"
	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
)

// testClaimedTenant: a Rancher cluster whose owner labels it with a tenant
// that no rule admits from the rancher source (umbrella), and with acme's
// project, is listed not ready: /status says why, the answer for acme and
// for umbrella leaves it out, and it gets no Secret, through listings.
// Every other Application stays as it was.
func testClaimedTenant(t *testing.T) {
	was := settledFleet(t)
	claimer := fakerancher.Cluster{ID: "c-m-umbr0001", Name: "umbrella-prod", State: "active",
		Labels: map[string]string{"tenant": "umbrella", "argocd-project": "acme", "env": "prod"}}
	n0 := e.Rancher.Change([]fakerancher.Cluster{claimer})
	defer e.Rancher.Remove(claimer.ID)
	check := func() error {
		doc, err := e.StatusDoc()
		if err != nil {
			return err
		}
		why := ""
		for _, u := range doc.Unserved {
			if u.ID == claimer.ID {
				why = u.Reason
			}
		}
		if !strings.Contains(why, `tenant "umbrella" is the cluster owner's label or tag`) {
			return fmt.Errorf("/status unserved %s: %q", claimer.ID, why)
		}
		var errs []error
		for _, tenant := range []string{"acme", "umbrella"} {
			ps, err := e.Params(map[string]string{"tenant": tenant})
			if err != nil {
				return err
			}
			if _, ok := ps[claimer.Name]; ok {
				errs = append(errs, fmt.Errorf("the answer for tenant %s lists %s", tenant, claimer.Name))
			}
		}
		secrets, err := e.ClusterSecrets()
		if err != nil {
			return err
		}
		if _, ok := secrets[RancherSecret(claimer)]; ok {
			errs = append(errs, fmt.Errorf("a Secret for %s", claimer.Name))
		}
		return errors.Join(errs...)
	}
	e.Eventually(t, Interval+10*time.Second, "the claim refused", check)
	e.Through(t, "rancher", n0, SteadyListings, e.SameFleet(was), check)
}
