package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkSectionErrors parses each extra document after a valid server and
// source and checks that its error contains want.
func checkSectionErrors(t *testing.T, tests []struct{ doc, want string }) {
	t.Helper()
	parse := sectionParser(t)
	for _, tc := range tests {
		_, err := parse(tc.doc + "\n")
		require.Error(t, err, tc.doc)
		assert.Contains(t, err.Error(), tc.want, tc.doc)
	}
}

func TestSecretsSection(t *testing.T) {
	parse := sectionParser(t)
	cfg, err := parse("")
	require.NoError(t, err)
	assert.False(t, cfg.Secrets.Enabled, "off unless enabled")
	assert.Equal(t, "upsert-only", cfg.Secrets.Policy, "never deletes by default")
	assert.Equal(t, 3, cfg.Secrets.Prune.AfterListings)
	assert.True(t, cfg.Secrets.LeaderElection.Enabled)
	assert.Equal(t, "cloud", string(cfg.Inventory.Prefer))

	cfg, err = parse("secrets:\n  enabled: true\n  ownerID: fleet-a\n  policy: sync\n  prune: {afterListings: 5, gracePeriod: 1h}\n" +
		"  tenants: {acme: {project: acme, namespaces: [a, b]}}\n  credentials:\n    one:\n      bearerToken: {secret: {name: aro, key: token}}\n")
	require.NoError(t, err)
	rc := cfg.Secrets.Reconciler()
	assert.Equal(t, "fleet-a", rc.OwnerID)
	assert.Equal(t, time.Hour, rc.Prune.GracePeriod)
	assert.Equal(t, 5, rc.Prune.AfterListings)
	assert.Equal(t, "acme", cfg.Secrets.Tenants["acme"].Project, "the inventory applies the tenant rules (answer and Secret alike)")
	assert.Equal(t, "aro", rc.Credentials["one"].BearerToken.Secret.Name)
}

func TestSecretsSectionErrors(t *testing.T) {
	checkSectionErrors(t, []struct{ doc, want string }{
		{"secrets: {enabled: true}", "secrets.ownerID: Required value"},
		{"secrets: {select: {tenant: [acme, null]}}", "secrets.select.tenant[1]: Invalid value: null is not allowed in a list"},
		{"secrets: {select: {tenants: acme}}", `secrets.select: Invalid value: unknown key "tenants" (accepted keys: `},
		{"secrets: {select: {region: 5}}", "secrets.select.region: Invalid value: must be a string or a list of strings, got a number"},
		{"departure: {afterListings: 0}", "departure.afterListings: Invalid value: 0: must be at least 1"},
		{"secrets: {client: {qps: 0}}", "secrets.client.qps: Invalid value: 0"},
		{"secrets: {client: {qps: 100, burst: 10}}", "secrets.client.burst: Invalid value: 10"},
		{"departure: {maxFraction: 2}", "departure.maxFraction: Invalid value: 2"},
		{"departure: {gracePeriod: soon}", `departure.gracePeriod: Invalid value: "soon": not a duration`},
		{"departure: {afterListings: 5, heldListings: 4}", "departure.heldListings: Invalid value: 4: must be at least departure.afterListings (5)"},
		{"departure: {maxDeletions: 0}", "departure.maxDeletions: Invalid value: 0: must be at least 1"},
		{"departure: {maxDeletionsPercent: 101}", "departure.maxDeletionsPercent: Invalid value: 101: must be from 0 to 100"},
		{"ledger: {kind: etcd}", `ledger.kind: Unsupported value: "etcd"`},
		{"ledger: {kind: kubernetes}", "secrets.ownerID: Required value"},
		{"secrets: {enabled: true, ownerID: a, policy: mirror}", `secrets.policy: Unsupported value: "mirror"`},
		{"secrets: {enabled: true, ownerID: a, resync: soon}", `secrets.resync: Invalid value: "soon": not a duration`},
		{"secrets: {enabled: true, ownerID: a, leaderElection: {enabled: true, leaseName: l, leaseDuration: 5s, renewDeadline: 10s, retryPeriod: 1s}}", "secrets.leaderElection: Invalid value: needs a leaseName"},
		{"secrets: {enabled: true, ownerID: a, leaderElection: {enabled: true, leaseName: l, leaseDuration: 15500ms, renewDeadline: 10s, retryPeriod: 2s}}", `secrets.leaderElection.leaseDuration: Invalid value: "15.5s": must be a whole number of seconds`},
		{"secrets: {enabled: true, ownerID: a, leaderElection: {enabled: true, leaseName: l, leaseDuration: 900ms, renewDeadline: 500ms, retryPeriod: 100ms}}", `secrets.leaderElection.leaseDuration: Invalid value: "900ms": must be a whole number of seconds`},
		{"secrets: {credentials: {nope: {exec: {command: x}}}}", `secrets.credentials[nope]: Not found: "nope": no source of that name is configured`},
		{"secrets: {enabled: true, ownerID: a, prune: {maxDeletionsPercent: 200}}", "maxDeletions"},
		{"secrets: {enabled: true, ownerID: a, prune: {after: 2}}", "secrets.prune.after: Forbidden: unknown key"},
		{"inventory: {prefer: both}", `inventory.prefer: Unsupported value: "both"`},
	})
}

