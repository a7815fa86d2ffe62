package azurearm

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// problems renders what errs reports below the section "toy", one line
// each.
func problems(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, strings.TrimPrefix(e.Error(), "toy."))
	}
	return out
}

func TestIdentityValidate(t *testing.T) {
	tests := []struct {
		name string
		id   Identity
		want []string
	}{
		{"the defaults", Identity{Cloud: DefaultCloud}, nil},
		{"every key", Identity{TenantID: "72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80", ClientID: "80FAF920-1908-4B52-B5EF-A8E7BEDFC67A",
			Cloud: "AzureGovernment", ARMEndpoint: "https://management.usgovcloudapi.net/"}, nil},
		{"bad ids", Identity{TenantID: "contoso", ClientID: "x", Cloud: "AzureChina"}, []string{
			`tenantID: Invalid value: "contoso": not a GUID`,
			`clientID: Invalid value: "x": not a GUID`,
		}},
		{"cloud and endpoint", Identity{Cloud: "Mars", ARMEndpoint: "http://user:pw@management.example.com"}, []string{
			`cloud: Unsupported value: "Mars": supported values: "AzurePublic", "AzureChina", "AzureGovernment"`,
			`armEndpoint: Invalid value: "http://user:xxxxx@management.example.com": must be an https URL without user info`,
		}},
		{"no cloud", Identity{}, []string{`cloud: Unsupported value: "": supported values: "AzurePublic", "AzureChina", "AzureGovernment"`}},
		{"an endpoint that does not parse", Identity{Cloud: DefaultCloud, ARMEndpoint: "https://[::1"}, []string{
			`armEndpoint: Invalid value: must be an https URL without user info`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, problems(tt.id.Validate(field.NewPath("toy"))))
		})
	}
}

func TestSelectionValidate(t *testing.T) {
	tests := []struct {
		name       string
		sel        Selection
		subs, tags []string
	}{
		{"nothing set", Selection{}, nil, nil},
		{"subscriptions", Selection{Subscriptions: []string{"9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41", "sub-1", "9B4D2F6E-1A3C-4E8B-B7D5-2C0F9E8A6D41"}}, []string{
			`subscriptions[1]: Invalid value: "sub-1": not a subscription id (a GUID)`,
			`subscriptions[2]: Duplicate value: "9B4D2F6E-1A3C-4E8B-B7D5-2C0F9E8A6D41": repeats toy.subscriptions[0]`,
		}, nil},
		{"resource groups", Selection{ResourceGroups: []string{"ok", " ", "a/b"}}, []string{
			`resourceGroups[1]: Invalid value: " ": not a resource group name`,
			`resourceGroups[2]: Invalid value: "a/b": not a resource group name`,
		}, nil},
		{"tags", Selection{
			LabelTags: []string{""}, IgnoreTags: []string{"x", " "},
			IncludeTags: map[string]string{"": "x"}, ExcludeTags: map[string]string{"": "*", "ok": "*"},
		}, nil, []string{
			`labelTags[0]: Invalid value: "": empty tag key`,
			`ignoreTags[1]: Invalid value: " ": empty tag key`,
			`includeTags: Invalid value: "": empty tag key`,
			`excludeTags: Invalid value: "": empty tag key`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.subs, problems(tt.sel.ValidateSubscriptions(field.NewPath("toy"))))
			assert.Equal(t, tt.tags, problems(tt.sel.ValidateTags(field.NewPath("toy"))))
		})
	}
}

func TestGUIDsAndURLs(t *testing.T) {
	for s, want := range map[string]bool{
		"72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80": true, "72F988BF-0000-4E8B-A1D2-3C4B5A6F7E80": true,
		"": false, "72f988bf00004e8ba1d23c4b5a6f7e80": false, "{72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80}": false,
	} {
		t.Run("guid "+s, func(t *testing.T) {
			assert.Equal(t, want, IsGUID(s))
			assert.Equal(t, want || s == "", AppendGUID(nil, field.NewPath("toy", "id"), s) == nil, "an empty value is no problem")
		})
	}
	for s, want := range map[string]bool{
		"https://arm.example.com": true, "https://arm.example.com:8443/path": true,
		"http://arm.example.com": false, "https://user@arm.example.com": false, "https://": false, "arm.example.com": false,
	} {
		t.Run("url "+s, func(t *testing.T) { assert.Equal(t, want, IsHTTPSURL(s)) })
	}
	assert.Equal(t, "https://user:xxxxx@arm.example.com", RedactURL("https://user:secret@arm.example.com"))
	assert.Equal(t, field.OmitValueType{}, RedactURL("https://[::1"))
}

// toyName is a provider's nameData.
type toyName NameData

func TestParseNameTemplate(t *testing.T) {
	tests := []struct {
		name, tmpl, want, err string
	}{
		{"the default", DefaultNameTemplate, "alpha", ""},
		{"every field and lower", `{{.Name}}-{{.ResourceGroup | lower}}-{{.Subscription}}-{{.Location}}-{{index .Tags "env"}}`, "alpha-rg-apps-s1-westeurope-prod", ""},
		{"a missing tag renders empty", `{{.Name}}{{index .Tags "nope"}}`, "alpha", ""},
		{"an unknown field names the provider's type", "{{.Cluster}}", "",
			`template: name:1:2: executing "name" at <.Cluster>: can't evaluate field Cluster in type azurearm.toyName`},
		{"a syntax error", "{{.Name", "", `template: name:1: unclosed action`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := ParseNameTemplate(tt.tmpl, toyName(SampleName()))
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, tmpl.Execute(&b, toyName{Name: "alpha", ResourceGroup: "RG-Apps", Subscription: "s1", Location: "westeurope",
				Tags: map[string]string{"env": "prod"}}))
			assert.Equal(t, tt.want, b.String())
		})
	}
}
