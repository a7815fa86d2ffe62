package generator

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/fuzzseed"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Seeds: testdata/fuzz/<Target>/ at the repository root (see its README).
// Run one target with: go test ./generator -run '^$' -fuzz '^FuzzParseRequest$' -fuzztime 1m

// FuzzParseRequest sends any body to the real handler (with the cache) and
// checks it against the decoder called directly:
//   - parseRequest never panics and every error is an *InputError;
//   - the handler answers 200, 400 or 503, never 500; 400 exactly when the
//     decoder or Render reject the input;
//   - every error body is {"message": "..."} with a non-empty message;
//   - a 200 is byte for byte what Render makes for the parsed filter (the
//     body cache and the filter cache never serve another input's answer)
//     and passes checkAnswer;
//   - an accepted body is never wider than asked (checkNotWider): it is
//     valid UTF-8, has no null in a list, no ignored key is a case variant
//     of a known one, and the body without its ignored top-level keys
//     selects the same clusters.
func FuzzParseRequest(f *testing.F) {
	fuzzseed.Add(f)
	inv := demoInventory(f)
	snap := inv.Snapshot()
	h := newServer(f, inv).Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > MaxBodyBytes {
			return
		}
		filter, _, parseErr := parseRequest(body, knownProviders())
		requireInputError(t, "parseRequest", parseErr)
		var want Result
		renderErr := parseErr
		if parseErr == nil {
			checkNotWider(t, snap, body, &filter)
			want, renderErr = Render(snap, &filter)
			requireInputError(t, "Render", renderErr)
		}

		rec := do(h, rawRequest(http.MethodPost, GetParamsPath, body, "Bearer "+demoToken))
		switch {
		case renderErr != nil:
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("input rejected with %q but the handler answered %d", renderErr, rec.Code)
			}
			var m message
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || m.Message == "" {
				t.Fatalf("400 body is not {\"message\": ...}: %q", rec.Body.Bytes())
			}
		case rec.Code != http.StatusOK:
			t.Fatalf("input accepted but the handler answered %d: %s", rec.Code, rec.Body.Bytes())
		default:
			if !bytes.Equal(rec.Body.Bytes(), want.Bytes()) {
				t.Fatalf("served answer differs from the rendered one:\nserved:   %s\nrendered: %s", rec.Body.Bytes(), want.Bytes())
			}
			checkAnswer(t, snap, &filter, rec.Body.Bytes())
		}
	})
}

// FuzzParseParameters fuzzes input.parameters alone, where the filter
// grammar (lists, label selectors, regular expressions) is:
//   - every error is an *InputError;
//   - parsing is deterministic (same key twice);
//   - the filter's canonical form, re-parsed, has the same key and selects
//     the same clusters: the cache shares answers between inputs with equal
//     keys, so a key that lost meaning would serve one filter's answer to
//     another;
//   - the rendered answer passes checkAnswer.
func FuzzParseParameters(f *testing.F) {
	fuzzseed.Add(f)
	snap := demoInventory(f).Snapshot()
	f.Fuzz(func(t *testing.T, raw []byte) {
		var params map[string]json.RawMessage
		if json.Unmarshal(raw, &params) != nil {
			return
		}
		filter, err := ParseParameters(params, knownProviders())
		requireInputError(t, "ParseParameters", err)
		if err != nil {
			return
		}
		again, err := ParseParameters(params, knownProviders())
		if err != nil || again.Key() != filter.Key() {
			t.Fatalf("second parse differs: key %q vs %q, error %v", filter.Key(), again.Key(), err)
		}

		canon, err := ParseParameters(canonicalParameters(t, &filter), knownProviders())
		if err != nil {
			t.Fatalf("canonical form %q of an accepted filter is rejected: %v", filter.Key(), err)
		}
		if canon.Key() != filter.Key() {
			t.Fatalf("canonical form changes the key: %q → %q", filter.Key(), canon.Key())
		}
		for i := range snap.Clusters {
			c := snap.Clusters[i]
			if filter.Match(c) != canon.Match(c) {
				t.Fatalf("filter %q and its canonical form disagree on cluster %s", filter.Key(), c.Name)
			}
		}

		res, err := Render(snap, &filter)
		requireInputError(t, "Render", err)
		if err == nil {
			checkAnswer(t, snap, &filter, res.Bytes())
		}
	})
}

