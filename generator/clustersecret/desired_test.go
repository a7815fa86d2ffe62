package clustersecret

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

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
	require.Empty(t, o.Validate(nil))
	d, err = Build(&aws, o, noToken)
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(d.Secret.Data["config"], &cfg))
	assert.Equal(t, map[string]any{"command": "token-broker", "args": []any{"--cluster", "payments", "--server=https://payments.example.com"},
		"env": map[string]any{"REGION": "eu-west-1"}, "apiVersion": "client.authentication.k8s.io/v1beta1"}, cfg["execProviderConfig"])
	assert.NotContains(t, cfg, "awsAuthConfig")

	// an upstream value never reaches the broker as a flag or with spaces
	for _, bad := range []string{"--token=stolen", "pay ments", "a\nb"} {
		evil := cl("payments", func(c *sources.Cluster) { c.Name = bad })
		_, err = Build(&evil, o, noToken)
		assert.ErrorContains(t, err, "not a value an exec template may use", "name %q", bad)
	}

	o.Credentials["fleet"] = CredentialOverride{Exec: &sources.ExecProvider{Command: "x", Args: []string{"{{.Nope}}"}}}
	errs := o.Validate(nil)
	require.Len(t, errs, 1)
	assert.Equal(t, "credentials[fleet].exec", errs[0].Field)
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

// TestConfigValidate: every problem of the secrets section at once, each
// with its path, as the configuration loader and New report them.
func TestConfigValidate(t *testing.T) {
	at := field.NewPath("secrets")
	bad := Config{Options: Options{Prefix: "Bad_Prefix", Credentials: map[string]CredentialOverride{
		"s": {Exec: &sources.ExecProvider{Command: "x"}, BearerToken: &sources.SecretRef{Env: "X"}},
		"t": {BearerToken: &sources.SecretRef{Issued: &sources.IssuedToken{Source: "t", Cluster: "c"}}},
	}}, Policy: "delete-all", Resync: time.Millisecond, Concurrency: 0,
		Prune: PruneOptions{AfterListings: 0, MaxDeletions: -1, MaxDeletionsPercent: 101}}
	var got []string
	for _, e := range bad.Validate(at) {
		got = append(got, e.Error())
	}
	assert.Equal(t, []string{
		"secrets.ownerID: Required value: two deployments with different owner ids never touch each other's Secrets",
		"secrets.namespace: Required value",
		`secrets.prefix: Invalid value: "Bad_Prefix": must be a DNS label of at most 40 characters`,
		"secrets.credentials[s]: Invalid value: set exec or bearerToken, not both",
		"secrets.credentials[t].bearerToken.issued: Forbidden: set by sources only",
		`secrets.policy: Unsupported value: "delete-all": supported values: "sync", "upsert-only", "create-only"`,
		`secrets.resync: Invalid value: "1ms": must be at least 1s`,
		"secrets.concurrency: Invalid value: 0: must be at least 1",
		"secrets.prune.afterListings: Invalid value: 0: must be at least 1 (one listing is never enough to confirm a departure)",
		"secrets.prune.maxDeletions: Invalid value: -1: must be at least 0",
		"secrets.prune.maxDeletionsPercent: Invalid value: 101: must be between 0 and 100",
	}, got)

	good := Config{Options: Options{Namespace: "argocd", OwnerID: "a"}}
	good.Defaults()
	assert.Empty(t, good.Validate(at))
	good.Prune.MaxDeletions = 0 // a value set is kept: New does not default it again
	assert.Empty(t, good.Validate(at))
	_, err := New(Config{Options: good.Options}, nil, nil, nil, nil)
	require.Error(t, err, "New takes the configuration as given: unset fields are errors, not defaults")
	assert.Contains(t, err.Error(), "concurrency")
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

// TestBuildNeverPropagatesReservedAnnotations: annotations an owner wrote
// upstream under Argo CD's keys (argocd.argoproj.io/refresh would make Argo
// CD refresh its cache of the cluster; 3.6's cluster generator leaves them
// out of its parameters, 3.2's gives them), kubectl's, argocd-agent's or
// ours never reach the Secret nor its list of propagated annotations; the
// owner's own do.
func TestBuildNeverPropagatesReservedAnnotations(t *testing.T) {
	c := cl("a", func(c *sources.Cluster) {
		c.Annotations = map[string]string{
			"argocd.argoproj.io/refresh": "hard", "argocd.argoproj.io/tracking-id": "x",
			"kubectl.kubernetes.io/last-applied-configuration": "{}", AnnotationClusterID: "someone-else",
			sources.AgentLabelPrefix + "agent-name": "b", "owner.example.com/team": "payments",
		}
	})
	d, err := Build(&c, opts(), noToken)
	require.NoError(t, err)
	for k := range c.Annotations {
		if k == "owner.example.com/team" {
			assert.Equal(t, "payments", d.Secret.Annotations[k])
			continue
		}
		if k == AnnotationClusterID {
			assert.Equal(t, c.Key(), d.Secret.Annotations[k], "the identity is ours")
			continue
		}
		assert.NotContains(t, d.Secret.Annotations, k)
	}
	assert.Equal(t, "owner.example.com/team", d.Secret.Annotations[AnnotationAnnotations], "and not listed as propagated")
}

// TestBuildNeverPropagatesReservedLabels protects the reserved labels from
// a cluster's owner: labels an owner wrote upstream under our keys (pin,
// owner, source) or Argo CD's (secret-type, managed-by, any
// argocd.argoproj.io/ key) never reach the Secret, nor its list of
// propagated labels (whose keys a later update would remove or keep as
// upstream says); a cluster label of the owner's own still does. An owner
// cannot pin the Secret against pruning: once its countdown is reached,
// it is deleted.
func TestBuildNeverPropagatesReservedLabels(t *testing.T) {
	c := cl("a", func(c *sources.Cluster) {
		c.Labels = map[string]string{
			LabelPin: "true", LabelSource: "elsewhere", LabelManagedBy: "x", LabelSecretType: "repository",
			"argocd.argoproj.io/foo": "bar", "team": "payments",
		}
	})
	d, err := Build(&c, opts(), noToken)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		LabelSecretType: "cluster", LabelManagedBy: ManagedByValue, LabelOwner: owner, LabelSource: "fleet", LabelPhase: "ready",
		"team": "payments", "tenant": "acme", "provider": "static", "region": "eu-west-1",
	}, d.Secret.Labels, "the owner's reserved labels are left out")
	assert.Equal(t, "provider,region,team,tenant", d.Secret.Annotations[AnnotationLabels], "and not listed as propagated")

	reached := current(t, c, countdownAt(t0.Add(-time.Hour), 2, t0.Add(-time.Minute)))
	ch := Plan(Input{Current: records(reached), Snapshot: snapshot(nil), Listings: map[string]time.Time{"fleet": t0},
		OwnerID: owner, Policy: PolicySync, Now: t0, Prune: PruneOptions{AfterListings: 3, MaxDeletions: 5}})
	assert.Equal(t, []string{sn("a")}, names(ch.Delete), "not pinned by its owner's label")
}
