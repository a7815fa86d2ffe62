package sources

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSetTenantLabel: the label tenant says the cluster's Tenant, whatever
// the owner's labels held, and the listing's label map is never modified.
func TestSetTenantLabel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tenant string
		labels map[string]string
		want   map[string]string
		shared bool // want is the listing's own map (nothing to change)
	}{
		{name: "an owner's tenant label without a tenant is dropped", labels: map[string]string{"tenant": "globex", "env": "prod"},
			want: map[string]string{"env": "prod"}},
		{name: "an owner's tenant label is replaced by the tenant", tenant: "acme", labels: map[string]string{"tenant": "globex"},
			want: map[string]string{"tenant": "acme"}},
		{name: "the tenant is added", tenant: "acme", labels: map[string]string{"env": "prod"},
			want: map[string]string{"tenant": "acme", "env": "prod"}},
		{name: "no labels at all", tenant: "acme", want: map[string]string{"tenant": "acme"}},
		{name: "already the tenant", tenant: "acme", labels: map[string]string{"tenant": "acme"},
			want: map[string]string{"tenant": "acme"}, shared: true},
		{name: "no tenant, no label", labels: map[string]string{"env": "prod"}, want: map[string]string{"env": "prod"}, shared: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listing := map[string]string{}
			for k, v := range tc.labels {
				listing[k] = v
			}
			c := Cluster{Tenant: tc.tenant, Labels: listing}
			if tc.labels == nil {
				c.Labels = nil
			}
			c.SetTenantLabel()
			assert.Equal(t, tc.want, c.Labels)
			assert.Len(t, listing, len(tc.labels), "the listing's map keeps its labels")
			for k, v := range tc.labels {
				assert.Equal(t, v, listing[k], "the listing's map is not modified")
			}
			if tc.shared {
				c.Labels["probe"] = "x"
				assert.Equal(t, "x", listing["probe"], "nothing to change: the listing's map, not a copy")
			}
		})
	}
}