// TestSecretsSectionReportsEverything: every problem of the secrets
// section in one run, each with its path; the reconciler's rules are its
// own (clustersecret.Config.Validate), used by the loader and the
// reconciler alike.
func TestSecretsSectionReportsEverything(t *testing.T) {
	parse := sectionParser(t)
	_, err := parse("secrets: {enabled: true, prefix: Bad_Prefix, policy: mirror, concurrency: 0, resync: 10ms,\n" +
		"  prune: {afterListings: 0, maxDeletions: -2, maxDeletionsPercent: 200}, client: {qps: 0}}\n")
	require.Error(t, err)
	var got []string
	for _, e := range Errors(err) {
		got = append(got, e.Error())
	}
	assert.ElementsMatch(t, []string{
		"secrets.ownerID: Required value: two deployments with different owner ids never touch each other's Secrets",
		`secrets.prefix: Invalid value: "Bad_Prefix": must be a DNS label of at most 40 characters`,
		`secrets.policy: Unsupported value: "mirror": supported values: "sync", "upsert-only", "create-only"`,
		`secrets.resync: Invalid value: "10ms": must be at least 1s`,
		"secrets.concurrency: Invalid value: 0: must be at least 1",
		"secrets.prune.afterListings: Invalid value: 0: must be at least 1 (one listing is never enough to confirm a departure)",
		"secrets.prune.maxDeletions: Invalid value: -2: must be at least 0",
		"secrets.prune.maxDeletionsPercent: Invalid value: 200: must be between 0 and 100",
		"secrets.client.qps: Invalid value: 0: must be above 0 and at most 10000",
	}, got)

	// a value written is kept, down to the reconciler: maxDeletions: 0
	cfg, err := parse("secrets: {enabled: true, ownerID: a, prune: {maxDeletions: 0}}\n")
	require.NoError(t, err)
	assert.Equal(t, 0, cfg.Secrets.Reconciler().Prune.MaxDeletions)
}

func TestAppSetRefreshSection(t *testing.T) {
	parse := sectionParser(t)
	cfg, err := parse("")
	require.NoError(t, err)
	r := cfg.ApplicationSetRefresh
	assert.False(t, r.Enabled, "off unless enabled")
	assert.Equal(t, "argocd-cluster-discovery", r.PluginConfigMap)
	assert.Empty(t, r.Namespaces, "Argo CD's namespace (secrets.namespace)")
	assert.Equal(t, 2*time.Second, r.Debounce.Std())

	cfg, err = parse("applicationSetRefresh: {enabled: true, pluginConfigMap: discovery-eu, namespaces: ['*'], debounce: 500ms}\n")
	require.NoError(t, err, "valid without the secrets section: it takes secrets' namespace and leader election defaults")
	assert.Equal(t, []string{"*"}, cfg.ApplicationSetRefresh.Namespaces)
	assert.Equal(t, 500*time.Millisecond, cfg.ApplicationSetRefresh.Debounce.Std())
}

func TestAppSetRefreshSectionErrors(t *testing.T) {
	checkSectionErrors(t, []struct{ doc, want string }{
		{"applicationSetRefresh: {debounce: soon}", `applicationSetRefresh.debounce: Invalid value: "soon": not a duration`},
		{"applicationSetRefresh: {debounce: 1ms}", `applicationSetRefresh.debounce: Invalid value: "1ms": must be at least 100ms`},
		{"applicationSetRefresh: {debounce: 11m}", `applicationSetRefresh.debounce: Invalid value: "11m0s": must be at most 10m`},
		{"applicationSetRefresh: {enabled: true, pluginConfigMap: ''}", "applicationSetRefresh.pluginConfigMap: Required value"},
		{"applicationSetRefresh: {enabled: true, namespaces: [argocd, '*']}", `applicationSetRefresh.namespaces[1]: Invalid value: "*": every namespace: must be the only entry`},
		{"applicationSetRefresh: {enabled: true, namespaces: [Team_A]}", `applicationSetRefresh.namespaces[0]: Invalid value: "Team_A": not a namespace name`},
		{"applicationSetRefresh: {enabled: true}\nsecrets: {namespace: ''}", `secrets.namespace: Invalid value: "": not a namespace name (applicationSetRefresh`},
		{"applicationSetRefresh: {enabled: true}\nsecrets: {leaderElection: {renewDeadline: 1m}}", "secrets.leaderElection: Invalid value: needs a leaseName"},
		{"applicationSetRefresh: {enabled: true, namespace: argocd}", "applicationSetRefresh.namespace: Forbidden: unknown key"},
	})
}

// TestRootedSectionErrorsAreClean: a provider's problems are under its
// section's path, whatever their wording.
func TestRootedSectionErrorsAreClean(t *testing.T) {
	_, err := Parse([]byte("server: {tokens: [{env: T}]}\nsources:\n  - {name: one, provider: eks, eks: {accounts: [{id: '111111111111'}]}}\n"), t.TempDir())
	require.Error(t, err)
	require.NotEmpty(t, Errors(err))
	for _, e := range Errors(err) {
		assert.True(t, strings.HasPrefix(e.Field, "sources[0].eks."), e.Field)
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		assert.False(t, strings.HasSuffix(line, ":"), "no stray colon: %q", line)
	}
}
