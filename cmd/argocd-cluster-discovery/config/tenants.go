package config

import (
	"path"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateTenants checks what the tenant rules say proves membership: the
// sources they name are configured, their name patterns are patterns.
func (c *Config) validateTenants(at *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make([]string, 0, len(c.Secrets.Tenants))
	for t := range c.Secrets.Tenants {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		rule := c.Secrets.Tenants[t]
		for i, s := range rule.Sources {
			if !slices.ContainsFunc(c.Sources, func(src Source) bool { return src.Name == s }) {
				errs = append(errs, field.NotFound(at.Key(t).Child("sources").Index(i), s))
			}
		}
		for i, p := range rule.Names {
			if _, err := path.Match(p, ""); err != nil {
				errs = append(errs, field.Invalid(at.Key(t).Child("names").Index(i), p, "not a path.Match pattern: "+err.Error()))
			}
		}
		if len(rule.Names) > 0 && len(rule.Sources) == 0 && len(rule.Accounts) == 0 && len(rule.ResourceGroups) == 0 && len(rule.FleetWorkspaces) == 0 {
			errs = append(errs, field.Required(at.Key(t).Child("sources"),
				"names only narrow what proves membership (a Rancher cluster's owner may rename it): add sources, accounts, resourceGroups or fleetWorkspaces"))
		}
	}
	return errs
}
