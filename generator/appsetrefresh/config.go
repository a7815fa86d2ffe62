package appsetrefresh

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Config of a Trigger.
type Config struct {
	// PluginConfigMap is the configMapRef.name of our plugin generator.
	PluginConfigMap string
	// Namespaces are searched for ApplicationSets: names, or the single
	// entry AllNamespaces.
	Namespaces []string
	// Debounce is waited after a change before a pass, so that a burst of
	// changes (a listing, then the Secrets written for it) makes one pass.
	Debounce time.Duration
	// RetryAfter is waited before trying again after a failed pass.
	// Default 10s.
	RetryAfter time.Duration
	// DryRun logs what would be patched and patches nothing.
	DryRun bool
	// SecretsNamespace and SecretsSelector, when the namespace is set, name
	// the cluster Secrets (those our reconciler writes) whose creation,
	// deletion, or change of name, server or project wakes a pass too.
	SecretsNamespace string
	SecretsSelector  string
}

// Validate returns every problem of the configuration, each with its path
// under path (the applicationSetRefresh section of the configuration
// file); it changes nothing. The configuration loader and New call it
// alike.
func (c *Config) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.PluginConfigMap == "":
		errs = append(errs, field.Required(path.Child("pluginConfigMap"), ""))
	case len(validation.IsDNS1123Subdomain(c.PluginConfigMap)) > 0:
		errs = append(errs, field.Invalid(path.Child("pluginConfigMap"), c.PluginConfigMap, "not a ConfigMap name"))
	}
	if len(c.Namespaces) == 0 {
		errs = append(errs, field.Required(path.Child("namespaces"), "at least one, or "+AllNamespaces))
	}
	for i, ns := range c.Namespaces {
		switch {
		case ns == AllNamespaces && len(c.Namespaces) > 1:
			errs = append(errs, field.Invalid(path.Child("namespaces").Index(i), ns, "every namespace: must be the only entry"))
		case ns != AllNamespaces && len(validation.IsDNS1123Label(ns)) > 0:
			errs = append(errs, field.Invalid(path.Child("namespaces").Index(i), ns, "not a namespace name"))
		}
	}
	if c.Debounce <= 0 {
		errs = append(errs, field.Invalid(path.Child("debounce"), c.Debounce.String(), "must be above 0"))
	}
	if c.RetryAfter < 0 {
		errs = append(errs, field.Invalid(path.Child("retryAfter"), c.RetryAfter.String(), "must be at least 0"))
	}
	return errs
}

// InformerNamespaces are the namespaces to inform the trigger of
// ApplicationSets in, one informer each: the configured ones, or
// metav1.NamespaceAll for AllNamespaces.
func (c *Config) InformerNamespaces() []string {
	if containsAll(c.Namespaces) {
		return []string{metav1.NamespaceAll}
	}
	return c.Namespaces
}

func containsAll(ns []string) bool {
	for _, n := range ns {
		if n == AllNamespaces {
			return true
		}
	}
	return false
}
