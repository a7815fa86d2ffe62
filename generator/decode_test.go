package generator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// secretValue stands for a value that must never come back in a message.
const secretValue = "s3cret-value"

// strictCase is a body the decoder must reject although encoding/json
// alone would accept it, often as a wider selection.
type strictCase struct {
	name string
	body string
	msg  string
}

// strictCases are shared by the handler test and ParseInput's test (those
// whose body has only "input").
var strictCases = []strictCase{
	{"null in a parameter list", `{"input":{"parameters":{"tenant":["acme",null]}}}`, `input.parameters.tenant[1]: null is not allowed in a list`},
	{"null alone in a parameter list", `{"input":{"parameters":{"region":[null]}}}`, `input.parameters.region[0]: null is not allowed in a list`},
	{"null as a list parameter", `{"input":{"parameters":{"tenant":null}}}`, `input.parameters.tenant: must be a string or a list of strings, got null`},
	{"null as a string parameter", `{"input":{"parameters":{"labelSelector":null}}}`, `input.parameters.labelSelector: must be a string, got null`},
	{"null in a list of an ignored key", `{"applicationSetName":"x","extra":["s3cret-value",null],"input":{}}`, `extra[1]: null is not allowed in a list`},
	{"null in a nested list", `{"input":{"parameters":{"tenant":[["s3cret-value"],[null]]}}}`, `input.parameters.tenant[1][0]: null is not allowed in a list`},

	{"INPUT null before input", `{"INPUT":null,"input":{"parameters":{"tenant":"acme"}}}`, `key "INPUT" differs from "input" only in case`},
	{"input before INPUT", `{"input":{"parameters":{"tenant":"acme"}},"INPUT":{}}`, `key "INPUT" differs from "input" only in case`},
	{"Input alone", `{"Input":{"parameters":{"tenant":"acme"}}}`, `key "Input" differs from "input" only in case`},
	{"applicationsetname", `{"applicationsetname":"x","input":{}}`, `key "applicationsetname" differs from "applicationSetName" only in case`},
	{"applicationSetName with a long s", `{"application\u017fetName":"x","input":{}}`, `differs from "applicationSetName" only in case`},
	{"Parameters", `{"input":{"Parameters":{"tenant":"acme"}}}`, `input: key "Parameters" differs from "parameters" only in case`},
	{"PARAMETERS null before parameters", `{"input":{"PARAMETERS":null,"parameters":{"tenant":"acme"}}}`, `input: key "PARAMETERS" differs from "parameters" only in case`},
	{"parameters with a long s", `{"input":{"parameter\u017f":{"tenant":"acme"}}}`, `differs from "parameters" only in case`},
	{"parameter key Tenant", `{"input":{"parameters":{"Tenant":"acme"}}}`, `input.parameters: key "Tenant" differs from "tenant" only in case`},
	{"parameter keys tenant and TENANT", `{"input":{"parameters":{"tenant":"acme","TENANT":"globex"}}}`, `key "TENANT" differs from "tenant" only in case`},
	{"parameter key with a long s", `{"input":{"parameters":{"label\u017felector":"x"}}}`, `differs from "labelSelector" only in case`},
	{"parameter key with a Kelvin sign", `{"input":{"parameters":{"\u212aey":"x"}}}`, `input.parameters: unknown key`},

	{"duplicate input", `{"input":{},"input":{"parameters":{"tenant":"acme"}}}`, `request body: duplicate key "input"`},
	{"duplicate applicationSetName", `{"applicationSetName":"a","applicationSetName":"b","input":{}}`, `request body: duplicate key "applicationSetName"`},
	{"duplicate parameters", `{"input":{"parameters":{},"parameters":{"tenant":"acme"}}}`, `input: duplicate key "parameters"`},
	{"duplicate parameter", `{"input":{"parameters":{"tenant":"acme","tenant":"globex"}}}`, `input.parameters: duplicate key "tenant"`},
	{"duplicate parameter spelled with an escape", `{"input":{"parameters":{"tenant":"acme","t\u0065nant":"globex"}}}`, `input.parameters: duplicate key "tenant"`},
	{"duplicate parameter after others", `{"input":{"parameters":{"tenant":"acme","region":"x","source":"y","tenant":"globex"}}}`, `input.parameters: duplicate key "tenant"`},
	{"duplicate ignored key", `{"extra":1,"input":{},"extra":2}`, `request body: duplicate key "extra"`},
	{"duplicate key inside an ignored key", `{"extra":{"a":[{"k":"s3cret-value","k":"s3cret-value"}]},"input":{}}`, `extra.a[0]: duplicate key "k"`},

	{"invalid UTF-8 in a parameter", "{\"input\":{\"parameters\":{\"tenant\":\"acme\xff\"}}}", `not valid UTF-8`},
	{"invalid UTF-8 in an ignored key's value", "{\"extra\":\"s3cret-value\xc3\",\"input\":{}}", `not valid UTF-8`},
	{"invalid UTF-8 in a key", "{\"input\":{\"parameters\":{\"ten\xe9ant\":\"acme\"}}}", `not valid UTF-8`},
	{"lone high surrogate in a parameter", `{"input":{"parameters":{"tenant":"acme\ud800"}}}`, `input.parameters.tenant: a string has an escape that is not valid UTF-16`},
	{"lone low surrogate in a parameter", `{"input":{"parameters":{"tenant":["acme","\udc00"]}}}`, `input.parameters.tenant[1]: a string has an escape that is not valid UTF-16`},
	{"high surrogate then a letter", `{"input":{"parameters":{"tenant":"\ud800\u0041"}}}`, `not valid UTF-16`},
	{"two high surrogates", `{"input":{"parameters":{"tenant":"\uD800\uD800"}}}`, `not valid UTF-16`},
	{"surrogate escape in a key", `{"input":{"parameters":{"\ud800tenant":"acme"}}}`, `input.parameters: a key has an escape that is not valid UTF-16`},
	{"surrogate escape in an ignored key's value", `{"extra":"s3cret-value\udfff","input":{}}`, `extra: a string has an escape that is not valid UTF-16`},
	{"surrogate escape in applicationSetName", `{"applicationSetName":"\ud800","input":{}}`, `applicationSetName: a string has an escape`},

	{"unknown key under input", `{"input":{"parameterz":{"tenant":"acme"}}}`, `input: unknown key "parameterz" (the only key is "parameters")`},
	{"unknown key beside parameters", `{"input":{"parameters":{"tenant":"acme"},"values":{"k":"s3cret-value"}}}`, `input: unknown key "values"`},
	{"unknown parameter", `{"input":{"parameters":{"tennant":"acme"}}}`, `input.parameters: unknown key "tennant"`},
}

