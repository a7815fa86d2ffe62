package clustersecret

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

const owner = "fleet-a"

var (
	t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	// caA and caB are two different base64 PEM bundles (content does not
	// matter to the plan).
	caA = "Q0EtQQ=="
	caB = "Q0EtQg=="
)

func opts() *Options {
	return &Options{Namespace: "argocd", OwnerID: owner, Prefix: "cluster"}
}

func cl(name string, mut ...func(*sources.Cluster)) sources.Cluster {
	c := sources.Cluster{Source: "fleet", Provider: sources.ProviderStatic, Name: name, Server: "https://" + name + ".example.com",
		CA: sources.CAFromData(caA), Tenant: "acme", Region: "eu-west-1", Labels: map[string]string{"env": "prod"}, Ready: true,
		Auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: name, RoleARN: "arn:aws:iam::1:role/argocd"}}}
	for _, m := range mut {
		m(&c)
	}
	return c
}

func noToken(sources.SecretRef) (string, error) { return "", errors.New("no token in this test") }

func desired(t *testing.T, cs ...sources.Cluster) []Desired {
	t.Helper()
	var out []Desired
	for i := range cs {
		d, err := Build(&cs[i], opts(), noToken)
		require.NoError(t, err)
		out = append(out, d)
	}
	return out
}

// current returns the Secret the cluster's desired Secret would be once
// written (what the API server would give back), optionally changed.
func current(t *testing.T, c sources.Cluster, mut ...func(*corev1.Secret)) corev1.Secret {
	t.Helper()
	s := *desired(t, c)[0].Secret.DeepCopy()
	s.UID, s.ResourceVersion = types.UID("uid-"+c.Name), "1"
	for _, m := range mut {
		m(&s)
	}
	return s
}

// sn is the Secret name of cluster name in source fleet (its ID is its
// name, as for static clusters).
func sn(name string) string { return SecretName("cluster", "fleet", name, name) }

// snapshot serves cs; listed are listed but not served.
func snapshot(cs []sources.Cluster, states ...inventory.SourceState) *inventory.Snapshot {
	return snapshotWith(cs, nil, states...)
}

func snapshotWith(cs, listed []sources.Cluster, states ...inventory.SourceState) *inventory.Snapshot {
	if len(states) == 0 {
		states = []inventory.SourceState{{Name: "fleet", Provider: sources.ProviderStatic, Synced: true}}
	}
	sources.SortByName(cs)
	snap := &inventory.Snapshot{Version: 1, Sources: states}
	for i := range cs {
		snap.Clusters = append(snap.Clusters, &cs[i])
	}
	for _, c := range listed {
		snap.Unserved = append(snap.Unserved, inventory.Unserved{Name: c.Name, Source: c.Source, ID: c.Key(), Phase: sources.PhasePending})
	}
	return snap
}

func countdownAt(since time.Time, missed int, listing time.Time) func(*corev1.Secret) {
	return func(s *corev1.Secret) {
		s.Annotations[AnnotationMissingSince] = since.Format(time.RFC3339Nano)
		s.Annotations[AnnotationMissingListings] = fmt.Sprint(missed)
		s.Annotations[AnnotationMissingListing] = listing.Format(time.RFC3339Nano)
	}
}

func names[T interface{ GetName() string }](ss []T) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.GetName())
	}
	return out
}

// written is what u writes over the Secret its Record holds (read from
// the API).
func written(t testing.TB, u Update) *corev1.Secret {
	t.Helper()
	require.NotNil(t, u.Old.Full(), "a Record read from the API")
	if u.Want == nil {
		return onFresh(u.Old, u.Countdown, u.Old.Full())
	}
	want, err := u.Want.Render(noToken)
	require.NoError(t, err)
	want.Name = u.Old.Name
	return merge(u.Old.Full(), want)
}

// records returns the Records of ss as read from the API.
func records(ss ...corev1.Secret) []*Record {
	out := make([]*Record, len(ss))
	for i := range ss {
		out[i] = recordOf(&ss[i], true)
	}
	return out
}

