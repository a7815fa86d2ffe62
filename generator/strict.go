package generator

// checkStrict is the token-by-token pass every getparams body goes through
// before encoding/json (see decode.go for why).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// level says which rules apply to a value besides the general ones.
type level int

const (
	levelOther level = iota
	levelTop
	levelAppSetName
	levelInput
)

// maxDepth is encoding/json's nesting limit; deeper bodies are malformed.
const maxDepth = 10000

var errTooDeep = errors.New("nested too deeply")

// pathElem is a key of an object or an index of a list.
type pathElem struct {
	key   string
	index int // -1 for a key
}

// strictScan is what checkStrict learned on the way.
type strictScan struct {
	appSet  string
	ignored []string
}

type strictWalker struct {
	data   []byte
	dec    *json.Decoder
	prefix string
	path   []pathElem
	strictScan
	ignoredSet map[string]struct{}
}

// checkStrict walks the JSON value data (an object, whitespace trimmed) token
// by token and rejects, with an *InputError naming the key path but never a
// value:
//   - a duplicate key in any object (also when spelled with escapes);
//   - null anywhere inside a list;
//   - a string (key or value) with an escape that is not valid UTF-16, which
//     encoding/json would turn into U+FFFD;
//   - at levelTop: a key that differs only in case from applicationSetName
//     or input (encoding/json would take it for that key); other unknown
//     keys are collected in ignored;
//   - at levelInput: any key but parameters, with its own message for one
//     that differs only in case.
//
// Parameter keys and values are ParseParameters' to check. Any other error
// (not an *InputError) means data is not valid JSON. The caller checks UTF-8
// beforehand. The walk is linear in the size of data.
func checkStrict(data []byte, root level, prefix string) (strictScan, error) {
	w := &strictWalker{data: data, dec: json.NewDecoder(bytes.NewReader(data)), prefix: prefix}
	w.dec.UseNumber()
	tok, err := w.token(false)
	if err != nil {
		return w.strictScan, err
	}
	if err := w.value(tok, root); err != nil {
		return w.strictScan, err
	}
	if _, err := w.dec.Token(); err != io.EOF {
		return w.strictScan, errors.New("data after the value")
	}
	return w.strictScan, nil
}

// token reads the next token; a string holding U+FFFD is checked for
// escapes of lone surrogates in its raw bytes (the body is valid UTF-8, so
// U+FFFD comes from the bytes EF BF BD, from \ufffd, or from such an escape).
func (w *strictWalker) token(isKey bool) (json.Token, error) {
	start := w.dec.InputOffset()
	tok, err := w.dec.Token()
	if err != nil {
		return nil, err
	}
	if s, ok := tok.(string); ok && strings.ContainsRune(s, utf8.RuneError) {
		if !validEscapes(w.data[start:w.dec.InputOffset()]) {
			what := "a string"
			if isKey {
				what = "a key"
			}
			return nil, inputErrorf("%s: %s has an escape that is not valid UTF-16 (a lone surrogate such as \\ud800)", w.where(), what)
		}
	}
	return tok, nil
}

func (w *strictWalker) value(tok json.Token, lvl level) error {
	switch t := tok.(type) {
	case json.Delim:
		if len(w.path) >= maxDepth {
			return errTooDeep
		}
		switch t {
		case '{':
			return w.object(lvl)
		case '[':
			return w.array()
		}
		return errors.New("unexpected delimiter")
	case string:
		if lvl == levelAppSetName {
			w.appSet = t
		}
	}
	return nil
}

func (w *strictWalker) object(lvl level) error {
	var first string
	var seen map[string]struct{}
	for n := 0; ; n++ {
		tok, err := w.token(true)
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && d == '}' {
			return nil
		}
		key, ok := tok.(string)
		if !ok {
			return errors.New("object key is not a string")
		}
		switch {
		case n == 0:
			first = key
		case seen == nil && key != first:
			seen = map[string]struct{}{first: {}, key: {}}
		default:
			if _, dup := seen[key]; dup || key == first {
				return inputErrorf("%s: duplicate key %s; every key may appear once", w.where(), quoteKey(key))
			}
			seen[key] = struct{}{}
		}
		child, err := w.member(lvl, key)
		if err != nil {
			return err
		}
		w.path = append(w.path, pathElem{key: key, index: -1})
		if tok, err = w.token(false); err == nil {
			err = w.value(tok, child)
		}
		if err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
	}
}

// member checks key of an object at lvl and returns the level of its value.
func (w *strictWalker) member(lvl level, key string) (level, error) {
	switch lvl {
	case levelTop:
		switch key {
		case keyApplicationSetName:
			return levelAppSetName, nil
		case keyInput:
			return levelInput, nil
		}
		for _, known := range []string{keyApplicationSetName, keyInput} {
			if strings.EqualFold(key, known) {
				return 0, inputErrorf("request body: key %s differs from %q only in case; keys are case-sensitive", quoteKey(key), known)
			}
		}
		if _, dup := w.ignoredSet[key]; !dup {
			if w.ignoredSet == nil {
				w.ignoredSet = map[string]struct{}{}
			}
			w.ignoredSet[key] = struct{}{}
			w.ignored = append(w.ignored, key)
		}
	case levelInput:
		if key == keyParameters {
			return levelOther, nil
		}
		if strings.EqualFold(key, keyParameters) {
			return 0, inputErrorf("%s: key %s differs from %q only in case; keys are case-sensitive", w.where(), quoteKey(key), keyParameters)
		}
		return 0, inputErrorf("%s: unknown key %s (the only key is %q)", w.where(), quoteKey(key), keyParameters)
	}
	return levelOther, nil
}

func (w *strictWalker) array() error {
	for i := 0; ; i++ {
		w.path = append(w.path, pathElem{index: i})
		tok, err := w.token(false)
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && d == ']' {
			w.path = w.path[:len(w.path)-1]
			return nil
		}
		if tok == nil {
			return inputErrorf("%s: null is not allowed in a list", w.where())
		}
		if err := w.value(tok, levelOther); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
	}
}

// where is the key path of the current value for messages, e.g.
// input.parameters.tenant[1]; long paths and keys are shortened.
func (w *strictWalker) where() string {
	var b strings.Builder
	b.WriteString(w.prefix)
	elems := w.path
	const head, tail = 4, 3
	for i, e := range elems {
		if len(elems) > head+tail+1 && i == head {
			b.WriteString("…")
		}
		if len(elems) > head+tail+1 && i >= head && i < len(elems)-tail {
			continue
		}
		if e.index >= 0 {
			fmt.Fprintf(&b, "[%d]", e.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(shortKey(e.key))
	}
	if b.Len() == 0 {
		return "request body"
	}
	return b.String()
}

// validEscapes reports whether every \u escape in b, JSON text or a part of
// it that starts outside a string or at its opening quote, is valid UTF-16:
// a high surrogate directly followed by an escaped low one, or no surrogate.
// Outside strings valid JSON has no backslash.
func validEscapes(b []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			return true
		}
		i += j + 1
		if i >= len(b) {
			return true
		}
		if b[i] != 'u' {
			i++ // \" \\ \/ \b \f \n \r \t
			continue
		}
		r, ok := hex4(b, i+1)
		if !ok {
			return true // not valid JSON; the decoder reports it
		}
		i += 5
		switch {
		case r < 0xD800 || r > 0xDFFF:
		case r >= 0xDC00:
			return false // a low surrogate alone
		default:
			if i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' {
				return false
			}
			lo, ok := hex4(b, i+2)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 6
		}
	}
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