// TestStrictRequestRejected sends each case through the real handler: 400,
// {"message": ...} naming the problem, never a value of the body.
func TestStrictRequestRejected(t *testing.T) {
	h := newServer(t, demoInventory(t)).Handler()
	for _, tc := range strictCases {
		t.Run(tc.name, func(t *testing.T) {
			var ie *InputError
			_, _, err := parseRequest([]byte(tc.body), knownProviders())
			require.ErrorAs(t, err, &ie)

			rec := do(h, rawRequest(http.MethodPost, GetParamsPath, []byte(tc.body), "Bearer "+demoToken))
			require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
			var m message
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m))
			assert.Contains(t, m.Message, tc.msg)
			assert.NotContains(t, m.Message, secretValue)
		})
	}
}

// TestStrictInputRejected: ParseInput applies the same rules to the input
// object alone (discover --input).
func TestStrictInputRejected(t *testing.T) {
	n := 0
	for _, tc := range strictCases {
		input, ok := inputOf(tc.body)
		if !ok {
			continue
		}
		n++
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseInput([]byte(input), knownProviders())
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			assert.Contains(t, err.Error(), strings.TrimPrefix(tc.msg, "request body: "))
			assert.NotContains(t, err.Error(), secretValue)
		})
	}
	require.Greater(t, n, 20)
}

// inputOf returns the input of a case whose body is exactly {"input":...}.
func inputOf(body string) (string, bool) {
	const open = `{"input":`
	if !strings.HasPrefix(body, open) || !strings.HasSuffix(body, "}") {
		return "", false
	}
	input := body[len(open) : len(body)-1]
	if !json.Valid([]byte(input)) || strings.Count(body, `"input"`) != 1 {
		return "", false
	}
	return input, true
}