func TestPlan(t *testing.T) {
	listing1, listing2 := t0.Add(-time.Minute), t0
	prune := PruneOptions{AfterListings: 3, MaxDeletions: 5, MaxDeletionsPercent: 10}
	foreign := func(s *corev1.Secret) {
		s.Labels[LabelOwner] = "someone-else"
	}
	type want struct {
		create, delete, blocked []string
		update                  map[string]string // name → reason
		clashes                 []Clash
		pending                 []string // "secret:missed/needed[:held]"
		unchanged               int
	}
	cases := []struct {
		name     string
		served   []sources.Cluster // in the snapshot and desired
		listed   []sources.Cluster // in the snapshot only (not ready, ...)
		current  []corev1.Secret
		states   []inventory.SourceState
		policy   Policy
		prune    *PruneOptions
		listings map[string]time.Time
		held     map[string]bool
		want     want
	}{
		{name: "new cluster", served: []sources.Cluster{cl("a")}, want: want{create: []string{sn("a")}}},
		{name: "steady state", served: []sources.Cluster{cl("a")}, current: []corev1.Secret{current(t, cl("a"))}, want: want{unchanged: 1}},
		{name: "changed CA", served: []sources.Cluster{cl("a", func(c *sources.Cluster) { c.CA = sources.CAFromData(caB) })},
			current: []corev1.Secret{current(t, cl("a"))}, want: want{update: map[string]string{sn("a"): "content"}}},
		{name: "changed CA under create-only", served: []sources.Cluster{cl("a", func(c *sources.Cluster) { c.CA = sources.CAFromData(caB) })},
			current: []corev1.Secret{current(t, cl("a"))}, policy: PolicyCreateOnly, want: want{unchanged: 1}},
		{name: "changed labels", served: []sources.Cluster{cl("a", func(c *sources.Cluster) { c.Labels = map[string]string{"env": "staging"} })},
			current: []corev1.Secret{current(t, cl("a"))}, want: want{update: map[string]string{sn("a"): "content"}}},
		{name: "label added by a person is not a change", served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("a"), func(s *corev1.Secret) {
				s.Labels["team"] = "sre"
				s.Data["shard"] = []byte("1")
			})}, want: want{unchanged: 1}},
		{name: "foreign secret with the same name", served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("a"), foreign, func(s *corev1.Secret) { s.Data["server"] = []byte("https://elsewhere") })},
			want:    want{clashes: []Clash{{Cluster: "a", Secret: sn("a"), By: "name"}}}},
		{name: "foreign secret with the same server", served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("a"), foreign, func(s *corev1.Secret) { s.Name = "hand-made" })},
			want:    want{clashes: []Clash{{Cluster: "a", Secret: "hand-made", By: "server"}}}},
		{name: "foreign secret of a gone cluster is never deleted", policy: PolicySync,
			current: []corev1.Secret{current(t, cl("gone"), foreign, countdownAt(t0.Add(-time.Hour), 5, listing1))},
			want:    want{}},
		{name: "vanished under upsert-only", current: []corev1.Secret{current(t, cl("gone"))},
			want: want{pending: []string{sn("gone") + ":1/3:policy upsert-only never deletes"}, unchanged: 1}},
		{name: "vanished under create-only", policy: PolicyCreateOnly, current: []corev1.Secret{current(t, cl("gone"))},
			want: want{pending: []string{sn("gone") + ":1/3:policy create-only never deletes"}, unchanged: 1}},
		{name: "vanished under sync starts the countdown", policy: PolicySync, current: []corev1.Secret{current(t, cl("gone"))},
			want: want{update: map[string]string{sn("gone"): "countdown"}, pending: []string{sn("gone") + ":1/3"}}},
		{name: "countdown counts a new listing", policy: PolicySync,
			current: []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Minute), 1, listing1))},
			want:    want{update: map[string]string{sn("gone"): "countdown"}, pending: []string{sn("gone") + ":2/3"}}},
		{name: "countdown waits for a new listing", policy: PolicySync, listings: map[string]time.Time{"fleet": listing1},
			current: []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    want{pending: []string{sn("gone") + ":2/3"}, unchanged: 1}},
		{name: "countdown reached: delete", policy: PolicySync,
			current: []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    want{delete: []string{sn("gone")}}},
		{name: "countdown reached but grace period not passed", policy: PolicySync,
			prune:   &PruneOptions{AfterListings: 3, GracePeriod: time.Hour, MaxDeletions: 5},
			current: []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    want{update: map[string]string{sn("gone"): "countdown"}, pending: []string{sn("gone") + ":3/3"}}},
		{name: "countdown frozen while the source fails", policy: PolicySync,
			states:  []inventory.SourceState{{Name: "fleet", Synced: true, Stale: true}},
			current: []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    want{pending: []string{sn("gone") + ":2/3:latest listing of the source failed"}, unchanged: 1}},
		{name: "nothing deleted before the source synced", policy: PolicySync,
			states:  []inventory.SourceState{{Name: "fleet"}},
			current: []corev1.Secret{current(t, cl("gone"))},
			want:    want{unchanged: 1}},
		{name: "source no longer configured", policy: PolicySync, states: []inventory.SourceState{{Name: "other", Synced: true}},
			current: []corev1.Secret{current(t, cl("gone"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    want{pending: []string{sn("gone") + ":2/3:source not configured"}, unchanged: 1}},
		{name: "pinned", policy: PolicySync,
			current: []corev1.Secret{current(t, cl("gone"), func(s *corev1.Secret) { s.Labels[LabelPin] = "true" }, countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    want{pending: []string{sn("gone") + ":3/3:pinned"}, unchanged: 1}},
		{name: "not ready cluster is neither created nor deleted", policy: PolicySync,
			listed:  []sources.Cluster{cl("waiting", func(c *sources.Cluster) { c.Ready = false })},
			current: []corev1.Secret{current(t, cl("waiting"))}, want: want{unchanged: 1}},
		{name: "held cluster (token unreadable) is kept", policy: PolicySync, held: map[string]bool{"fleet/tok": true},
			current: []corev1.Secret{current(t, cl("tok"))}, want: want{unchanged: 1}},
		{name: "cluster back during countdown", policy: PolicySync, served: []sources.Cluster{cl("back")},
			current: []corev1.Secret{current(t, cl("back"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    want{update: map[string]string{sn("back"): "content"}}},
		{name: "not-ready cluster back during countdown clears it", policy: PolicySync,
			listed:  []sources.Cluster{cl("back", func(c *sources.Cluster) { c.Ready = false })},
			current: []corev1.Secret{current(t, cl("back"), countdownAt(t0.Add(-time.Minute), 2, listing1))},
			want:    want{update: map[string]string{sn("back"): "countdown"}}},
		{name: "our secret of another owner id is foreign", policy: PolicySync, served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("a"), func(s *corev1.Secret) { s.Labels[LabelOwner] = "fleet-b" })},
			want:    want{clashes: []Clash{{Cluster: "a", Secret: sn("a"), By: "name"}}}},
	}
	// breaker: 10 of our 12 Secrets would go at once
	var many []corev1.Secret
	for i := range 12 {
		many = append(many, current(t, cl(fmt.Sprintf("g%02d", i)), countdownAt(t0.Add(-time.Minute), 2, listing1)))
	}
	cases = append(cases, struct {
		name     string
		served   []sources.Cluster
		listed   []sources.Cluster
		current  []corev1.Secret
		states   []inventory.SourceState
		policy   Policy
		prune    *PruneOptions
		listings map[string]time.Time
		held     map[string]bool
		want     want
	}{name: "breaker", policy: PolicySync, served: []sources.Cluster{cl("g00"), cl("g01")}, current: many,
		want: want{blocked: []string{sn("g02"), sn("g03"), sn("g04"), sn("g05"), sn("g06"),
			sn("g07"), sn("g08"), sn("g09"), sn("g10"), sn("g11")},
			update: map[string]string{sn("g00"): "content", sn("g01"): "content"}}})

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := prune
			if tc.prune != nil {
				p = *tc.prune
			}
			policy := tc.policy
			if policy == "" {
				policy = PolicyUpsertOnly
			}
			listings := tc.listings
			if listings == nil {
				listings = map[string]time.Time{"fleet": listing2}
			}
			snap := snapshotWith(append([]sources.Cluster{}, tc.served...), tc.listed, tc.states...)
			ch := Plan(Input{Desired: desired(t, tc.served...), Current: records(tc.current...), Snapshot: snap,
				Listings: listings, Held: tc.held, OwnerID: owner, Policy: policy, Prune: p, Now: t0})

			assert.Equal(t, orEmpty(tc.want.create), names(ch.Create), "create")
			assert.Equal(t, orEmpty(tc.want.delete), names(ch.Delete), "delete")
			assert.Equal(t, orEmpty(tc.want.blocked), names(ch.Blocked), "blocked")
			gotUpd := map[string]string{}
			for _, u := range ch.Update {
				next := written(t, u)
				gotUpd[next.Name] = u.Reason
				assert.Equal(t, u.Old.ResourceVersion, next.ResourceVersion, "updates carry the version read")
			}
			if tc.want.update == nil {
				tc.want.update = map[string]string{}
			}
			assert.Equal(t, tc.want.update, gotUpd, "update")
			assert.Equal(t, tc.want.clashes, ch.Clashes, "clashes")
			var pend []string
			for _, pe := range ch.Pending {
				s := fmt.Sprintf("%s:%d/%d", pe.Secret, pe.Missed, pe.Needed)
				if pe.Held != "" {
					s += ":" + pe.Held
				}
				pend = append(pend, s)
			}
			assert.Equal(t, tc.want.pending, pend, "pending")
			assert.Equal(t, tc.want.unchanged, ch.Unchanged, "unchanged")
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TestUpdateTouchesOnlyWhatWeOwn: labels we propagated and that left
// upstream are removed; labels, annotations and data keys added by people
// stay.
func TestUpdateTouchesOnlyWhatWeOwn(t *testing.T) {
	before := cl("a", func(c *sources.Cluster) {
		c.Labels = map[string]string{"env": "prod", "team": "payments"}
		c.Annotations = map[string]string{"owner": "x@example.com"}
	})
	after := cl("a", func(c *sources.Cluster) {
		c.Labels = map[string]string{"env": "staging"}
		c.CA = sources.CAFromData(caB)
	})
	cur := current(t, before, func(s *corev1.Secret) {
		s.Labels["added-by-hand"] = "yes"
		s.Annotations["note"] = "keep me"
		s.Data["shard"] = []byte("2")
	})
	ch := Plan(Input{Desired: desired(t, after), Current: records(cur), Snapshot: snapshot([]sources.Cluster{after}),
		OwnerID: owner, Policy: PolicySync, Prune: PruneOptions{AfterListings: 3}, Now: t0})
	require.Len(t, ch.Update, 1)
	got := written(t, ch.Update[0])
	assert.Equal(t, "staging", got.Labels["env"])
	assert.NotContains(t, got.Labels, "team", "propagated earlier, gone upstream")
	assert.Equal(t, "yes", got.Labels["added-by-hand"])
	assert.NotContains(t, got.Annotations, "owner", "propagated annotation gone upstream")
	assert.Equal(t, "keep me", got.Annotations["note"])
	assert.Equal(t, "2", string(got.Data["shard"]))
	assert.Contains(t, string(got.Data["config"]), caB)
}

func TestBuild(t *testing.T) {
	tokenFor := func(ref sources.SecretRef) (string, error) {
		if ref.Env == "RANCHER_TOKEN" {
			return "token-abcde:s3cr3t", nil
		}
		return "", errors.New("unreadable")
	}
	bearer := cl("rancher-prod", func(c *sources.Cluster) {
		c.Source, c.Provider = "rancher-eu", sources.ProviderRancher
		c.Server = "https://rancher.example.com/k8s/clusters/c-m-2x7kqz4b"
		c.Auth = sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{Env: "RANCHER_TOKEN"}}
		c.Labels = map[string]string{"env": "prod", "bad key!": "x", "long": strings.Repeat("v", 64), LabelOwner: "spoofed"}
		c.Namespaces = []string{"a", "b"}
		c.Project, c.ClusterResources = "acme", true
		c.ID, c.Phase, c.State = "c-m-2x7kqz4b", sources.PhaseDegraded, "updating"
	})
	o := opts()
	d, err := Build(&bearer, o, tokenFor)
	require.NoError(t, err)
	s := d.Secret
	assert.Equal(t, SecretName("cluster", "rancher-eu", "rancher-prod", "c-m-2x7kqz4b"), s.Name)
	assert.Regexp(t, `^cluster-rancher-eu-rancher-prod-[0-9a-f]{10}$`, s.Name)
	assert.Equal(t, "argocd", s.Namespace)
	assert.Equal(t, map[string]string{
		LabelSecretType: "cluster", LabelManagedBy: ManagedByValue, LabelOwner: owner, LabelSource: "rancher-eu",
		LabelPhase: "degraded", LabelState: "updating",
		"env": "prod", "tenant": "acme", "provider": "rancher", "region": "eu-west-1",
	}, s.Labels, "invalid and reserved labels are not propagated")
	assert.Equal(t, "c-m-2x7kqz4b", s.Annotations[AnnotationClusterID])
	assert.Equal(t, "rancher-prod", string(s.Data["name"]))
	assert.Equal(t, "acme", string(s.Data["project"]))
	assert.Equal(t, "a,b", string(s.Data["namespaces"]))
	assert.Equal(t, "true", string(s.Data["clusterResources"]))
	assert.JSONEq(t, `{"bearerToken":"token-abcde:s3cr3t","tlsClientConfig":{"insecure":false,"caData":"`+caA+`"}}`, string(s.Data["config"]))
	red := Redacted(s)
	assert.NotContains(t, string(red.Data["config"]), "s3cr3t")
	assert.Contains(t, string(s.Data["config"]), "s3cr3t", "Redacted copies")

	_, err = Build(&bearer, opts(), noToken)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "env:RANCHER_TOKEN")

	aws := cl("payments", func(c *sources.Cluster) { c.ProxyURL = "http://proxy:3128" })
	d, err = Build(&aws, opts(), noToken)
	require.NoError(t, err)
	assert.JSONEq(t, `{"awsAuthConfig":{"clusterName":"payments","roleARN":"arn:aws:iam::1:role/argocd"},"tlsClientConfig":{"insecure":false,"caData":"`+caA+`"},"proxyUrl":"http://proxy:3128"}`,
		string(d.Secret.Data["config"]))
	assert.NotContains(t, d.Secret.Data, "project")

	o = opts()
	o.Credentials = map[string]CredentialOverride{"fleet": {Exec: &sources.ExecProvider{Command: "token-broker",
		Args: []string{"--cluster", "{{.Name}}", "--server={{.Server}}"}, Env: map[string]string{"REGION": "{{.Region}}"}}}}
	require.NoError(t, o.Validate())
	d, err = Build(&aws, o, noToken)
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(d.Secret.Data["config"], &cfg))
	assert.Equal(t, map[string]any{"command": "token-broker", "args": []any{"--cluster", "payments", "--server=https://payments.example.com"},
		"env": map[string]any{"REGION": "eu-west-1"}, "apiVersion": "client.authentication.k8s.io/v1beta1"}, cfg["execProviderConfig"])
	assert.NotContains(t, cfg, "awsAuthConfig")

	o.Credentials["fleet"] = CredentialOverride{Exec: &sources.ExecProvider{Command: "x", Args: []string{"{{.Nope}}"}}}
	assert.ErrorContains(t, o.Validate(), "credentials.fleet.exec")
}

func TestSecretName(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct{ source, cluster, id, prefix string }{
		{"demo-aws", "acme-prod-eu", "acme-prod-eu", "cluster-demo-aws-acme-prod-eu-"},
		{"rancher", "Prod_EU", "c-1", "cluster-rancher-prod-eu-"},
		{"eks", "payments", "arn:aws:eks:eu-west-1:111:cluster/payments", "cluster-eks-payments-"},
	} {
		t.Run(tc.cluster, func(t *testing.T) {
			got := SecretName("cluster", tc.source, tc.cluster, tc.id)
			assert.Regexp(t, "^"+tc.prefix+"[0-9a-f]{10}$", got)
			assert.Equal(t, got, SecretName("cluster", tc.source, tc.cluster, tc.id), "deterministic")
		})
	}
	assert.NotEqual(t, SecretName("cluster", "aws", "prod-eu", "prod-eu"), SecretName("cluster", "aws-prod", "eu", "eu"),
		"the collision pair of the old scheme maps to two names")
	assert.NotEqual(t, SecretName("cluster", "rancher", "Prod_EU", "c-1"), SecretName("cluster", "rancher", "prod-eu", "c-2"))
	a, b := SecretName("cluster", "s", long, "a"), SecretName("cluster", "s", long, "b")
	assert.Len(t, a, 253)
	assert.NotEqual(t, a, b)
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Namespace: "argocd"}, "ownerID: required"},
		{Options{Namespace: "argocd", OwnerID: "has space"}, "ownerID"},
		{Options{OwnerID: "a"}, "namespace: required"},
		{Options{Namespace: "argocd", OwnerID: "a", Prefix: "Bad_Prefix"}, "prefix"},
		{Options{Namespace: "argocd", OwnerID: "a", Credentials: map[string]CredentialOverride{"s": {Exec: &sources.ExecProvider{Command: "x"}, BearerToken: &sources.SecretRef{Env: "X"}}}}, "not both"},
	} {
		assert.ErrorContains(t, tc.o.Validate(), tc.want)
	}
}

