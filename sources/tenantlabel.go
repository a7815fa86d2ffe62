package sources

import "maps"

// LabelTenant is the label key that carries a cluster's tenant in the
// plugin answer's metadata.labels and on its cluster Secret, where
// ApplicationSets select a tenant's clusters by it.
const LabelTenant = "tenant"

// SetTenantLabel makes the label LabelTenant say c's Tenant, the one the
// tenant rules checked: set to it, or removed when c has none. A label or
// tag the cluster's owner wrote that ends up under that key (a cloud tag
// "tenant_" or "-tenant" once made a valid label key, a Rancher label
// "tenant" where the tenant is read from another label) never claims a
// tenant. The labels are copied when changed, never modified in place:
// listings share label maps.
func (c *Cluster) SetTenantLabel() {
	v, ok := c.Labels[LabelTenant]
	switch {
	case c.Tenant == "" && !ok, c.Tenant != "" && ok && v == c.Tenant:
		return
	}
	c.Labels = maps.Clone(c.Labels)
	if c.Tenant == "" {
		delete(c.Labels, LabelTenant)
		return
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels[LabelTenant] = c.Tenant
}