// TestStrictRequestAccepted: what Argo CD sends, and what the rules leave
// alone, is answered as before.
func TestStrictRequestAccepted(t *testing.T) {
	inv := demoInventory(t)
	h := newServer(t, inv).Handler()
	get := func(t *testing.T, body string) []byte {
		t.Helper()
		rec := do(h, rawRequest(http.MethodPost, GetParamsPath, []byte(body), "Bearer "+demoToken))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		return rec.Body.Bytes()
	}
	all := get(t, `{"applicationSetName":"x","input":{}}`)
	acme := get(t, `{"applicationSetName":"x","input":{"parameters":{"tenant":"acme"}}}`)
	none := get(t, `{"input":{"parameters":{"tenant":"nobody"}}}`)
	require.NotEqual(t, string(all), string(acme))

	cases := []struct {
		name, body string
		want       []byte
		ignored    []string
	}{
		{"ignored top-level keys", `{"generator":{"plugin":{"input":[1,{"a":null}]}},"applicationSetName":"x","values":{"k":"v"},"input":{"parameters":{"tenant":"acme"}}}`, acme, []string{"generator", "values"}},
		{"ignored key named like a parameter", `{"parameters":{"tenant":"globex"},"input":{"parameters":{"tenant":"acme"}}}`, acme, []string{"parameters"}},
		{"same key in different objects", `{"a":{"k":1},"b":{"k":2},"input":{"parameters":{"tenant":["acme","acme"]}}}`, acme, []string{"a", "b"}},
		{"null input", `{"applicationSetName":"x","input":null}`, all, nil},
		{"null parameters", `{"input":{"parameters":null}}`, all, nil},
		{"null in an object of an ignored key", `{"x":{"a":null},"input":{}}`, all, []string{"x"}},
		{"escaped key", `{"\u0069nput":{"parameters":{"tenant":"acme"}}}`, acme, nil},
		{"valid surrogate pair", `{"input":{"parameters":{"tenant":"\ud83d\ude00"}}}`, none, nil},
		{"escaped replacement character", `{"input":{"parameters":{"tenant":"\ufffd"}}}`, none, nil},
		{"literal replacement character", `{"input":{"parameters":{"tenant":"` + "\uFFFD" + `"}}}`, none, nil},
		{"escaped backslash before u", `{"x":"\\ud800","input":{"parameters":{"tenant":"acme"}}}`, acme, []string{"x"}},
		{"deep ignored key", `{"x":` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `,"input":{}}`, all, []string{"x"}},
		{"whitespace", " \n{ \"input\" : { \"parameters\" : { \"tenant\" : [ \"acme\" ] } } }\n", acme, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, string(tc.want), string(get(t, tc.body)))
			req, err := ParseRequest([]byte(tc.body), knownProviders())
			require.NoError(t, err)
			assert.Equal(t, tc.ignored, req.IgnoredKeys)
		})
	}
}

func TestParseRequest(t *testing.T) {
	req, err := ParseRequest([]byte(`{"applicationSetName":"tenants","x":1,"input":{"parameters":{"tenant":"acme"}},"y":[],"x2":{}}`), knownProviders())
	require.NoError(t, err)
	assert.Equal(t, "tenants", req.ApplicationSetName)
	assert.Equal(t, []string{"acme"}, req.Filter.Tenants)
	assert.Equal(t, []string{"x", "y", "x2"}, req.IgnoredKeys)

	req, err = ParseRequest([]byte(`{"applicationSetName":"tenants","input":{"parameters":{"tenant":"acme","tenant":"x"}}}`), knownProviders())
	require.Error(t, err)
	assert.Equal(t, "tenants", req.ApplicationSetName, "the name is known for the log even when the body is rejected")

	_, err = ParseRequest([]byte(`{"input":{}}{}`), knownProviders())
	assert.ErrorContains(t, err, "malformed request body: invalid JSON at byte")
	_, err = ParseRequest([]byte(`{"input": {"parameters": {`), knownProviders())
	assert.EqualError(t, err, "malformed request body: invalid JSON at byte 26")
	_, err = ParseRequest([]byte(`{"x":`+strings.Repeat(`[`, 10001)+strings.Repeat(`]`, 10001)+`}`), knownProviders())
	assert.ErrorContains(t, err, "malformed request body: invalid JSON")

	long := strings.Repeat("k", 1000)
	_, err = ParseRequest([]byte(`{"input":{"`+long+`":1}}`), knownProviders())
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 200, "long keys are shortened in messages")
}

func TestParseInput(t *testing.T) {
	f, err := ParseInput([]byte(` {"parameters":{"tenant":["acme"],"region":"eu-west-1"}} `), knownProviders())
	require.NoError(t, err)
	assert.Equal(t, []string{"acme"}, f.Tenants)
	assert.Equal(t, []string{"eu-west-1"}, f.Regions)

	for _, in := range []string{`{}`, `null`, `{"parameters":null}`, `{"parameters":{}}`} {
		f, err := ParseInput([]byte(in), knownProviders())
		require.NoError(t, err, in)
		assert.Empty(t, f.Key(), in)
	}
	for in, msg := range map[string]string{
		``:                            "empty input",
		`"tenant=acme"`:               "input must be a JSON object",
		`[]`:                          "input must be a JSON object",
		`{"parameters":"tenant"}`:     "malformed input: input.parameters must be an object, got JSON string",
		`{"parameters":{}} {}`:        "malformed input: invalid JSON",
		`{"parameters":{"tenant":"a"`: "malformed input: invalid JSON",
	} {
		_, err := ParseInput([]byte(in), knownProviders())
		var ie *InputError
		require.ErrorAs(t, err, &ie, in)
		assert.ErrorContains(t, err, msg, in)
	}
}

