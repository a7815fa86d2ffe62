package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestParseUnknownKeys(t *testing.T) {
	const static = okServer + "sources:\n  - name: one\n    provider: static\n"
	tests := []struct {
		name string
		yaml string
		// wantPath is the full path of the unknown key.
		wantPath string
	}{
		{name: "top level", yaml: "colour: red\n" + okServer + okSources, wantPath: "colour"},
		{name: "log", yaml: "log:\n  levl: debug\n" + okServer + okSources, wantPath: "log.levl"},
		{name: "server", yaml: "server:\n  listn: :8080\n  tokens: [{env: T}]\n" + okSources, wantPath: "server.listn"},
		{name: "server token", yaml: "server:\n  tokens:\n    - env: T\n    - value: s3cr3t\n" + okSources, wantPath: "server.tokens[1].value"},
		{name: "inventory", yaml: okServer + "inventory:\n  intervall: 5s\n" + okSources, wantPath: "inventory.intervall"},
		{name: "case matters", yaml: okServer + "Inventory:\n  interval: 5s\n" + okSources, wantPath: "Inventory"},
		{name: "source", yaml: static + "    intervals: 5s\n    static: {file: a.yaml}\n", wantPath: "sources[0].intervals"},
		{name: "static section", yaml: static + "    static: {files: a.yaml}\n", wantPath: "sources[0].static.files"},
		{name: "inline cluster", yaml: static + "    static:\n      clusters:\n        - name: c\n          sever: https://c.example.com\n", wantPath: "sources[0].static.clusters[0].sever"},
		{
			name:     "token value written inline",
			yaml:     static + "    static:\n      clusters:\n        - name: c\n          server: https://c.example.com\n          auth:\n            bearerToken: {token: s3cr3t}\n",
			wantPath: "sources[0].static.clusters[0].auth.bearerToken.token",
		},
		{name: "secrets prune", yaml: okServer + okSources + "secrets: {prune: {after: 2}}\n", wantPath: "secrets.prune.after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "/etc/acd")
			require.Error(t, err)
			assert.Nil(t, cfg)
			assert.True(t, hasError(Errors(err), tt.wantPath, field.ErrorTypeForbidden), "got %v", err)
			assert.Contains(t, err.Error(), tt.wantPath+": Forbidden: unknown key")
			assert.NotContains(t, err.Error(), "s3cr3t", "a value written by mistake is not repeated")
		})
	}
}

// TestParseDuplicateKeys: a key written twice in a mapping is reported at
// its path, each one, with the file's other problems.
func TestParseDuplicateKeys(t *testing.T) {
	doc := "log:\n  level: info\n  level: debug\n" + okServer + okSources + "inventory: {jitter: 2}\n" +
		"secrets:\n  tenants:\n    acme: {project: a}\n    acme: {project: b, project: c}\n" +
		"sources:\n  - name: two\n    provider: static\n    static: {file: a.yaml, file: b.yaml}\n"
	_, err := Parse([]byte(doc), "/etc/acd")
	require.Error(t, err)
	assert.Equal(t, []string{"inventory.jitter", "log.level", "secrets.tenants.acme", "secrets.tenants.acme.project", "sources", "sources[0].static.file"},
		paths(err), "all problems: %v", err)
	assert.Contains(t, err.Error(), "log.level: Duplicate value: the key is written more than once")
	assert.Contains(t, err.Error(), "sources: Duplicate value")
}

// TestParseRewrittenKeys: an unquoted key that YAML 1.1 reads as another
// string (`on:` is "true") is an error at its path and line; a value in a
// string's place says to quote it.
func TestParseRewrittenKeys(t *testing.T) {
	doc := okServer + "sources:\n  - name: one\n    provider: static\n    static:\n      clusters:\n" +
		"        - name: a\n          server: https://a.example.com\n          labels: {on: x, \"off\": y, env: yes}\n"
	_, err := Parse([]byte(doc), "/etc/acd")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `sources[0].static.clusters[0].labels: Invalid value: "on": line `)
	assert.Contains(t, err.Error(), `the unquoted key is read as "true" (YAML 1.1): quote it`)
	assert.NotContains(t, err.Error(), `"off"`, "a quoted key is what it says")
	assert.Contains(t, err.Error(), "sources[0].static.clusters[0].labels.env: Invalid value: got a JSON bool where string is expected (YAML reads an unquoted yes")
}

