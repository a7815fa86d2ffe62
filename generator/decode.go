package generator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// The request decoder must never widen an answer: Argo CD creates an
// Application for every parameter set of a 200 and deletes those a later
// 200 no longer lists. encoding/json is lenient where that matters (null
// becomes "" inside a list, keys match case-insensitively, a duplicate key
// overrides the first, invalid UTF-8 and lone UTF-16 surrogates become
// U+FFFD, unknown fields are dropped), so every body first goes through
// checkStrict, which rejects all of these, and only then through
// encoding/json.

// Request is a decoded getparams body.
type Request struct {
	ApplicationSetName string
	Filter             Filter
	// IgnoredKeys are the unknown top-level keys, each once, in the order of
	// the body. They are tolerated because a later Argo CD may send more
	// fields; nothing below the top level is.
	IgnoredKeys []string
}

// Top-level keys of a getparams body, and the one key of its input.
const (
	keyApplicationSetName = "applicationSetName"
	keyInput              = "input"
	keyParameters         = "parameters"
)

// ParseRequest decodes a getparams body strictly; providers are the known
// provider names (see ParseParameters). Every error is an *InputError; on an
// error the result still carries the ApplicationSet's name when it was
// read, for the log.
func ParseRequest(body []byte, providers []sources.Provider) (Request, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return Request{}, inputErrorf("empty request body: expected a JSON object with \"input\"")
	}
	if trimmed[0] != '{' {
		return Request{}, inputErrorf("request body must be a JSON object")
	}
	if !utf8.Valid(body) {
		return Request{}, inputErrorf("request body is not valid UTF-8 (byte %d)", invalidUTF8At(body))
	}
	sc, err := checkStrict(trimmed, levelTop, "")
	if err != nil {
		return Request{ApplicationSetName: sc.appSet}, strictError(err, trimmed, "malformed request body", new(request))
	}
	var req request
	if err := json.Unmarshal(trimmed, &req); err != nil {
		return Request{ApplicationSetName: sc.appSet}, inputErrorf("malformed request body: %s", jsonErrorText(err, ""))
	}
	var params map[string]json.RawMessage
	if req.Input != nil {
		params = req.Input.Parameters
	}
	f, err := ParseParameters(params, providers)
	if err != nil {
		return Request{ApplicationSetName: req.ApplicationSetName, IgnoredKeys: sc.ignored}, err
	}
	return Request{ApplicationSetName: req.ApplicationSetName, Filter: f, IgnoredKeys: sc.ignored}, nil
}

// ParseInput decodes the input object of a getparams body alone, e.g.
// {"parameters":{"tenant":"acme"}}, by the same rules as ParseRequest
// applies to it; discover --input uses it. null is accepted as in a body
// ("input": null) and selects everything. providers are the known provider
// names (see ParseParameters). Every error is an *InputError.
func ParseInput(raw []byte, providers []sources.Provider) (Filter, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return Filter{}, inputErrorf("empty input: expected a JSON object such as {\"parameters\":{...}}")
	}
	if !utf8.Valid(raw) {
		return Filter{}, inputErrorf("input is not valid UTF-8 (byte %d)", invalidUTF8At(raw))
	}
	if string(trimmed) == "null" {
		return ParseParameters(nil, providers)
	}
	if trimmed[0] != '{' {
		return Filter{}, inputErrorf("input must be a JSON object such as {\"parameters\":{...}}")
	}
	var in inputObject
	if _, err := checkStrict(trimmed, levelInput, keyInput); err != nil {
		return Filter{}, strictError(err, trimmed, "malformed input", &in)
	}
	if err := json.Unmarshal(trimmed, &in); err != nil {
		return Filter{}, inputErrorf("malformed input: %s", jsonErrorText(err, keyInput))
	}
	return ParseParameters(in.Parameters, providers)
}

// inputObject is the input of a getparams body.
type inputObject struct {
	Parameters map[string]json.RawMessage `json:"parameters"`
}

// strictError returns err when it is a rule of checkStrict, else (the JSON
// itself is malformed) encoding/json's view of it, so that a syntax error
// reads the same with or without the strict pass.
func strictError(err error, data []byte, what string, v any) error {
	var ie *InputError
	if errors.As(err, &ie) {
		return err
	}
	if uerr := json.Unmarshal(data, v); uerr != nil {
		field := ""
		if what == "malformed input" {
			field = keyInput
		}
		return inputErrorf("%s: %s", what, jsonErrorText(uerr, field))
	}
	return inputErrorf("%s: invalid JSON", what)
}

// InputError is a request whose input cannot be used; it becomes a 400.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

// request is the body Argo CD's plugin generator sends.
type request struct {
	ApplicationSetName string `json:"applicationSetName"`
	Input              *struct {
		Parameters map[string]json.RawMessage `json:"parameters"`
	} `json:"input"`
}

// parseRequest decodes a getparams body into a Filter (see ParseRequest,
// which also returns the ignored top-level keys). Every error is an
// *InputError.
func parseRequest(body []byte, providers []sources.Provider) (Filter, string, error) {
	req, err := ParseRequest(body, providers)
	return req.Filter, req.ApplicationSetName, err
}

// jsonErrorText keeps decoder errors short and free of request content.
// prefix is the path of the decoded value in a body ("" for the body).
func jsonErrorText(err error, prefix string) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		field := te.Field
		if prefix != "" {
			field = prefix + "." + field
		}
		if field == "input" || field == "input.parameters" {
			return fmt.Sprintf("%s must be an object, got JSON %s", field, te.Value)
		}
		return fmt.Sprintf("field %q has the wrong type (got JSON %s)", field, te.Value)
	}
	return "invalid JSON"
}

const maxKeyInMessage = 64

func shortKey(k string) string {
	if len(k) <= maxKeyInMessage {
		return k
	}
	cut := maxKeyInMessage
	for cut > 0 && !utf8.RuneStart(k[cut]) {
		cut--
	}
	return k[:cut] + "…"
}

func quoteKey(k string) string { return fmt.Sprintf("%q", shortKey(k)) }

// invalidUTF8At is the offset of the first byte of b that is not valid
// UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// maxLoggedKeys bounds the ignored key names remembered for logging, since
// clients choose them.
const maxLoggedKeys = 100

// onceKeys remembers which ignored top-level key names were logged, so
// that each is logged once per process (see Request.IgnoredKeys).
type onceKeys struct {
	mu   sync.Mutex
	seen map[string]struct{}
	full bool
}

// firstSeen returns the keys not seen before, and whether the set just
// reached maxLoggedKeys (log that further names are not logged).
func (o *onceKeys) firstSeen(keys []string) (fresh []string, nowFull bool) {
	if len(keys) == 0 {
		return nil, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.full {
		return nil, false
	}
	if o.seen == nil {
		o.seen = map[string]struct{}{}
	}
	for _, k := range keys {
		if _, ok := o.seen[k]; ok {
			continue
		}
		if len(o.seen) == maxLoggedKeys {
			o.full = true
			return fresh, true
		}
		o.seen[k] = struct{}{}
		fresh = append(fresh, shortKey(k))
	}
	return fresh, false
}