func TestParseParametersStrict(t *testing.T) {
	for params, msg := range map[string]string{
		`{"tenant":["a",null]}`:         "input.parameters.tenant[1]: null is not allowed in a list",
		`{"Region":"a"}`:                `key "Region" differs from "region" only in case`,
		`{"tenant":"\udc00"}`:           "input.parameters.tenant: a string has an escape that is not valid UTF-16",
		"{\"tenant\":\"\xff\"}":         "input.parameters.tenant: not valid UTF-8",
		`{"nameRegex":"a\ud800\u0061"}`: "not valid UTF-16",
	} {
		m := map[string]json.RawMessage{}
		require.NoError(t, json.Unmarshal([]byte(params), &m), params)
		// encoding/json replaced the invalid byte; put the raw one back.
		if strings.Contains(params, "\xff") {
			m["tenant"] = json.RawMessage("\"\xff\"")
		}
		_, err := ParseParameters(m, knownProviders())
		assert.ErrorContains(t, err, msg, params)
	}
}

func TestValidEscapes(t *testing.T) {
	for s, want := range map[string]bool{
		`""`:               true,
		`"\\ud800"`:        true,
		`"\\\ud83d\ude00"`: true,
		`"\ud83d\ude00"`:   true,
		`"\uD83D\uDE00"`:   true,
		`"\ud7ff\ue000"`:   true,
		`"\ud800"`:         false,
		`"\udbff"`:         false,
		`"\udc00"`:         false,
		`"\ud800\ud800"`:   false,
		`"\ud800\n"`:       false,
		`"\ud800x\udc00"`:  false,
		`"\\\ud800"`:       false,
		`["a","\ud800"]`:   false,
		`{"\ud800":1}`:     false,
		`"\ud800\u"`:       false,
		`"\udbff\udfff"`:   true,
	} {
		assert.Equal(t, want, validEscapes([]byte(s)), s)
	}
}

// TestStrictLinear: a body of 1 MiB of keys or list items decodes in
// linear time (the duplicate check is a map per object).
func TestStrictLinear(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"x":{`)
	for i := 0; b.Len() < MaxBodyBytes-100; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":[%d]`, i, i)
	}
	b.WriteString(`},"input":{}}`)
	req, err := ParseRequest([]byte(b.String()), knownProviders())
	require.NoError(t, err)
	assert.Equal(t, []string{"x"}, req.IgnoredKeys)
}

func TestOnceKeys(t *testing.T) {
	var o onceKeys
	fresh, full := o.firstSeen([]string{"a", "b"})
	assert.Equal(t, []string{"a", "b"}, fresh)
	assert.False(t, full)
	fresh, _ = o.firstSeen([]string{"b", "c", "a"})
	assert.Equal(t, []string{"c"}, fresh)
	fresh, _ = o.firstSeen(nil)
	assert.Empty(t, fresh)

	for i := 0; i < maxLoggedKeys-3; i++ {
		fresh, full = o.firstSeen([]string{fmt.Sprint(i)})
		require.Len(t, fresh, 1)
		require.False(t, full)
	}
	fresh, full = o.firstSeen([]string{"late", "later"})
	assert.Empty(t, fresh)
	assert.True(t, full, "reported once when the set fills up")
	fresh, full = o.firstSeen([]string{"later"})
	assert.Empty(t, fresh)
	assert.False(t, full)
}

// TestUnknownTopLevelKeyIsLoggedOnce: a key a later Argo CD may send is
// tolerated, and logged once per process, not once per request.
func TestUnknownTopLevelKeyIsLoggedOnce(t *testing.T) {
	var logs bytes.Buffer
	inv := inventoryOf(t, &scripted{steps: []func() ([]sources.Cluster, error){ok(testCluster("a1", "acme"))}})
	h := newServer(t, inv, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }).Handler()
	for i := range 3 {
		body := fmt.Sprintf(`{"applicationSetName":"x","futureField":%d,"input":{"parameters":{}}}`, i) // distinct bodies: no cache hit
		rec := do(h, rawRequest(http.MethodPost, GetParamsPath, []byte(body), "Bearer "+demoToken))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "key=futureField"), logs.String())
}