// checkNotWider checks an accepted body against rules the decoder
// enforces, by other means than the decoder's own.
func checkNotWider(t *testing.T, snap *inventory.Snapshot, body []byte, f *Filter) {
	t.Helper()
	if !utf8.Valid(body) {
		t.Fatalf("accepted a body that is not valid UTF-8: %q", body)
	}
	var generic any
	if err := json.Unmarshal(body, &generic); err != nil {
		t.Fatalf("accepted a body encoding/json rejects: %v", err)
	}
	if nullInList(generic) {
		t.Fatalf("accepted a body with null in a list: %q", body)
	}
	req, err := ParseRequest(body, knownProviders())
	if err != nil || req.Filter.Key() != f.Key() {
		t.Fatalf("ParseRequest and parseRequest disagree: %v", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	for _, k := range req.IgnoredKeys {
		if strings.EqualFold(k, "input") || strings.EqualFold(k, "applicationSetName") {
			t.Fatalf("ignored key %q is a case variant of a known key", k)
		}
		delete(top, k)
	}
	for k := range top {
		if k != "input" && k != "applicationSetName" {
			t.Fatalf("key %q is neither known nor reported as ignored", k)
		}
	}
	stripped, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseRequest(stripped, knownProviders())
	if err != nil || len(again.IgnoredKeys) > 0 {
		t.Fatalf("the body without its ignored keys %s is rejected (%v) or has ignored keys %q", stripped, err, again.IgnoredKeys)
	}
	if again.Filter.Key() != f.Key() {
		t.Fatalf("ignored keys change the filter: %q vs %q without them", f.Key(), again.Filter.Key())
	}
	for _, c := range snap.Clusters {
		if f.Match(c) && !again.Filter.Match(c) {
			t.Fatalf("cluster %s is selected only because of ignored keys", c.Name)
		}
	}
}

func nullInList(v any) bool {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			if e == nil || nullInList(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range v {
			if nullInList(e) {
				return true
			}
		}
	}
	return false
}

func requireInputError(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("%s: error %T is not an *InputError: %v", what, err, err)
	}
	if ie.Error() == "" {
		t.Fatalf("%s: empty error message", what)
	}
}

// canonicalParameters writes f back as input.parameters: lists for the
// list keys, the selector's and the regular expression's String().
func canonicalParameters(t *testing.T, f *Filter) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	put := func(k string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = b
	}
	for k, v := range map[string][]string{ParamSource: f.Sources, ParamProvider: f.Providers, ParamTenant: f.Tenants, ParamRegion: f.Regions} {
		if v != nil {
			put(k, v)
		}
	}
	if f.Selector != nil {
		put(ParamLabelSelector, f.Selector.String())
	}
	if f.NameRegex != nil {
		put(ParamNameRegex, f.NameRegex.String())
	}
	return out
}

// answerKeys are the only keys a parameter set may have: nothing from the
// model's CA or auth may reach Argo CD's templates.
var answerKeys = []string{"kubernetesVersion", "metadata", "name", "nameNormalized", "phase", "project", "provider", "region", "server", "source", "state", "tenant"}

// checkAnswer checks a 200 body: valid JSON of the documented shape, only
// the documented keys, sorted by name, and exactly the ready clusters of
// snap that f matches (nothing missing, nothing extra).
func checkAnswer(t *testing.T, snap *inventory.Snapshot, f *Filter, body []byte) {
	t.Helper()
	var raw struct {
		Output struct {
			Parameters []map[string]json.RawMessage `json:"parameters"`
		} `json:"output"`
	}
	if err := json.Unmarshal(body, &raw); err != nil || raw.Output.Parameters == nil {
		t.Fatalf("answer does not re-parse as {\"output\":{\"parameters\":[...]}}: %v: %s", err, body)
	}
	var typed response
	if err := json.Unmarshal(body, &typed); err != nil {
		t.Fatalf("answer does not decode as parameters: %v", err)
	}
	var got, want []string
	for i, p := range raw.Output.Parameters {
		keys := make([]string, 0, len(p))
		for k := range p {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if !slices.Equal(keys, answerKeys) {
			t.Fatalf("parameter set %d has keys %v, want exactly %v", i, keys, answerKeys)
		}
		ps := typed.Output.Parameters[i]
		if ps.Metadata.Labels == nil || ps.Metadata.Annotations == nil {
			t.Fatalf("parameter set %s: metadata.labels and annotations must be objects, never null", ps.Name)
		}
		got = append(got, ps.Name)
	}
	if !slices.IsSorted(got) {
		t.Fatalf("answer not sorted by name: %v", got)
	}
	for i := range snap.Clusters {
		if c := snap.Clusters[i]; c.Ready && f.Match(c) {
			want = append(want, c.Name)
		}
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("answer lists %v, the filter selects %v", got, want)
	}
}
