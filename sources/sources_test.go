package sources_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestProviderValid(t *testing.T) {
	tests := []struct {
		p    sources.Provider
		want bool
	}{
		{sources.ProviderStatic, true},
		{sources.ProviderRancher, true},
		{sources.ProviderEKS, true},
		{sources.ProviderAKS, true},
		{"static", true},
		{"", false},
		{"Static", false},
		{"EKS", false},
		{"gke", false},
		{" static", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", string(tt.p)), func(t *testing.T) {
			assert.Equal(t, tt.want, tt.p.Valid())
		})
	}
}

func TestProviders(t *testing.T) {
	got := sources.Providers()
	assert.Equal(t, []sources.Provider{"static", "rancher", "eks", "aks"}, got)
	for _, p := range got {
		assert.True(t, p.Valid(), "%s", p)
	}
	got[0] = "mutated"
	assert.Equal(t, sources.ProviderStatic, sources.Providers()[0], "Providers must return a fresh slice")
}
