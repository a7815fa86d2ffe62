package chartgen_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/chartgen"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// toy is a provider added the way the checklist says: a registration
// with its section's schema, and nothing else.
type toy struct{}

func (toy) Name() sources.Provider            { return "toy" }
func (toy) Kind() sources.Kind                { return sources.KindCloud }
func (toy) NewConfig() sources.ProviderConfig { return nil }
func (toy) ConfigSchema() []byte {
	return []byte(`{"type": "object", "required": ["zone"], "properties": {"zone": {"type": "string", "description": "<a> & <b>"}}}`)
}

// schemaLess has no ConfigSchema.
type schemaLess struct{}

func (schemaLess) Name() sources.Provider            { return "bare" }
func (schemaLess) Kind() sources.Kind                { return sources.KindCloud }
func (schemaLess) NewConfig() sources.ProviderConfig { return nil }

const base = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "definitions": {
    "duration": {"type": "string", "pattern": "^(\u00b5s|s)$"},
    "source": {
      "type": "object",
      "properties": {
        "name": {"type": "string"},
        "provider": {"enum": ["static"]},
        "static": {"type": "object"},
        "gone": {"type": "object"}
      },
      "allOf": []
    }
  },
  "properties": {"replicaCount": {"type": "integer"}}
}`

// TestToyProviderFollows: a provider added to the registry gets its enum
// value, its section (from its own schema), the rule that requires it and
// forbids the others', and a depguard rule, with nothing else to edit;
// what is not the registry's is kept as written, a removed provider goes.
func TestToyProviderFollows(t *testing.T) {
	reg := sources.NewRegistry(static.Provider{}, toy{})
	out, err := chartgen.Schema([]byte(base), reg)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"pattern": "^(\u00b5s|s)$"`, "escapes kept as written")
	assert.Contains(t, string(out), `"description": "<a> & <b>"`, "no HTML escaping")
	var got struct {
		Definitions struct {
			Source struct {
				Properties map[string]json.RawMessage `json:"properties"`
				AllOf      []json.RawMessage          `json:"allOf"`
			} `json:"source"`
		} `json:"definitions"`
		Properties map[string]any `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(out, &got))
	src := got.Definitions.Source
	assert.JSONEq(t, `{"enum": ["static", "toy"]}`, string(src.Properties["provider"]))
	assert.JSONEq(t, string(toy{}.ConfigSchema()), string(src.Properties["toy"]))
	assert.NotContains(t, src.Properties, "gone", "a provider no longer registered loses its section")
	require.Len(t, src.AllOf, 2)
	assert.JSONEq(t, `{"if": {"properties": {"provider": {"const": "toy"}}, "required": ["provider"]},
		"then": {"required": ["toy"], "properties": {"static": false}}}`, string(src.AllOf[1]))
	assert.Contains(t, got.Properties, "replicaCount")

	again, err := chartgen.Schema(out, reg)
	require.NoError(t, err)
	assert.Equal(t, string(out), string(again), "generating twice changes nothing")

	_, err = chartgen.Schema([]byte(base), sources.NewRegistry(static.Provider{}, schemaLess{}))
	require.EqualError(t, err, "provider bare: its registration has no ConfigSchema (sources.Schema)")
}

func TestToyProviderDepguard(t *testing.T) {
	base := "linters:\n  settings:\n    depguard:\n      rules:\n" +
		"        # generated from the provider registry by cmd/chartgen (go generate ./cmd/argocd-cluster-discovery/config): do not edit\n" +
		"        provider-old: {}\n" +
		"        # end of the generated provider rules\n" +
		"    funlen: {}\n"
	out, err := chartgen.Depguard([]byte(base), sources.NewRegistry(static.Provider{}, toy{}))
	require.NoError(t, err)
	s := string(out)
	assert.NotContains(t, s, "provider-old")
	assert.Contains(t, s, "        provider-static:\n          files:\n            - \"${config-path}/sources/static/**.go\"\n          deny:\n"+
		"            - pkg: "+chartgen.Module+"/internal/chartgen_test\n")
	assert.Contains(t, s, "        provider-toy:\n          files:\n            - \"${config-path}/internal/chartgen_test/**.go\"\n          deny:\n"+
		"            - pkg: "+chartgen.Module+"/sources/static\n")
	assert.True(t, strings.HasSuffix(s, "        # end of the generated provider rules\n    funlen: {}\n"))

	_, err = chartgen.Depguard([]byte("linters: {}\n"), sources.NewRegistry(toy{}))
	require.Error(t, err, "no markers")
}
