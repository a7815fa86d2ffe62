package aro

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestDNSLabel(t *testing.T) {
	const id = "/subscriptions/x/resourcegroups/rg/providers/microsoft.redhatopenshift/openshiftclusters/n"
	tests := map[string]string{
		"alpha":                 "alpha",
		"Team_A.(Prod)":         "team-a-prod",
		"a--b":                  "a--b",
		"-lead_and_trail-":      "lead-and-trail",
		"(())":                  "",
		"ünïcode":               "n-code",
		strings.Repeat("x", 63): strings.Repeat("x", 63),
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			got := dnsLabel(in, id)
			assert.Equal(t, want, got)
			if got != "" {
				assert.Empty(t, validation.IsDNS1123Label(got))
			}
		})
	}
	long := strings.Repeat("abc.", 22) + "de" // 90 characters
	a, b := dnsLabel(long, id+"1"), dnsLabel(long, id+"2")
	assert.Len(t, a, 63)
	assert.Empty(t, validation.IsDNS1123Label(a))
	assert.NotEqual(t, a, b, "two long names with one beginning stay apart")
	assert.True(t, strings.HasPrefix(a, "abc-abc-"))
	assert.Equal(t, a, dnsLabel(long, id+"1"), "deterministic")
}

func TestForHost(t *testing.T) {
	ca := base64.StdEncoding.EncodeToString(testCAPEM(t))
	cfg := Config{
		ManagedDomains: []string{".aroapp.io", "aroapp.azure.us"},
		CustomDomainCA: map[string]CARef{"example.com": {CAData: ca}, "Team.Example.com": {CAFile: "/nonexistent/ca.pem"}},
	}
	tr := loadTrust(&cfg)
	require.EqualError(t, tr.err(), "customDomainCA[Team.Example.com].caFile /nonexistent/ca.pem: no such file or directory")
	tests := []struct {
		host   string
		ca     bool
		reason string
	}{
		{"api.x.westeurope.aroapp.io", false, ""},
		{"api.x.usgovvirginia.aroapp.azure.us", false, ""},
		{"api.ocp.example.com", true, ""},
		{"api.ocp.team.example.com", false, "CA unavailable: customDomainCA[Team.Example.com].caFile /nonexistent/ca.pem: no such file or directory"},
		{"api.evilaroapp.io", false, "custom domain: api.evilaroapp.io is not under a managed domain (managedDomains: .aroapp.io, .aroapp.azure.us), and no CA is configured for it (customDomainCA or defaultCA)"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			got, reason := tr.forHost(tt.host)
			assert.Equal(t, tt.reason, reason)
			assert.Equal(t, tt.ca, !got.IsZero())
		})
	}
}
