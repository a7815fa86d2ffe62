package yamldocs

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

type (
	doc struct {
		Items []item `json:"items"`
	}
	item struct {
		Name     string            `json:"name"`
		Enabled  bool              `json:"enabled,omitempty"`
		Count    *int              `json:"count,omitempty"`
		Labels   map[string]string `json:"labels,omitempty"`
		Args     []string          `json:"args,omitempty"`
		Any      any               `json:"any,omitempty"`
		Own      own               `json:"own,omitempty"`
		embedded `json:",inline"`
	}
	embedded struct {
		Note string `json:"note,omitempty"`
	}
	own string
)

func (o *own) UnmarshalJSON([]byte) error { *o = "own"; return nil }

// TestRewrites lists the unquoted scalars read as another string, and
// only those: what a bool, an int, a type of its own or any takes is not
// one, nor is what is read as written.
func TestRewrites(t *testing.T) {
	for _, tt := range []struct {
		name, raw string
		want      []Rewrite
	}{
		{"read as written", "items:\n- name: a\n  labels: {tier: 1, canary: true, x: off-peak}\n  args: [x, -1, 2.5]\n", nil},
		{"quoted", "items:\n- name: 'yes'\n  labels: {\"on\": \"1.10\"}\n", nil},
		{"not strings", "items:\n- name: a\n  enabled: yes\n  count: 012\n  any: on\n  own: 1.10\n", nil},
		{"null as empty", "items:\n- name: a\n  labels: {env: }\n", nil},
		{"booleans", "items:\n- name: yes\n  labels:\n    env: No\n    on: x\n", []Rewrite{
			{Line: 2, Path: "items[0].name", Written: "yes", Read: "true"},
			{Line: 4, Path: "items[0].labels.env", Written: "No", Read: "false"},
			{Line: 5, Path: "items[0].labels", Key: true, Written: "on", Read: "true"},
		}},
		{"numbers", "items:\n- name: a\n  args: [1.10, 0x1F, 1e3, 0123, +1]\n", []Rewrite{
			{Line: 3, Path: "items[0].args[0]", Written: "1.10", Read: "1.1"},
			{Line: 3, Path: "items[0].args[1]", Written: "0x1F", Read: "31"},
			{Line: 3, Path: "items[0].args[2]", Written: "1e3", Read: "1000"},
			{Line: 3, Path: "items[0].args[3]", Written: "0123", Read: "83"},
			{Line: 3, Path: "items[0].args[4]", Written: "+1", Read: "1"},
		}},
		{"null", "items:\n- name: ~\n", []Rewrite{{Line: 2, Path: "items[0].name", Written: "~", Read: ""}}},
		{"an embedded field, by any case", "items:\n- Note: y\n", []Rewrite{{Line: 2, Path: "items[0].Note", Written: "y", Read: "true"}}},
		{"not YAML", "items: [\n", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Rewrites([]byte(tt.raw), reflect.TypeFor[doc]()))
		})
	}
	t.Run("into any: the keys", func(t *testing.T) {
		raw := "a: yes\nb:\n  - {off: 1.10}\n  - c: {on: x}\n"
		assert.Equal(t, []Rewrite{
			{Line: 3, Path: "b[0]", Key: true, Written: "off", Read: "false"},
			{Line: 4, Path: "b[1].c", Key: true, Written: "on", Read: "true"},
		}, Rewrites([]byte(raw), reflect.TypeFor[any]()))
	})
}

// TestRewritesError shows the first five.
func TestRewritesError(t *testing.T) {
	rw := make([]Rewrite, 7)
	for i := range rw {
		rw[i] = Rewrite{Line: i + 1, Path: "x", Written: "yes", Read: "true"}
	}
	err := RewritesError(rw)
	assert.Contains(t, err.Error(), `line 5: x: the unquoted value yes is read as "true"`)
	assert.NotContains(t, err.Error(), "line 6")
	assert.Contains(t, err.Error(), "; and 2 more")
}

// TestMayRewrite: the quick look before the parse says yes for every
// retypable plain scalar, and no for a document without one.
func TestMayRewrite(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want bool
	}{
		{"items:\n- name: a\n  labels: {env: prod, region: eu-west-1}\n  server: https://a.example.com:6443\n", false},
		{"---\nitems:\n  - name: 'it''s yes'\n    note: \"on \\\" off\" # yes, 1.10\n...\n", false},
		{"a: yes", true},
		{"a: YES", true},
		{"a: [x, Off]", true},
		{"{on: x}", true},
		{"a:\n  - 1.10\n", true},
		{"a: ~", true},
		{"a: x:1", false},
		{"a: x,1", true}, // a comma delimits in flow mappings only: a yes too many
		{"a: 'open", true},
		{"a: [x,#, yes]", true},     // # starts a comment after a space only
		{"a: |\n  2 nodes\n", true}, // a block scalar: the parse says no
	} {
		t.Run(tt.raw, func(t *testing.T) { assert.Equal(t, tt.want, mayRewrite([]byte(tt.raw))) })
	}
}
