package azurearm

import (
	"bytes"
	"net/url"
	"regexp"
	"strings"
	"text/template"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The defaults of the keys the Azure providers have in common.
const (
	DefaultCloud         = "AzurePublic"
	DefaultTenantTag     = "tenant"
	DefaultProjectTag    = "argocd-project"
	DefaultNamespacesTag = "argocd-namespaces"
	DefaultConcurrency   = 8
	MaxConcurrency       = 64
	DefaultNameTemplate  = "{{.Name}}"
)

// Identity is how a source reaches Azure Resource Manager: the keys
// tenantID, clientID, cloud and armEndpoint of an Azure provider's section.
type Identity struct {
	// TenantID and ClientID select the identity: workload identity first,
	// then managed identity with ClientID, then the default chain (see
	// NewClient). Both may be empty.
	TenantID, ClientID string
	// Cloud is AzurePublic, AzureChina or AzureGovernment.
	Cloud string
	// ARMEndpoint, when set, overrides the cloud's Resource Manager
	// endpoint; it must be https.
	ARMEndpoint string
}

// Validate returns the problems of the identity keys under path, in the
// order tenantID, clientID, cloud, armEndpoint. It changes nothing.
func (id Identity) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = AppendGUID(errs, path.Child("tenantID"), id.TenantID)
	errs = AppendGUID(errs, path.Child("clientID"), id.ClientID)
	if _, ok := cloudOf(id.Cloud); !ok {
		errs = append(errs, field.NotSupported(path.Child("cloud"), id.Cloud, cloudNames()))
	}
	if id.ARMEndpoint != "" && !IsHTTPSURL(id.ARMEndpoint) {
		errs = append(errs, field.Invalid(path.Child("armEndpoint"), RedactURL(id.ARMEndpoint), "must be an https URL without user info"))
	}
	return errs
}

// cloudNames are the values of the cloud key, in the order the errors
// list them.
func cloudNames() []string { return []string{"AzurePublic", "AzureChina", "AzureGovernment"} }

// cloudOf maps the cloud key to the SDK's cloud configuration.
func cloudOf(name string) (cloud.Configuration, bool) {
	switch name {
	case "AzurePublic":
		return cloud.AzurePublic, true
	case "AzureChina":
		return cloud.AzureChina, true
	case "AzureGovernment":
		return cloud.AzureGovernment, true
	}
	return cloud.Configuration{}, false
}

// Selection is what an Azure provider's section says about which
// subscriptions and clusters are listed and how their tags are read: the
// keys subscriptions, resourceGroups, includeTags, excludeTags,
// labelTags, ignoreTags, tenantTag, projectTag and namespacesTag.
type Selection struct {
	// Subscriptions to list, by id; empty means every subscription the
	// identity can see (Client.Subscriptions).
	Subscriptions []string
	// ResourceGroups, when set, keeps only clusters in these resource
	// groups, compared case-insensitively.
	ResourceGroups []string
	// IncludeTags keeps only clusters carrying every one of these tags;
	// ExcludeTags drops clusters carrying any of them. Keys match
	// case-insensitively, values exactly; "*" matches any value.
	IncludeTags, ExcludeTags map[string]string
	// LabelTags lists the tag keys copied to labels (empty: every tag);
	// IgnoreTags lists tag keys never copied. Case-insensitive.
	LabelTags, IgnoreTags []string
	// TenantTag, ProjectTag and NamespacesTag name the scope tags.
	TenantTag, ProjectTag, NamespacesTag string
}

// guidRE is a GUID: a tenant, client, application or subscription id.
var guidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// IsGUID reports whether s is a GUID, in any case.
func IsGUID(s string) bool { return guidRE.MatchString(s) }

// ValidateSubscriptions returns the problems of the subscriptions and
// resourceGroups keys under path: ids that are not GUIDs, ids listed
// twice (case-insensitively), names that are no resource group name.
func (s Selection) ValidateSubscriptions(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]int{}
	for i, sub := range s.Subscriptions {
		p := path.Child("subscriptions").Index(i)
		if !IsGUID(sub) {
			errs = append(errs, field.Invalid(p, sub, "not a subscription id (a GUID)"))
			continue
		}
		if j, dup := seen[strings.ToLower(sub)]; dup {
			e := field.Duplicate(p, sub)
			e.Detail = "repeats " + path.Child("subscriptions").Index(j).String()
			errs = append(errs, e)
		}
		seen[strings.ToLower(sub)] = i
	}
	for i, rg := range s.ResourceGroups {
		if strings.TrimSpace(rg) == "" || strings.Contains(rg, "/") {
			errs = append(errs, field.Invalid(path.Child("resourceGroups").Index(i), rg, "not a resource group name"))
		}
	}
	return errs
}

// ValidateTags returns the problems of the labelTags, ignoreTags,
// includeTags and excludeTags keys under path: empty tag keys.
func (s Selection) ValidateTags(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, key := range []struct {
		name string
		list []string
	}{{"labelTags", s.LabelTags}, {"ignoreTags", s.IgnoreTags}} {
		for i, k := range key.list {
			if strings.TrimSpace(k) == "" {
				errs = append(errs, field.Invalid(path.Child(key.name).Index(i), k, "empty tag key"))
			}
		}
	}
	if _, ok := s.IncludeTags[""]; ok {
		errs = append(errs, field.Invalid(path.Child("includeTags"), "", "empty tag key"))
	}
	if _, ok := s.ExcludeTags[""]; ok {
		errs = append(errs, field.Invalid(path.Child("excludeTags"), "", "empty tag key"))
	}
	return errs
}

// AppendGUID appends to errs that v, at path, is not a GUID; an empty v
// is no problem.
func AppendGUID(errs field.ErrorList, path *field.Path, v string) field.ErrorList {
	if v != "" && !IsGUID(v) {
		errs = append(errs, field.Invalid(path, v, "not a GUID"))
	}
	return errs
}

// IsHTTPSURL reports whether s is an https URL with a host and no user
// info.
func IsHTTPSURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.User == nil
}

// RedactURL is s for an error message: its password hidden, or nothing
// of it when it does not parse.
func RedactURL(s string) any {
	u, err := url.Parse(s)
	if err != nil {
		return field.OmitValueType{}
	}
	return u.Redacted()
}

// NameData is what a nameTemplate sees. A provider renders its names with
// a type of its own defined on it (type nameData azurearm.NameData), so
// that a template's error names the provider's type.
type NameData struct {
	Name          string
	ResourceGroup string
	Subscription  string
	Location      string
	Tags          map[string]string
}

// SampleName is the NameData ParseNameTemplate renders a template with
// once, converted to the provider's type.
func SampleName() NameData {
	return NameData{Name: "n", ResourceGroup: "rg", Subscription: "s", Location: "l", Tags: map[string]string{}}
}

// ParseNameTemplate parses a nameTemplate (Go text/template with the
// function lower; a missing key renders empty) and renders it once with
// sample, the provider's nameData made of SampleName(), so that a field
// the data does not have fails at start-up rather than at a listing.
func ParseNameTemplate(s string, sample any) (*template.Template, error) {
	t, err := template.New("name").Option("missingkey=zero").
		Funcs(template.FuncMap{"lower": strings.ToLower}).Parse(s)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, sample); err != nil {
		return nil, err
	}
	return t, nil
}
