package sources

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// tenantRules are the rules TestTenantFromTheOwner checks claims with.
func tenantRules() map[string]TenantRule {
	return map[string]TenantRule{
		"acme":      {Project: "acme", Sources: []string{"rancher-acme"}},
		"globex":    {Project: "globex", Accounts: []string{"111111111111"}, Names: []string{"globex-*"}},
		"initech":   {Namespaces: []string{"initech"}},   // proves nothing: no sources, accounts, groups or names
		"hooli":     {Sources: []string{"rancher-acme"}}, // admits, but sets no project
		"wayne":     {Project: "wayne", ResourceGroups: []string{"RG-Wayne"}},
		"lumon":     {Project: "lumon", Names: []string{"acme-*"}}, // names alone prove nothing
		"stark":     {Project: "stark", Sources: []string{"rancher-acme"}, FleetWorkspaces: []string{"fleet-stark"}},
		"cyberdyne": {Project: "cyberdyne", Sources: []string{"rancher-acme"}, Accounts: []string{"111111111111"}},
	}
}

// TestTenantFromTheOwner: a tenant or a project that the cluster's owner
// wrote counts only when the source trusts its clusters' labels, or when a
// tenant rule admits the cluster (and, for the project, sets it): the
// owner may select among the tenants the operator allows, never claim one.
func TestTenantFromTheOwner(t *testing.T) {
	rules := tenantRules()
	cluster := func(change func(c *Cluster)) Cluster {
		c := Cluster{Name: "acme-prod", Source: "rancher-acme", Account: "111111111111", Tenant: "acme", TenantFromOwner: true}
		if change != nil {
			change(&c)
		}
		return c
	}
	for _, tc := range []struct {
		name        string
		c           Cluster
		trust       bool
		why         string // empty: taken
		wantProject string
	}{
		{name: "admitted by its source", c: cluster(nil), wantProject: "acme"},
		{name: "claimed from another source", c: cluster(func(c *Cluster) { c.Source = "rancher-tenants" }),
			why: `tenant "acme" is the cluster owner's label or tag, and no rule secrets.tenants.acme admits this cluster (sources, accounts, resourceGroups, fleetWorkspaces or names)`},
		{name: "a tenant without a rule", c: cluster(func(c *Cluster) { c.Tenant = "umbrella" }),
			why: `tenant "umbrella" is the cluster owner's label or tag, and no rule secrets.tenants.umbrella admits this cluster (sources, accounts, resourceGroups, fleetWorkspaces or names)`},
		{name: "a rule that proves nothing", c: cluster(func(c *Cluster) { c.Tenant = "initech" }),
			why: `tenant "initech" is the cluster owner's label or tag, and no rule secrets.tenants.initech admits this cluster (sources, accounts, resourceGroups, fleetWorkspaces or names)`},
		{name: "account and name both match", c: cluster(func(c *Cluster) { c.Tenant, c.Name = "globex", "globex-eu" }), wantProject: "globex"},
		{name: "the account matches, not the name", c: cluster(func(c *Cluster) { c.Tenant = "globex" }),
			why: `tenant "globex" is the cluster owner's label or tag, and no rule secrets.tenants.globex admits this cluster (sources, accounts, resourceGroups, fleetWorkspaces or names)`},
		{name: "a name alone proves nothing", c: cluster(func(c *Cluster) { c.Tenant = "lumon" }),
			why: `tenant "lumon" is the cluster owner's label or tag, and no rule secrets.tenants.lumon admits this cluster (sources, accounts, resourceGroups, fleetWorkspaces or names)`},
		{name: "an AKS cluster in the tenant's resource group (case-insensitive)", c: cluster(func(c *Cluster) {
			c.Tenant, c.Provider, c.Group = "wayne", ProviderAKS, "rg-wayne"
		}), wantProject: "wayne"},
		{name: "an AKS cluster in another resource group", c: cluster(func(c *Cluster) { c.Tenant, c.Provider, c.Group = "wayne", ProviderAKS, "rg-other" }),
			why: `tenant "wayne" is the cluster owner's label or tag, and no rule secrets.tenants.wayne admits this cluster (sources, accounts, resourceGroups, fleetWorkspaces or names)`},
		{name: "an ARO cluster in the tenant's resource group (case-insensitive)", c: cluster(func(c *Cluster) {
			c.Tenant, c.Provider, c.Group = "wayne", ProviderARO, "RG-WAYNE"
		}), wantProject: "wayne"},
		{name: "an ARO cluster in another resource group", c: cluster(func(c *Cluster) { c.Tenant, c.Provider, c.Group = "wayne", ProviderARO, "rg-other" }),
			why: `tenant "wayne" is the cluster owner's label or tag, and no rule secrets.tenants.wayne admits this cluster (sources, accounts, resourceGroups, fleetWorkspaces or names)`},
		{name: "a Rancher cluster whose fleet workspace has the resource group's name", c: cluster(func(c *Cluster) {
			c.Tenant, c.Provider, c.Group = "wayne", ProviderRancher, "rg-wayne"
		}), why: `tenant "wayne" is the cluster owner's label or tag, and no rule secrets.tenants.wayne admits this cluster (sources, accounts, resourceGroups, fleetWorkspaces or names)`},
		{name: "a Rancher cluster in the tenant's fleet workspace", c: cluster(func(c *Cluster) {
			c.Tenant, c.Provider, c.Group = "stark", ProviderRancher, "fleet-stark"
		}), wantProject: "stark"},
		{name: "a Rancher cluster in fleet-default", c: cluster(func(c *Cluster) { c.Tenant, c.Provider, c.Group = "stark", ProviderRancher, "fleet-default" }),
			why: `tenant "stark" is the cluster owner's label or tag, and no rule secrets.tenants.stark admits this cluster (sources, accounts, resourceGroups, fleetWorkspaces or names)`},
		{name: "a Rancher cluster's account alone proves nothing (its owner names the cloud credential)", c: cluster(func(c *Cluster) {
			c.Tenant, c.Name, c.Provider = "globex", "globex-eu", ProviderRancher
		}), why: `tenant "globex" is the cluster owner's label or tag, and no rule secrets.tenants.globex admits this cluster (sources, accounts, resourceGroups, fleetWorkspaces or names)`},
		{name: "a Rancher cluster's account narrows its source", c: cluster(func(c *Cluster) {
			c.Tenant, c.Name, c.Provider = "cyberdyne", "cyberdyne-eu", ProviderRancher
		}), wantProject: "cyberdyne"},
		{name: "a Rancher cluster in another account than its source's rule names", c: cluster(func(c *Cluster) {
			c.Tenant, c.Provider, c.Account = "cyberdyne", ProviderRancher, "222222222222"
		}), why: `tenant "cyberdyne" is the cluster owner's label or tag, and no rule secrets.tenants.cyberdyne admits this cluster (sources, accounts, resourceGroups, fleetWorkspaces or names)`},
		{name: "a project the owner wrote, no rule setting one", c: cluster(func(c *Cluster) {
			c.Tenant, c.Project, c.ProjectFromOwner = "hooli", "default", true
		}), why: `project "default" is the cluster owner's label or tag; only the tenant's rule (secrets.tenants.<tenant>.project) or the source may set it`},
		{name: "a project the owner wrote, replaced by the rule's", c: cluster(func(c *Cluster) { c.Project, c.ProjectFromOwner = "globex", true }),
			wantProject: "acme"},
		{name: "trusted: as written", trust: true, c: cluster(func(c *Cluster) { c.Tenant, c.Project, c.ProjectFromOwner = "umbrella", "umbrella", true }),
			wantProject: "umbrella"},
		{name: "the operator's tenant (the source's setting) needs no proof", c: cluster(func(c *Cluster) {
			c.Tenant, c.TenantFromOwner, c.Project = "umbrella", false, "umbrella"
		}), wantProject: "umbrella"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			why := c.ApplyTenantRule(rules, tc.trust)
			assert.Equal(t, tc.why, why)
			if tc.why == "" {
				assert.Equal(t, tc.wantProject, c.Project)
			}
		})
	}
}
