package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/chartgen"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestGeneratedFromTheRegistry: the chart's values schema for sources and
// the depguard rules that keep the providers apart are what cmd/chartgen
// makes from the registry; a provider added to the registry fails here
// until go generate ./cmd/argocd-cluster-discovery/config has run.
func TestGeneratedFromTheRegistry(t *testing.T) {
	for _, tc := range []struct {
		path string
		make func([]byte, *sources.Registry) ([]byte, error)
	}{
		{"../../deploy/helm/argocd-cluster-discovery/values.schema.json", chartgen.Schema},
		{"../../.golangci.yml", chartgen.Depguard},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			have, err := os.ReadFile(tc.path)
			require.NoError(t, err)
			want, err := tc.make(have, config.Providers())
			require.NoError(t, err)
			assert.Equal(t, string(want), string(have), "run go generate ./cmd/argocd-cluster-discovery/config")
		})
	}
}
