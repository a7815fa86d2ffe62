package inventory

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestOneClusterIsServedOnce(t *testing.T) {
	withProvider := func(c sources.Cluster, cloudID string) sources.Cluster {
		c.CloudID = cloudID
		return c
	}
	// the same EKS cluster seen by Rancher (hosted, through its proxy) and by
	// the EKS source; and two static entries pointing at one server
	rancherEKS := withProvider(cluster("rancher-payments"), sources.EKSCloudID("111", "eu-west-1", "payments"))
	rancherEKS.Server = "https://rancher.example.com/k8s/clusters/c-7qgnz"
	eksPayments := withProvider(cluster("payments"), sources.EKSCloudID("111", "EU-WEST-1", "payments"))
	sameServerA, sameServerB := cluster("alias-a"), cluster("alias-b")
	sameServerB.Server = "https://ALIAS-A.example.com.:443/" // another spelling of alias-a's server

	specs := func() []SourceSpec {
		r := spec("rancher", &scripted{steps: []step{{clusters: []sources.Cluster{rancherEKS}}}})
		r.Provider, r.Kind = sources.ProviderRancher, sources.KindManager
		e := spec("eks", &scripted{steps: []step{{clusters: []sources.Cluster{eksPayments}}}})
		e.Provider, e.Kind = sources.ProviderEKS, sources.KindCloud
		s := spec("files", &scripted{steps: []step{{clusters: []sources.Cluster{sameServerA, sameServerB}}}})
		return []SourceSpec{r, e, s}
	}
	for _, tc := range []struct {
		prefer Preference
		served string
		dup    Duplicate
	}{
		{PreferCloud, "payments", Duplicate{Name: "rancher-payments", Source: "rancher", ID: "rancher-payments", KeptName: "payments", KeptSource: "eks", Reason: "cloudID"}},
		{PreferRancher, "rancher-payments", Duplicate{Name: "payments", Source: "eks", ID: "payments", KeptName: "rancher-payments", KeptSource: "rancher", Reason: "cloudID"}},
	} {
		t.Run(string(tc.prefer), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			inv, err := New(specs(), Options{Prefer: tc.prefer, Registerer: reg})
			require.NoError(t, err)
			require.NoError(t, inv.RefreshAll(context.Background()))
			snap := inv.Snapshot()
			assert.Equal(t, []string{"alias-a", tc.served}, names(snap))
			assert.Equal(t, []Duplicate{
				{Name: "alias-b", Source: "files", ID: "alias-b", KeptName: "alias-a", KeptSource: "files", Reason: "server"},
				tc.dup,
			}, snap.Duplicates)
			assert.True(t, snap.Present(tc.dup.Name), "a duplicate is not gone")
			assert.True(t, snap.Present("alias-b"))
			assert.False(t, snap.Present("never-listed"))
			assert.Equal(t, 2.0, testutil.ToFloat64(inv.metrics.duplicates))
			assert.Len(t, inv.Status().Duplicates, 2)
		})
	}
	_, err := New(nil, Options{Prefer: "both"})
	assert.ErrorContains(t, err, "prefer")
}

