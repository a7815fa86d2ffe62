package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryProblemAtOnce: one document with a problem of every kind gets
// every problem back, each once, at its full path; none stops the others.
func TestEveryProblemAtOnce(t *testing.T) {
	doc := `colour: red                  # a typo'd key at the top level
server:
  listn: ":8080"               # ... in server
  tokens: [{env: T}]
sources:
  - name: one
    provider: static
    intervall: 5s              # ... in a source
    timeout: soon              # a bad duration
    static: {fiel: a.yaml}     # ... in a static section (which then has neither file nor clusters)
  - name: one                  # a duplicate source name
    provider: gke              # an unknown provider
  - name: three
    provider: static
    static: {file: b.yaml}
    eks: {regions: [eu-west-1]} # a section of another provider
  - name: four
    provider: static           # a missing section
`
	cfg, err := Parse([]byte(doc), "/etc/acd")
	require.Error(t, err)
	assert.Nil(t, cfg)
	assert.Equal(t, []string{
		"colour",
		"server.listn",
		"sources[0].intervall",
		"sources[0].static",
		"sources[0].static.fiel",
		"sources[0].timeout",
		"sources[1].name",
		"sources[1].provider",
		"sources[2].eks",
		"sources[3].static",
	}, paths(err), "all problems: %v", err)
	assert.Len(t, strings.Split(err.Error(), "\n"), 10, "one line per problem")
}

// TestBadInventoryIntervalBlamedOnce: a source without an interval of its
// own takes the inventory's when it runs, not at parse, so a bad
// inventory.interval is one problem, not one more per source.
func TestBadInventoryIntervalBlamedOnce(t *testing.T) {
	twoSources := "sources:\n  - {name: a, provider: static, static: {file: a.yaml}}\n  - {name: b, provider: static, static: {file: b.yaml}}\n"
	for _, tc := range []struct{ name, inventory, want string }{
		{name: "not a duration", inventory: "inventory: {interval: soon}\n", want: `inventory.interval: Invalid value: "soon": not a duration such as "30s" or "5m"`},
		{name: "too short", inventory: "inventory: {interval: 1ms}\n", want: `inventory.interval: Invalid value: "1ms": must be at least 1s`},
		{name: "bad timeout", inventory: "inventory: {timeout: -1s}\n", want: `inventory.timeout: Invalid value: "-1s": must be at least 1ms`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tokensOnly+tc.inventory+twoSources), "/etc/acd")
			require.Error(t, err)
			require.Len(t, Errors(err), 1, "got %v", err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}

// TestTrustAndTenantRules: a source's trust takes one value, and a tenant
// rule's proofs name configured sources and valid name patterns.
func TestTrustAndTenantRules(t *testing.T) {
	src := "sources:\n  - {name: a, provider: static, static: {file: a.yaml}, trust: %s}\n"
	for _, tc := range []struct{ name, doc, want string }{
		{name: "trust clusterLabels", doc: fmt.Sprintf(src, "clusterLabels")},
		{name: "trust anything else", doc: fmt.Sprintf(src, "everyone"),
			want: `sources[0].trust: Unsupported value: "everyone": supported values: "clusterLabels"`},
		{name: "a rule's proofs", doc: fmt.Sprintf(src, "clusterLabels") +
			"secrets:\n  tenants:\n    acme: {project: acme, sources: [a], accounts: [\"111111111111\"], names: [\"acme-*\"]}\n"},
		{name: "a rule naming a source not configured", doc: fmt.Sprintf(src, "clusterLabels") + "secrets:\n  tenants:\n    acme: {sources: [b]}\n",
			want: `secrets.tenants[acme].sources[0]: Not found: "b"`},
		{name: "a rule with names only", doc: fmt.Sprintf(src, "clusterLabels") + "secrets:\n  tenants:\n    acme: {names: [\"acme-*\"]}\n",
			want: `secrets.tenants[acme].sources: Required value: names only narrow what proves membership (a Rancher cluster's owner may rename it): add sources, accounts, resourceGroups or fleetWorkspaces`},
		{name: "a rule with a bad name pattern", doc: fmt.Sprintf(src, "clusterLabels") + "secrets:\n  tenants:\n    acme: {sources: [a], names: [\"acme-[\"]}\n",
			want: `secrets.tenants[acme].names[0]: Invalid value: "acme-[": not a path.Match pattern: syntax error in pattern`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tokensOnly+tc.doc), "/etc/acd")
			if tc.want == "" {
				require.NoError(t, err)
				assert.Equal(t, TrustClusterLabels, cfg.Sources[0].Trust)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}
