package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDiscoverInputStrict: discover --input rejects (exit 2, nothing on
// stdout) every input the plugin API answers with 400 for being ambiguous
// or wider than written, with the API's message.
func TestDiscoverInputStrict(t *testing.T) {
	const secret = "s3cret-value"
	cases := []struct {
		name, input, msg string
	}{
		{"null in a list", `{"parameters":{"tenant":["acme",null]}}`, "input.parameters.tenant[1]: null is not allowed in a list"},
		{"null in a nested list", `{"parameters":{"tenant":[["s3cret-value"],[null]]}}`, "input.parameters.tenant[1][0]: null is not allowed in a list"},
		{"null parameter", `{"parameters":{"tenant":null}}`, "input.parameters.tenant: must be a string or a list of strings, got null"},
		{"PARAMETERS null before parameters", `{"PARAMETERS":null,"parameters":{"tenant":"acme"}}`, `input: key "PARAMETERS" differs from "parameters" only in case`},
		{"Parameters alone", `{"Parameters":{"tenant":"acme"}}`, `input: key "Parameters" differs from "parameters" only in case`},
		{"parameters with a long s", `{"parameter\u017f":{"tenant":"acme"}}`, `differs from "parameters" only in case`},
		{"parameter key Tenant", `{"parameters":{"Tenant":"acme"}}`, `input.parameters: key "Tenant" differs from "tenant" only in case`},
		{"parameter keys tenant and TENANT", `{"parameters":{"tenant":"acme","TENANT":"globex"}}`, `key "TENANT" differs from "tenant" only in case`},
		{"duplicate parameters", `{"parameters":{},"parameters":{"tenant":"acme"}}`, `input: duplicate key "parameters"`},
		{"duplicate parameter", `{"parameters":{"tenant":"acme","tenant":"globex"}}`, `input.parameters: duplicate key "tenant"`},
		{"duplicate parameter spelled with an escape", `{"parameters":{"tenant":"acme","t\u0065nant":"globex"}}`, `input.parameters: duplicate key "tenant"`},
		{"invalid UTF-8", "{\"parameters\":{\"tenant\":\"s3cret-value\xff\"}}", "input is not valid UTF-8"},
		{"lone high surrogate", `{"parameters":{"tenant":"s3cret-value\ud800"}}`, "input.parameters.tenant: a string has an escape that is not valid UTF-16"},
		{"lone low surrogate in a list", `{"parameters":{"tenant":["acme","\udc00"]}}`, "input.parameters.tenant[1]: a string has an escape that is not valid UTF-16"},
		{"surrogate escape in a key", `{"parameters":{"\ud800tenant":"acme"}}`, "input.parameters: a key has an escape that is not valid UTF-16"},
		{"unknown key", `{"parameterz":{"tenant":"acme"}}`, `input: unknown key "parameterz" (the only key is "parameters")`},
		{"unknown key beside parameters", `{"parameters":{"tenant":"acme"},"values":{"k":"s3cret-value"}}`, `input: unknown key "values"`},
		{"unknown parameter", `{"parameters":{"tennant":"acme"}}`, `input.parameters: unknown key "tennant"`},
		{"trailing data", `{"parameters":{}},"x":1`, "--input must be a JSON object"},
		{"not an object", `["tenant"]`, "input must be a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"discover", "--config", demoConfig, "--input", tc.input}, &stdout, &stderr)
			assert.Equal(t, 2, code, stderr.String())
			assert.Contains(t, stderr.String(), tc.msg)
			assert.NotContains(t, stderr.String(), secret)
			assert.Empty(t, stdout.String())
		})
	}
}

// TestDiscoverInputAccepted: the inputs the API accepts still work.
func TestDiscoverInputAccepted(t *testing.T) {
	names := func(t *testing.T, input string) []string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"discover", "--config", demoConfig, "--input", input}, &stdout, &stderr)
		require.Equal(t, 0, code, stderr.String())
		var out struct {
			Output struct {
				Parameters []struct {
					Name string `json:"name"`
				} `json:"parameters"`
			} `json:"output"`
		}
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &out))
		var ns []string
		for _, p := range out.Output.Parameters {
			ns = append(ns, p.Name)
		}
		return ns
	}
	all := names(t, `{}`)
	acme := names(t, `{"parameters":{"tenant":"acme"}}`)
	require.NotEmpty(t, acme)
	require.Greater(t, len(all), len(acme))
	for input, want := range map[string][]string{
		`null`:                                 all,
		`{"parameters":null}`:                  all,
		` {"parameters":{"tenant":["acme"]}} `: acme, //nolint:gocritic // white space around the input on purpose
		`{"parameters":{"tenant":["acme","acme"],"region":"\ud83d\ude00"}}`: nil,
	} {
		assert.Equal(t, want, names(t, input), input)
	}
}
