package azurearm

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// scopeTags are the default scope tag names.
func scopeTags() Selection {
	return Selection{TenantTag: DefaultTenantTag, ProjectTag: DefaultProjectTag, NamespacesTag: DefaultNamespacesTag}
}

func TestLabels(t *testing.T) {
	long := strings.Repeat("x", 64)
	logs := &testlog.Buffer{}
	s := NewSelector(scopeTags(), slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	got := s.Labels(map[string]string{
		"env":         "prod",
		"cost center": "dropped: cost-center is taken",
		"cost-center": "kept: the valid key wins",
		"team name":   "Payments EU",
		"Owner":       "team@example.com",
		"-edge-":      "--v--",
		"ünïcode":     "ok",
		long:          "dropped: key too long",
		"toolong":     long,
		"empty":       "",
		"only:::":     "x",
		"::":          "dropped: nothing left",
		"bad-value":   "::",
	}, "c")
	assert.Equal(t, map[string]string{
		"env":         "prod",
		"cost-center": "kept--the-valid-key-wins",
		"team-name":   "Payments-EU",
		"Owner":       "team-example.com",
		"edge":        "v",
		"n-code":      "ok",
		"empty":       "",
		"only":        "x",
	}, got)
	for _, line := range []string{
		`"msg":"tag dropped: its label key is taken by another tag","cluster":"c","tag":"cost center","label":"cost-center"`,
		`"msg":"tag dropped: key cannot be a label key","cluster":"c","tag":"::"`,
		`"msg":"tag dropped: value cannot be a label value","cluster":"c","tag":"toolong"`,
	} {
		assert.Contains(t, logs.String(), line)
	}
	assert.NotContains(t, logs.String(), "Payments", "tag values are not logged")
}

func TestLabelAllowAndDenyLists(t *testing.T) {
	tests := []struct {
		name          string
		label, ignore []string
		want          map[string]string
	}{
		{"every tag", nil, nil, map[string]string{"env": "prod", "Team": "a", "cost": "b"}},
		{"allow list, case-insensitive", []string{"ENV", "team"}, nil, map[string]string{"env": "prod", "Team": "a"}},
		{"deny list wins", []string{"ENV", "team"}, []string{" TEAM "}, map[string]string{"env": "prod"}},
		{"deny list alone", nil, []string{"cost"}, map[string]string{"env": "prod", "Team": "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := scopeTags()
			sel.LabelTags, sel.IgnoreTags = tt.label, tt.ignore
			got := NewSelector(sel, slog.New(slog.DiscardHandler)).Labels(map[string]string{"env": "prod", "Team": "a", "cost": "b"}, "c")
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSanitizeLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "1.31": "1.31", "4.15.27": "4.15.27", "a b": "a-b", " a ": "a", "rg(prod)": "rg-prod", "a_b": "a_b",
	} {
		t.Run("valid "+in, func(t *testing.T) {
			got, ok := SanitizeLabelValue(in)
			assert.True(t, ok, in)
			assert.Equal(t, want, got, in)
		})
	}
	for _, in := range []string{"(", "...", strings.Repeat("a", 64)} {
		t.Run("invalid "+in, func(t *testing.T) {
			_, ok := SanitizeLabelValue(in)
			assert.False(t, ok, in)
		})
	}
}

func TestSkip(t *testing.T) {
	tags := map[string]string{"env": "prod", "ArgoCD": "enabled"}
	tests := []struct {
		name   string
		sel    Selection
		rg     string
		skip   SkipReason
		detail string
	}{
		{"no filter", Selection{}, "rg", "", ""},
		{"resource group kept, case-insensitive", Selection{ResourceGroups: []string{"RG-Apps"}}, "rg-apps", "", ""},
		{"resource group filtered", Selection{ResourceGroups: []string{"other"}}, "rg-apps", SkipResourceGroup, "rg-apps"},
		{"include tags match, keys case-insensitive", Selection{IncludeTags: map[string]string{"argocd": "enabled"}}, "rg", "", ""},
		{"include tags, any value", Selection{IncludeTags: map[string]string{"ENV": "*"}}, "rg", "", ""},
		{"include tags, value differs", Selection{IncludeTags: map[string]string{"argocd": "Enabled"}}, "rg", SkipTags, "a tag of includeTags is missing"},
		{"include tags, tag missing", Selection{IncludeTags: map[string]string{"team": "*"}}, "rg", SkipTags, "a tag of includeTags is missing"},
		{"exclude tags", Selection{ExcludeTags: map[string]string{"env": "prod"}}, "rg", SkipTags, "a tag of excludeTags is present"},
		{"exclude tags, any value", Selection{ExcludeTags: map[string]string{"Env": "*"}}, "rg", SkipTags, "a tag of excludeTags is present"},
		{"exclude tags, no match", Selection{ExcludeTags: map[string]string{"env": "dev", "legacy": "*"}}, "rg", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			skip, detail := NewSelector(tt.sel, slog.New(slog.DiscardHandler)).Skip(tt.rg, tags)
			assert.Equal(t, tt.skip, skip)
			assert.Equal(t, tt.detail, detail)
		})
	}
}

func TestScope(t *testing.T) {
	legacy := Selection{TenantTag: "tenant", ProjectTag: "project", NamespacesTag: "namespaces"}
	tests := []struct {
		name   string
		sel    Selection
		tags   map[string]string
		want   sources.Cluster
		reason string
	}{
		{"no scope tag", scopeTags(), map[string]string{"project": "cost-center-42"}, sources.Cluster{}, ""},
		{"scope from the default tags, keys case-insensitive", scopeTags(),
			map[string]string{"Tenant": " acme ", "ArgoCD-Project": "acme-prod", "argocd-namespaces": "apps, jobs;apps\tbatch"},
			sources.Cluster{Tenant: "acme", Project: "acme-prod", Namespaces: []string{"apps", "jobs", "batch"}, TenantFromOwner: true, ProjectFromOwner: true}, ""},
		{"configured tag names", legacy, map[string]string{"PROJECT": "acme-prod"},
			sources.Cluster{Project: "acme-prod", ProjectFromOwner: true}, ""},
		{"invalid project", legacy, map[string]string{"project": "Acme Prod"}, sources.Cluster{}, "tag project is not a valid AppProject name"},
		{"invalid namespaces never widen the scope", legacy, map[string]string{"namespaces": "apps,Bad_NS"}, sources.Cluster{},
			`tag namespaces holds "Bad_NS", not a namespace name`},
		{"empty namespaces tag", legacy, map[string]string{"namespaces": " , "}, sources.Cluster{}, "tag namespaces names no namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c sources.Cluster
			reason := NewSelector(tt.sel, slog.New(slog.DiscardHandler)).Scope(&c, tt.tags)
			assert.Equal(t, tt.reason, reason)
			assert.Equal(t, tt.want, c, "a scope that cannot be read sets nothing")
		})
	}
}

func TestTagValue(t *testing.T) {
	tags := map[string]string{"Env": "a", "ENV": "b", "team": "c"}
	v, ok := TagValue(tags, "ENV")
	require.True(t, ok)
	assert.Equal(t, "b", v, "an exact key first")
	v, ok = TagValue(tags, "env")
	require.True(t, ok)
	assert.Equal(t, "b", v, "else the first key in sorted order: ENV < Env")
	_, ok = TagValue(tags, "owner")
	assert.False(t, ok)
}

func TestDeref(t *testing.T) {
	s := "x"
	assert.Equal(t, "x", Deref(&s))
	assert.Empty(t, Deref[string](nil))
	assert.Equal(t, map[string]string{"a": "x", "b": ""}, DerefTags(map[string]*string{"a": &s, "b": nil}))
	assert.Empty(t, DerefTags(nil))
}
