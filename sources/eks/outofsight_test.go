package eks

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeaws "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/aws"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// twoAccounts is testConfig with account B, reached through a role of its
// own, beside A.
func twoAccounts(f *fakeAWS) Config {
	cfg := f.testConfig()
	cfg.Accounts = append(cfg.Accounts, Account{ID: acctB, RoleARN: "arn:aws:iam::" + acctB + ":role/discovery"})
	return cfg
}

// refuseRoles answers AssumeRole of the roles of accounts as STS does when
// the role's trust policy no longer lets the caller in.
func refuseRoles(resp *fakeResp, accounts ...string) func(fakeReq) *fakeResp {
	return func(r fakeReq) *fakeResp {
		if r.Op != "AssumeRole" {
			return nil
		}
		for _, a := range accounts {
			if strings.Contains(r.Role, ":"+a+":") {
				return resp
			}
		}
		return nil
	}
}

// stsDenied is STS's answer to an AssumeRole the role's trust policy
// refuses.
var stsDenied = &fakeResp{Status: http.StatusForbidden, ErrType: "AccessDenied",
	Body: `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>AccessDenied</Code>` +
		`<Message>User: arn:aws:iam::111111111111:user/base is not authorized to perform: sts:AssumeRole on resource: ` +
		`arn:aws:iam::222222222222:role/discovery</Message></Error><RequestId>4e5b2d3f-0000-4000-8000-000000000001</RequestId></ErrorResponse>`}

// TestRefusedRoleIsOutOfSight: an account whose role STS refuses, while
// another account's role is assumed, is left out of the listing and of the
// accounts it covered, with a warning and the failure counted; every role
// refused, or a role failing otherwise, fails the listing as before.
func TestRefusedRoleIsOutOfSight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hook     func(fakeReq) *fakeResp
		clusters []string
		covered  []string
		err      string
	}{
		{name: "every role assumed", clusters: []string{"a-000", "a-001", "b-000", "b-001"}, covered: []string{acctA, acctB}},
		{name: "B's role refused: A listed, B out of sight", hook: refuseRoles(stsDenied, acctB),
			clusters: []string{"a-000", "a-001"}, covered: []string{acctA}},
		{name: "every role refused: the listing fails", hook: refuseRoles(stsDenied, acctA, acctB),
			err: "assume role arn:aws:iam::222222222222:role/discovery"},
		{name: "STS fails B's role otherwise: the listing fails", err: "StatusCode: 500",
			hook: refuseRoles(&fakeResp{Status: http.StatusInternalServerError, ErrType: "InternalFailure"}, acctB)},
		{name: "the caller's own credentials expired (B's role asked first): the listing fails, no account is out of sight", err: "ExpiredToken",
			hook: refuseRoles(&fakeResp{Status: http.StatusForbidden, ErrType: "ExpiredToken"}, acctB)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.add(acctA, regionEU, names("a", 2)...)
			f.add(acctB, regionEU, names("b", 2)...)
			f.Hook = tc.hook
			var logs testlog.Buffer
			cfg := twoAccounts(f)
			cfg.Default()
			reg := prometheus.NewRegistry()
			s, err := newSource(&cfg, sources.SourceOptions{Name: "eks", Registerer: reg, Logger: slog.New(slog.NewJSONHandler(&logs, nil))},
				hooks{awsConfig: baseAWSConfig(), httpClient: f.Client()})
			require.NoError(t, err)

			got, covered, err := s.ClustersAndAccounts(context.Background())
			for _, secret := range []string{"base-secret-key", baseKey, fakeaws.FixtureSecret} {
				assert.NotContains(t, logs.String(), secret)
				if err != nil {
					assert.NotContains(t, err.Error(), secret)
				}
			}
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			var gotNames []string
			for _, c := range got {
				gotNames = append(gotNames, c.Name)
			}
			slices.Sort(gotNames)
			assert.Equal(t, tc.clusters, gotNames)
			assert.Equal(t, tc.covered, covered)
			refused := float64(0)
			if len(tc.covered) < 2 {
				refused = 1
				assert.Contains(t, logs.String(), `"msg":"account out of sight: its role was refused`)
				assert.Contains(t, logs.String(), `"account":"222222222222"`)
			}
			assert.Equal(t, refused, counter(t, reg, "argocd_cluster_discovery_eks_errors_total",
				map[string]string{"kind": "auth", "operation": opAssumeRole}))
		})
	}
}

// switchable is the source an inventory lists: the EKS source of the
// moment, as a restarted process builds it again (no credentials cached).
type switchable struct {
	mu sync.Mutex
	s  *Source
}

func (w *switchable) set(s *Source) { w.mu.Lock(); defer w.mu.Unlock(); w.s = s }
func (w *switchable) get() *Source  { w.mu.Lock(); defer w.mu.Unlock(); return w.s }

func (w *switchable) Clusters(ctx context.Context) ([]sources.Cluster, error) {
	return w.get().Clusters(ctx)
}

func (w *switchable) ClustersAndAccounts(ctx context.Context) ([]sources.Cluster, []string, error) {
	return w.get().ClustersAndAccounts(ctx)
}

// TestRefusedAccountIsHeldByTheInventory: the inventory, listing through
// the EKS source, keeps serving the clusters of an account whose role is
// refused, their departure held until an operator acknowledges it, while
// the other account's changes go on. (The whole listing failed before: a
// new cluster of account A waited for B's role to come back.)
func TestRefusedAccountIsHeldByTheInventory(t *testing.T) {
	f := newFake(t)
	f.add(acctA, regionEU, names("a", 2)...)
	f.add(acctB, regionEU, names("b", 2)...)
	cfg := twoAccounts(f)
	first, _ := f.newSource(t, cfg, nil)
	src := &switchable{s: first}
	// maxFraction 1: B's clusters are half of them, and held for their
	// account alone, not as a mass drop
	inv, err := inventory.New([]inventory.SourceSpec{{Name: "eks", Provider: sources.ProviderEKS, Kind: sources.KindCloud, Source: src,
		Interval: time.Hour, Timeout: 30 * time.Second}},
		inventory.Options{Departure: inventory.Departure{AfterListings: 1, GracePeriod: -1, MaxFraction: 1},
			Acknowledged: func(string, string) bool { return false }, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	servedNames := func() []string {
		var out []string
		for _, c := range inv.Snapshot().Clusters {
			out = append(out, c.Name)
		}
		return out
	}
	require.NoError(t, inv.RefreshAll(t.Context()))
	require.Equal(t, []string{"a-000", "a-001", "b-000", "b-001"}, servedNames())

	f.Hook = refuseRoles(stsDenied, acctB)
	f.add(acctA, regionEU, fakeCluster{Name: "a-new"})
	restarted, _ := f.newSource(t, cfg, nil)
	src.set(restarted)
	for i := range 3 {
		require.NoError(t, inv.RefreshAll(t.Context()), "listing %d", i+1)
		assert.Equal(t, []string{"a-000", "a-001", "a-new", "b-000", "b-001"}, servedNames(), "listing %d", i+1)
	}
	st, _ := inv.Snapshot().Source("eks")
	assert.Equal(t, 2, st.HeldDepartures, "B's clusters: held, waiting for an acknowledgement")
}
