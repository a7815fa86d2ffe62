package appsetrefresh

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUsesPlugin(t *testing.T) {
	const ours = "argocd-cluster-discovery"
	tests := []struct {
		name      string
		appSet    string
		configMap string
		want      bool
	}{
		{"top-level plugin", `{"spec":{"generators":[{"plugin":{"configMapRef":{"name":"argocd-cluster-discovery"},"input":{"parameters":{"tenant":"acme"}}}}]}}`, ours, true},
		{"another plugin", `{"spec":{"generators":[{"plugin":{"configMapRef":{"name":"someone-elses-plugin"}}}]}}`, ours, false},
		{"second generator is ours", `{"spec":{"generators":[{"list":{"elements":[{"a":"b"}]}},{"plugin":{"configMapRef":{"name":"argocd-cluster-discovery"}}}]}}`, ours, true},
		{"cluster generator only", `{"spec":{"generators":[{"clusters":{"selector":{"matchLabels":{"tenant":"globex"}}}}]}}`, ours, false},
		{"matrix: plugin × git", `{"spec":{"generators":[{"matrix":{"generators":[
			{"git":{"repoURL":"https://git.example.com/apps.git","revision":"HEAD","directories":[{"path":"apps/*"}]}},
			{"plugin":{"configMapRef":{"name":"argocd-cluster-discovery"}}}]}}]}}`, ours, true},
		{"merge: clusters + plugin", `{"spec":{"generators":[{"merge":{"mergeKeys":["server"],"generators":[
			{"clusters":{}},{"plugin":{"configMapRef":{"name":"argocd-cluster-discovery"}}}]}}]}}`, ours, true},
		{"matrix of a nested merge holding the plugin", `{"spec":{"generators":[{"matrix":{"generators":[
			{"list":{"elements":[{"app":"guestbook"}]}},
			{"merge":{"mergeKeys":["name"],"generators":[{"clusters":{}},{"plugin":{"configMapRef":{"name":"argocd-cluster-discovery"}}}]}}]}}]}}`, ours, true},
		{"merge of a nested matrix holding the plugin", `{"spec":{"generators":[{"merge":{"mergeKeys":["name"],"generators":[
			{"list":{"elements":[]}},
			{"matrix":{"generators":[{"git":{"repoURL":"r","revision":"HEAD","files":[{"path":"x.json"}]}},{"plugin":{"configMapRef":{"name":"argocd-cluster-discovery"}}}]}}]}}]}}`, ours, true},
		{"nested, another plugin", `{"spec":{"generators":[{"matrix":{"generators":[{"list":{"elements":[]}},
			{"merge":{"generators":[{"plugin":{"configMapRef":{"name":"other"}}}]}}]}}]}}`, ours, false},
		{"configured under another name", `{"spec":{"generators":[{"plugin":{"configMapRef":{"name":"discovery-eu"}}}]}}`, "discovery-eu", true},
		{"no generators", `{"spec":{"template":{}}}`, ours, false},
		{"no spec", `{"metadata":{"name":"x"}}`, ours, false},
		{"plugin without configMapRef", `{"spec":{"generators":[{"plugin":{"input":{}}}]}}`, ours, false},
		{"name of the wrong type", `{"spec":{"generators":[{"plugin":{"configMapRef":{"name":42}}}]}}`, ours, false},
		{"generators of the wrong type", `{"spec":{"generators":{"plugin":{"configMapRef":{"name":"argocd-cluster-discovery"}}}}}`, ours, false},
		{"empty configured name matches nothing", `{"spec":{"generators":[{"plugin":{"configMapRef":{"name":""}}}]}}`, "", false},
		{"selector beside a generator is not a generator", `{"spec":{"generators":[{"clusters":{},"selector":{"matchLabels":{"plugin":"argocd-cluster-discovery"}}}]}}`, ours, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj map[string]any
			require.NoError(t, json.Unmarshal([]byte(tt.appSet), &obj))
			assert.Equal(t, tt.want, UsesPlugin(obj, tt.configMap))
		})
	}
}

func TestUsesPluginDepthBound(t *testing.T) {
	// a pathological object nested beyond maxNesting is not walked to the end
	gen := map[string]any{"plugin": map[string]any{"configMapRef": map[string]any{"name": "p"}}}
	for range maxNesting + 2 {
		gen = map[string]any{"matrix": map[string]any{"generators": []any{gen}}}
	}
	assert.False(t, UsesPlugin(map[string]any{"spec": map[string]any{"generators": []any{gen}}}, "p"))
}