// TestParseWrongTypes: a value of the wrong JSON type is reported at its
// full path, indexes included; the rest of the file is still checked.
func TestParseWrongTypes(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// wantPaths are the paths of the values of the wrong type, in the
		// order of the file, separated by spaces.
		wantPaths string
	}{
		{name: "number expected", yaml: okServer + okSources + "inventory: {jitter: lots}\n", wantPaths: "inventory.jitter"},
		{name: "list expected", yaml: okServer + "sources: {name: one}\n", wantPaths: "sources"},
		{name: "mapping expected", yaml: okServer + okSources + "secrets: [a]\n", wantPaths: "secrets"},
		{name: "in a source", yaml: okServer + "sources:\n  - {name: [one], provider: static, static: {file: a.yaml}}\n", wantPaths: "sources[0].name"},
		{name: "in a list", yaml: "server:\n  tokens:\n    - env: T\n    - secret: {name: [api], key: token}\n" + okSources, wantPaths: "server.tokens[1].secret.name"},
		{
			name:      "in a list of a section",
			yaml:      okServer + "sources:\n  - name: one\n    provider: static\n    static:\n      clusters:\n        - {name: a, server: 'https://a'}\n        - {name: 2, server: {url: x}}\n",
			wantPaths: "sources[0].static.clusters[1].name sources[0].static.clusters[1].server",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "/etc/acd")
			require.Error(t, err)
			require.NotEmpty(t, Errors(err), "a field error, not a parse error: %v", err)
			var got []string
			for _, e := range Errors(err) {
				if e.Type == field.ErrorTypeTypeInvalid {
					got = append(got, e.Field)
				}
			}
			assert.Equal(t, strings.Fields(tt.wantPaths), got, "all problems: %v", err)
		})
	}
}

// TestParseWrongTypesHideNothing: a value of the wrong type does not stop
// the decoding of the others, nor the reporting of unknown keys beside it.
func TestParseWrongTypesHideNothing(t *testing.T) {
	doc := "colour: red\ninventory: {jitter: lots, interval: [1m]}\nruntime: {gcPercent: many}\n" + okServer +
		"sources:\n  - name: one\n    provider: static\n    static: {file: [a.yaml], fiel: b.yaml}\n"
	_, err := Parse([]byte(doc), "/etc/acd")
	require.Error(t, err)
	assert.Equal(t, []string{"colour", "inventory.interval", "inventory.jitter", "runtime.gcPercent",
		"sources[0].static", "sources[0].static.fiel", "sources[0].static.file"}, paths(err), "all problems: %v", err)
	for _, p := range []string{"inventory.jitter", "runtime.gcPercent", "sources[0].static.file"} {
		assert.True(t, hasError(Errors(err), p, field.ErrorTypeTypeInvalid), p)
	}
	assert.Contains(t, err.Error(), "runtime.gcPercent: Invalid value: got a JSON string where int is expected")
}

func TestParseNotAMapping(t *testing.T) {
	for _, doc := range []string{"- a\n", "5\n", "just words\n"} {
		_, err := Parse([]byte(doc), "/etc/acd")
		require.Error(t, err, doc)
		assert.Equal(t, "parse: the configuration must be a mapping of keys (log:, server:, sources:, ...)", err.Error())
	}
	cfg, err := Parse([]byte("# nothing but a comment\n"), "/etc/acd")
	require.Error(t, err, "an empty file is the defaults: no tokens, no sources")
	assert.Nil(t, cfg)
	assert.Equal(t, []string{"server.tokens", "sources"}, paths(err))
}

// TestValueAt: the value a type error's offset points at, with its path
// and extent, in compact JSON as Parse decodes and with spaces.
func TestValueAt(t *testing.T) {
	for _, tc := range []struct{ doc, value, wantPath, wantValue string }{
		{`{"a":[{"b":1},{"b":"x"}]}`, `"x"`, "a[1].b", `"x"`},
		{`{"a":[{"b":1},{"b":{"c":[2]}}]}`, `{`, "a[1].b", `{"c":[2]}`},
		{`{"a":[1,2,[3,[4]]]}`, `[4`, "a[2][1]", `[4]`},
		{`{ "a" : [ 1 , { "b" : true } ] }`, `true`, "a[1].b", `true`},
		{`{"a.b":{"c":null}}`, `null`, "a.b.c", `null`},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			i := strings.LastIndex(tc.doc, tc.value)
			require.GreaterOrEqual(t, i, 0)
			off := int64(i + len(tc.value))
			if tc.value == "{" || strings.HasPrefix(tc.value, "[") {
				off = int64(i + 1) // just after the opening, as encoding/json reports it
			}
			p, start, end, ok := valueAt(field.NewPath("x"), []byte(tc.doc), off)
			require.True(t, ok)
			assert.Equal(t, "x."+tc.wantPath, p.String())
			assert.Equal(t, tc.wantValue, tc.doc[start:end])
		})
	}
	_, _, _, ok := valueAt(nil, []byte(`{"a":1}`), 3)
	assert.False(t, ok, "no value ends there")
}

// TestParseOneDocument: a configuration of several YAML documents is an
// error; before, every document but the first was dropped without a word
// (its sources never listed). A marker first or last is one document.
func TestParseOneDocument(t *testing.T) {
	_, err := Parse([]byte("log: {level: info}\n---\nsources: []\n"), "/etc/acd")
	require.Error(t, err)
	assert.Equal(t, "parse: 2 YAML documents (separated by ---): the configuration is one", err.Error())
	_, err = Parse([]byte("---\n# nothing but a comment\n---\n"), "/etc/acd")
	require.Error(t, err)
	assert.Equal(t, []string{"server.tokens", "sources"}, paths(err), "markers alone: the defaults")
}
