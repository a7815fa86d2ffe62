package static

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestDemoFiles(t *testing.T) {
	const demoDir = "../../testdata/demo"
	tests := []struct {
		file     string
		authKind sources.AuthKind
		tenants  []string
	}{
		{file: "clusters-aws.yaml", authKind: sources.AuthAWS, tenants: []string{"acme", "globex", "initech"}},
		{file: "clusters-azure.yaml", authKind: sources.AuthExec, tenants: []string{"acme", "globex", "initech"}},
	}
	all := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			src, err := New(Config{File: tt.file}, demoDir)
			require.NoError(t, err)
			cs, err := src.Clusters(context.Background())
			require.NoError(t, err)
			require.Len(t, cs, 6)

			tenants := map[string]bool{}
			for _, c := range cs {
				assert.NoError(t, c.Validate(), c.Name)
				assert.True(t, c.Ready, "%s must be ready", c.Name)
				assert.Empty(t, c.NotReadyReason, c.Name)
				assert.NotEmpty(t, c.Tenant, "%s has no tenant", c.Name)
				assert.Equal(t, c.Tenant, c.Labels["tenant"], "%s: tenant label", c.Name)
				assert.Equal(t, c.Tenant, c.Project, c.Name)
				assert.True(t, strings.HasPrefix(c.Name, c.Tenant+"-"), "%s: name starts with its tenant", c.Name)
				assert.Equal(t, sources.ProviderStatic, c.Provider, c.Name)
				assert.Equal(t, tt.authKind, c.Auth.Kind, c.Name)
				assert.NoError(t, sources.ValidateCAData(c.CA.Data()), c.Name)
				assert.True(t, strings.HasPrefix(c.Server, "https://"), c.Name)
				assert.False(t, strings.HasSuffix(c.Server, "/"), c.Name)
				assert.NotEmpty(t, c.Region, c.Name)
				assert.NotEmpty(t, c.Account, c.Name)
				tenants[c.Tenant] = true
				if prev, dup := all[c.Name]; dup {
					t.Errorf("cluster %s is in both %s and %s", c.Name, prev, tt.file)
				}
				all[c.Name] = tt.file
			}
			var gotTenants []string
			for _, tn := range tt.tenants {
				if tenants[tn] {
					gotTenants = append(gotTenants, tn)
				}
			}
			assert.Equal(t, tt.tenants, gotTenants)
			assert.Len(t, tenants, len(tt.tenants))
		})
	}
	assert.Len(t, all, 12, "the two demo sources list 12 distinct clusters")
}