// TestDedupeRanksByKind checks which of two listings of one cluster is
// served: the listing of the source whose kind the preference ranks first,
// whatever the provider's name and whichever source comes first by name.
func TestDedupeRanksByKind(t *testing.T) {
	type source struct {
		provider sources.Provider
		kind     sources.Kind
	}
	var (
		eks     = source{sources.ProviderEKS, sources.KindCloud}
		aks     = source{sources.ProviderAKS, sources.KindCloud}
		rancher = source{sources.ProviderRancher, sources.KindManager}
		static  = source{sources.ProviderStatic, sources.KindFile}
		toy     = source{"toy", sources.KindCloud} // a provider the package has never heard of
		noKind  = source{"mystery", ""}
		oddKind = source{"odd", "satellite"}
	)
	for _, tc := range []struct {
		name        string
		prefer      Preference
		kept, other source
	}{
		{"cloud: eks over rancher", PreferCloud, eks, rancher},
		{"cloud: aks over static", PreferCloud, aks, static},
		{"cloud: static over rancher", PreferCloud, static, rancher},
		{"cloud: an unknown provider of kind cloud is cloud", PreferCloud, toy, rancher},
		{"cloud: toy over static", PreferCloud, toy, static},
		{"cloud: no kind ranks last", PreferCloud, rancher, noKind},
		{"cloud: an unknown kind ranks last", PreferCloud, rancher, oddKind},
		{"rancher: rancher over eks", PreferRancher, rancher, eks},
		{"rancher: rancher over static", PreferRancher, rancher, static},
		{"rancher: static over aks", PreferRancher, static, aks},
		{"rancher: static over toy", PreferRancher, static, toy},
		{"rancher: toy over no kind", PreferRancher, toy, noKind},
	} {
		for _, keptFirst := range []bool{true, false} { // the tie-break by source name must not decide
			keptName, otherName := "a", "b"
			if !keptFirst {
				keptName, otherName = otherName, keptName
			}
			t.Run(fmt.Sprintf("%s/kept is %s", tc.name, keptName), func(t *testing.T) {
				specs := make([]SourceSpec, 2)
				for i, s := range []struct {
					name string
					source
				}{{keptName, tc.kept}, {otherName, tc.other}} {
					c := cluster("x-" + s.name) // the same server under two names
					c.Server = "https://x.example.com"
					specs[i] = spec(s.name, &scripted{steps: []step{{clusters: []sources.Cluster{c}}}})
					specs[i].Provider, specs[i].Kind = s.provider, s.kind
				}
				inv, err := New(specs, Options{Prefer: tc.prefer})
				require.NoError(t, err)
				require.NoError(t, inv.RefreshAll(context.Background()))
				snap := inv.Snapshot()
				assert.Equal(t, []string{"x-" + keptName}, names(snap))
				assert.Equal(t, []Duplicate{{Name: "x-" + otherName, Source: otherName, ID: "x-" + otherName, KeptName: "x-" + keptName, KeptSource: keptName, Reason: "server"}},
					snap.Duplicates)
			})
		}
	}
}

func TestKindOrder(t *testing.T) {
	for _, tc := range []struct {
		prefer Preference
		want   []sources.Kind // best first; the last is any kind not in the order
	}{
		{PreferCloud, []sources.Kind{sources.KindCloud, sources.KindFile, sources.KindManager, ""}},
		{PreferRancher, []sources.Kind{sources.KindManager, sources.KindFile, sources.KindCloud, "satellite"}},
	} {
		t.Run(string(tc.prefer), func(t *testing.T) {
			order := kindOrder(tc.prefer)
			for i, k := range tc.want {
				assert.Equal(t, i, kindRank(order, k), "kind %q", k)
			}
			assert.Equal(t, kindRank(order, ""), kindRank(order, "satellite"), "empty and unknown kinds rank alike, last")
		})
	}
}

// TestAnotherSpellingOfAServer: a newcomer whose server is another
// spelling (case, trailing dot, default port) of a served one is a
// duplicate; two clusters both established under two spellings (served
// before spellings were compared) both stay served.
func TestAnotherSpellingOfAServer(t *testing.T) {
	a, b := cluster("a"), cluster("b")
	a.Server, b.Server = "https://api.example.com", "https://API.example.com.:443"
	at := time.Unix(1000, 0)
	kind := func(*sources.Cluster) sources.Kind { return sources.KindFile }
	for _, tc := range []struct {
		name        string
		established map[string]bool
		kept        []string
	}{
		{"b is a newcomer", map[string]bool{"a": true}, []string{"a"}},
		{"both are new", map[string]bool{}, []string{"a"}},
		{"both were served", map[string]bool{"a": true, "b": true}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, cb := a, b
			est := func(c *sources.Cluster) time.Time {
				if tc.established[c.Name] {
					return at
				}
				return time.Time{}
			}
			kept, _ := dedupe([]*sources.Cluster{&cb, &ca}, PreferCloud, est, kind)
			var got []string
			for _, c := range kept {
				got = append(got, c.Name)
			}
			assert.ElementsMatch(t, tc.kept, got)
		})
	}
}