func ptr[T any](v T) *T { return &v }

// TestPlanLifecycle: the Secret follows the inventory's lifecycle (found by
// identity, pruned on a confirmed departure) and never loses to a foreign
// Secret.
func TestPlanLifecycle(t *testing.T) {
	withID := func(id string) func(*sources.Cluster) { return func(c *sources.Cluster) { c.ID = id } }
	prune := PruneOptions{AfterListings: 3, MaxDeletions: 5, MaxDeletionsPercent: 10}
	departed := func(name, id string) inventory.Departed {
		return inventory.Departed{Name: name, Source: "fleet", ID: id, At: t0}
	}
	legacy := func(s *corev1.Secret) { // as written before identities: old name, no id annotation
		s.Name = "cluster-fleet-" + s.Annotations[AnnotationCluster]
		delete(s.Annotations, AnnotationClusterID)
	}
	pin := func(s *corev1.Secret) { s.Labels[LabelPin] = "true" }
	foreign := func(s *corev1.Secret) { s.Labels[LabelOwner] = "someone-else"; s.Name = "hand-made" }
	type want struct {
		create, delete []string
		update         map[string]string // name → data["name"]
		clashes        []Clash
		pending        []string
	}
	cases := []struct {
		name       string
		served     []sources.Cluster
		conflicts  []inventory.Conflict
		departed   []inventory.Departed
		deselected map[string]bool
		current    []corev1.Secret
		policy     Policy
		want       want
	}{
		{name: "confirmed departure deletes at once", policy: PolicySync, departed: []inventory.Departed{departed("gone", "id-gone")},
			current: []corev1.Secret{current(t, cl("gone", withID("id-gone")))},
			want:    want{delete: []string{SecretName("cluster", "fleet", "gone", "id-gone")}}},
		{name: "confirmed departure, pinned", policy: PolicySync, departed: []inventory.Departed{departed("gone", "id-gone")},
			current: []corev1.Secret{current(t, cl("gone", withID("id-gone")), pin)},
			want:    want{pending: []string{SecretName("cluster", "fleet", "gone", "id-gone") + ":pinned"}}},
		{name: "confirmed departure under upsert-only", policy: PolicyUpsertOnly, departed: []inventory.Departed{departed("gone", "id-gone")},
			current: []corev1.Secret{current(t, cl("gone", withID("id-gone")))},
			want:    want{pending: []string{SecretName("cluster", "fleet", "gone", "id-gone") + ":policy upsert-only never deletes"}}},
		{name: "rename updates the one Secret in place", policy: PolicySync, served: []sources.Cluster{cl("new-name", withID("id-1"))},
			current: []corev1.Secret{current(t, cl("old-name", withID("id-1")))},
			want:    want{update: map[string]string{SecretName("cluster", "fleet", "old-name", "id-1"): "new-name"}}},
		{name: "a Secret of the previous version is taken over in place", policy: PolicySync, served: []sources.Cluster{cl("a", withID("c-123"))},
			current: []corev1.Secret{current(t, cl("a", withID("c-123")), legacy)},
			want:    want{update: map[string]string{"cluster-fleet-a": "a"}}},
		{name: "a foreign Secret with our server never removes ours", policy: PolicySync, served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("a")), current(t, cl("a"), foreign)},
			want:    want{clashes: []Clash{{Cluster: "a", Secret: "hand-made", By: "server"}}}},
		{name: "our Secret of another cluster at the desired name is never updated", policy: PolicySync, served: []sources.Cluster{cl("a")},
			current: []corev1.Secret{current(t, cl("b", withID("other")), func(s *corev1.Secret) { s.Name = sn("a") })},
			want:    want{clashes: []Clash{{Cluster: "a", Secret: sn("a"), By: "identity"}}}},
		{name: "a cluster leaving the selection counts down", policy: PolicySync, served: []sources.Cluster{cl("a")},
			deselected: map[string]bool{"fleet/a": true}, current: []corev1.Secret{current(t, cl("a"))},
			want: want{update: map[string]string{sn("a"): "a"}, pending: []string{sn("a") + ":1/3"}}},
		{name: "no prune while a name conflict holds", policy: PolicySync, conflicts: []inventory.Conflict{{Name: "a", Sources: []string{"fleet", "other"}}},
			current: []corev1.Secret{current(t, cl("a"))}, want: want{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot(append([]sources.Cluster{}, tc.served...))
			snap.Departed, snap.Conflicts = tc.departed, tc.conflicts
			var ds []Desired
			for _, d := range desired(t, tc.served...) {
				if !tc.deselected[Identity(d.Source, d.ID)] {
					ds = append(ds, d)
				}
			}
			ch := Plan(Input{Desired: ds, Current: records(tc.current...), Snapshot: snap, Deselected: tc.deselected,
				Listings: map[string]time.Time{"fleet": t0}, OwnerID: owner, Policy: tc.policy, Prune: prune, Now: t0})
			assert.Equal(t, orEmpty(tc.want.create), names(ch.Create), "create")
			assert.Equal(t, orEmpty(tc.want.delete), names(ch.Delete), "delete")
			assert.Empty(t, ch.Blocked)
			got := map[string]string{}
			for _, u := range ch.Update {
				next := written(t, u)
				got[next.Name] = string(next.Data["name"])
				assert.Equal(t, u.Old.Name, next.Name, "in place")
				assert.Equal(t, u.Old.UID, next.UID)
			}
			if tc.want.update == nil {
				tc.want.update = map[string]string{}
			}
			assert.Equal(t, tc.want.update, got, "update")
			assert.Equal(t, tc.want.clashes, ch.Clashes, "clashes")
			var pend []string
			for _, pe := range ch.Pending {
				s := pe.Secret
				if pe.Held != "" {
					s += ":" + pe.Held
				} else {
					s += fmt.Sprintf(":%d/%d", pe.Missed, pe.Needed)
				}
				pend = append(pend, s)
			}
			assert.Equal(t, tc.want.pending, pend, "pending")
		})
	}
}

