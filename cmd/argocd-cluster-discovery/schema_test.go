package main

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
)

// TestChartSchemaFollowsTheRegistry: the chart's values schema knows
// exactly the providers the binary registers: the provider enum, a section
// property per provider, and a rule that requires the provider's section
// and forbids the others'. A provider added to the registry fails here
// until the chart knows it.
func TestChartSchemaFollowsTheRegistry(t *testing.T) {
	b, err := os.ReadFile("../../deploy/helm/argocd-cluster-discovery/values.schema.json")
	require.NoError(t, err)
	var schema struct {
		Definitions struct {
			Source struct {
				Properties map[string]json.RawMessage `json:"properties"`
				AllOf      []struct {
					If struct {
						Properties struct {
							Provider struct {
								Const string `json:"const"`
							} `json:"provider"`
						} `json:"properties"`
					} `json:"if"`
					Then struct {
						Required   []string        `json:"required"`
						Properties map[string]bool `json:"properties"`
					} `json:"then"`
				} `json:"allOf"`
			} `json:"source"`
		} `json:"definitions"`
	}
	require.NoError(t, json.Unmarshal(b, &schema))
	src := schema.Definitions.Source

	var names []string
	for _, n := range config.Providers().Names() {
		names = append(names, string(n))
	}
	var provider struct {
		Enum []string `json:"enum"`
	}
	require.NoError(t, json.Unmarshal(src.Properties["provider"], &provider))
	assert.ElementsMatch(t, names, provider.Enum, "values.schema.json: definitions.source.properties.provider.enum")

	var sections, rules []string
	for k := range src.Properties {
		if !slices.Contains([]string{"name", "provider", "interval", "timeout", "trust"}, k) {
			sections = append(sections, k)
		}
	}
	assert.ElementsMatch(t, names, sections, "values.schema.json: one section property per provider")
	for _, r := range src.AllOf {
		p := r.If.Properties.Provider.Const
		rules = append(rules, p)
		assert.Equal(t, []string{p}, r.Then.Required, "provider %s requires its section", p)
		for _, other := range names {
			if other != p {
				assert.Contains(t, r.Then.Properties, other, "provider %s forbids the %s section", p, other)
				assert.False(t, r.Then.Properties[other])
			}
		}
	}
	assert.ElementsMatch(t, names, rules, "values.schema.json: one if/then rule per provider")
}