// TestServedClusterMovingOntoAnotherOnesServer: when the listing of a
// served cluster moves it onto the server another served cluster serves
// (a Rancher cluster's owner writing another's endpoint as its own), the
// one serving it keeps it and the mover keeps its last rendering, reported
// as kept: both stay in the answer (dropping either would delete its
// Applications), on two servers, whichever of them was established first,
// whatever their names and sources. Once the server is free (its holder
// moved elsewhere), the move is taken.
func TestServedClusterMovingOntoAnotherOnesServer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		twoSources bool
		firstMoves bool // the one established first takes the other's server
		bothMove   bool // both move onto one new server in one listing
	}{
		{name: "the later one moves onto the earlier's server"},
		{name: "the earlier one moves onto the later's server", firstMoves: true},
		{name: "listed by two sources", twoSources: true},
		{name: "listed by two sources, the earlier one moves", twoSources: true, firstMoves: true},
		{name: "both move onto one new server", bothMove: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s1, s2 := &listings{}, &listings{}
			inv := newLifecycleInventory(t, Departure{AfterListings: 1}, time.Second, s1, s2)
			first, later := inPhase("z-first", sources.PhaseReady), inPhase("a-later", sources.PhaseReady) // by name, later ranks first
			laterSource := "s1"
			if tc.twoSources {
				laterSource = "s2"
			}
			list := func(withLater bool) {
				t.Helper()
				one, two := []sources.Cluster{first}, []sources.Cluster{}
				switch {
				case withLater && tc.twoSources:
					two = append(two, later)
				case withLater:
					one = append(one, later)
				}
				s1.set(one...)
				s2.set(two...)
				require.NoError(t, inv.RefreshAll(context.Background()))
			}
			list(false)
			list(true)
			require.Equal(t, []string{"a-later", "z-first"}, names(inv.Snapshot()), "two clusters, both established")
			before := serversOf(inv.Snapshot())

			mover, holder, moverSource, target := later, first, laterSource, before[first.Name]
			switch {
			case tc.bothMove:
				target = "https://shared.example.com"
				first.Server, later.Server = target, target
				mover, holder = first, later // the listing is taken in name order: a-later claims it first
			case tc.firstMoves:
				mover, holder, moverSource, target = first, later, "s1", before[later.Name]
				first.Server = target
			default:
				later.Server = target
			}
			list(true)
			snap := inv.Snapshot()
			want := maps.Clone(before)
			if tc.bothMove {
				want[holder.Name] = target
			}
			assert.Equal(t, want, serversOf(snap), "both served, on two servers: the mover on its last one")
			require.Len(t, snap.Kept, 1)
			assert.Equal(t, []string{mover.Name, moverSource}, []string{snap.Kept[0].Name, snap.Kept[0].Source})
			assert.Contains(t, snap.Kept[0].Reason, "cluster "+holder.Key())
			assert.Empty(t, snap.Duplicates)
			assert.Empty(t, snap.Conflicts)

			if tc.bothMove {
				return
			}
			// the holder moves elsewhere: the server is free, the move is
			// taken (at the latest by the listing after)
			if holder.Name == first.Name {
				first.Server = "https://elsewhere.example.com"
			} else {
				later.Server = "https://elsewhere.example.com"
			}
			list(true)
			list(true)
			snap = inv.Snapshot()
			assert.Equal(t, map[string]string{mover.Name: target, holder.Name: "https://elsewhere.example.com"}, serversOf(snap))
			assert.Empty(t, snap.Kept)
		})
	}
}

// serversOf returns name → server of the answer's clusters.
func serversOf(snap *Snapshot) map[string]string {
	out := map[string]string{}
	for _, c := range snap.Clusters {
		out[c.Name] = c.Server
	}
	return out
}

// TestEstablishedClustersLearningOneCloudIDStayServed: a Rancher listing
// of a hosted cluster without a cloud id (its credential unreadable) and
// the cloud's own listing are both served and established; once Rancher
// reads the credential again, both name the same cloud id, and neither
// leaves the 200 (its Applications would be deleted): a cloud id makes a
// duplicate of a newcomer only.
func TestEstablishedClustersLearningOneCloudIDStayServed(t *testing.T) {
	manager, cloud := &listings{}, &listings{}
	inv := newLifecycleInventory(t, Departure{}, time.Second, manager, cloud)
	cloudID := sources.EKSCloudID("111", "eu-west-1", "payments")
	viaManager := inPhase("rancher-payments", sources.PhaseReady)
	viaManager.Server = "https://rancher.example.com/k8s/clusters/c-1" // no CloudID yet (credential unreadable)
	viaCloud := inPhase("payments", sources.PhaseReady)
	viaCloud.CloudID, viaCloud.Account = cloudID, "111"
	manager.set(viaManager)
	cloud.set(viaCloud)
	require.NoError(t, inv.RefreshAll(context.Background()))
	require.NoError(t, inv.RefreshAll(context.Background()))
	require.Equal(t, []string{"payments", "rancher-payments"}, names(inv.Snapshot()))

	viaManager.CloudID, viaManager.Account = cloudID, "111" // Rancher can read its credential again
	manager.set(viaManager)
	require.NoError(t, inv.RefreshAll(context.Background()))
	assert.Equal(t, []string{"payments", "rancher-payments"}, names(inv.Snapshot()),
		"both established: neither may leave the 200 without a confirmed departure")
}
