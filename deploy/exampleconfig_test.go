package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
)

// TestExampleConfigListsEveryDefault: deploy/examples/config.yaml says it
// lists every key with its default. Every key the service defaults must be
// there, with the default's value, so the example cannot drift from the
// code. The sources and the token references are the example's own.
func TestExampleConfigListsEveryDefault(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(examplesDir, "config.yaml"))
	require.NoError(t, err)
	exJSON, err := yaml.YAMLToJSON(b)
	require.NoError(t, err)
	var example map[string]any
	require.NoError(t, json.Unmarshal(exJSON, &example))

	def := config.Default()
	defJSON, err := json.Marshal(&def)
	require.NoError(t, err)
	var defaults map[string]any
	require.NoError(t, json.Unmarshal(defJSON, &defaults))

	skip := map[string]bool{"sources": true, "server.tokens": true}
	var checked []string
	var walk func(prefix string, d map[string]any)
	walk = func(prefix string, d map[string]any) {
		for k, v := range d {
			p := strings.TrimPrefix(prefix+"."+k, ".")
			if skip[p] {
				continue
			}
			if m, ok := v.(map[string]any); ok {
				walk(p, m)
				continue
			}
			checked = append(checked, p)
			got, ok := lookup(example, p)
			if !assert.True(t, ok, "deploy/examples/config.yaml lacks %s (default %v)", p, v) {
				continue
			}
			assert.True(t, sameValue(v, got), "deploy/examples/config.yaml: %s is %v, the default is %v", p, got, v)
		}
	}
	walk("", defaults)
	sort.Strings(checked)
	assert.Greater(t, len(checked), 30, "the walk must see the defaults: %v", checked)

	_, err = config.Parse(b, examplesDir)
	require.NoError(t, err, "the example loads")
}

func lookup(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// sameValue compares JSON values, durations by what they mean ("5m" is
// "5m0s").
func sameValue(a, b any) bool {
	as, aok := a.(string)
	bs, bok := b.(string)
	if aok && bok {
		ad, aerr := time.ParseDuration(as)
		bd, berr := time.ParseDuration(bs)
		if aerr == nil && berr == nil {
			return ad == bd
		}
	}
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	return string(aj) == string(bj)
}