// TestDesiredRender: a compact Desired (no Secret, as a pass keeps it)
// plans as the full one and renders the same Secret again; one whose
// cluster changed since it was planned renders nothing.
func TestDesiredRender(t *testing.T) {
	c := cl("a", func(c *sources.Cluster) { c.Annotations = map[string]string{"docs": "https://docs"} })
	d := desired(t, c)[0]
	compact := d.Compact()
	require.Nil(t, compact.Secret)
	cur := records(current(t, c))
	for _, in := range []Desired{d, compact} {
		ch := Plan(Input{Desired: []Desired{in}, Current: cur, Snapshot: snapshot([]sources.Cluster{c}), OwnerID: owner, Policy: PolicySync, Now: t0})
		assert.Equal(t, 1, ch.Unchanged)
		assert.Empty(t, ch.Update)
	}
	s, err := compact.Render(noToken)
	require.NoError(t, err)
	assert.Equal(t, d.Secret, s, "rendered again as built")
	s.Labels["edited"] = "x"
	again, err := d.Render(noToken)
	require.NoError(t, err)
	assert.NotContains(t, again.Labels, "edited", "the caller's copy")

	compact.cluster = &sources.Cluster{Name: "a", Source: "fleet", Server: "https://elsewhere.example.com",
		Auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: "a"}}}
	_, err = compact.Render(noToken)
	require.ErrorContains(t, err, "changed since the plan")
}
