package yamldocs

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// Rewrite is an unquoted scalar of a document that sigs.k8s.io/yaml
// decodes into a string other than the one written: YAML 1.1 reads yes,
// no, on, off, y and n as booleans, 1.10 and 1e3 as floats, 012 as an
// octal number and ~ as null, and the decoder then writes what it read
// into the string ("true", "1.1", "1000", "10", "").
type Rewrite struct {
	// Line is the scalar's line, from 1.
	Line int
	// Path is where it is, as in clusters[2].labels.env.
	Path string
	// Key reports that the scalar is a mapping's key, not a value.
	Key bool
	// Written is the scalar as written, Read the string decoded.
	Written, Read string
}

// Error implements error.
func (r Rewrite) Error() string {
	what := "the unquoted value"
	if r.Key {
		what = "the unquoted key"
	}
	return fmt.Sprintf("line %d: %s: %s %s is read as %q (YAML 1.1): quote it to keep it as written", r.Line, r.Path, what, r.Written, r.Read)
}

// Rewrites returns the unquoted scalars of the YAML document raw that
// sigs.k8s.io/yaml, decoding raw into a value of type t, turns into
// strings other than the ones written, in the order of the document. A
// scalar decoded into anything else than a string (a bool field, a type
// with its own JSON decoding) is not one. A document that cannot be
// parsed has none: its decoder reports it. Into any, as YAMLToJSON
// decodes, only the keys of mappings are strings.
func Rewrites(raw []byte, t reflect.Type) []Rewrite {
	if !mayRewrite(raw) {
		return nil // parsing the nodes costs more than decoding
	}
	var doc yamlv3.Node
	if yamlv3.Unmarshal(raw, &doc) != nil {
		return nil
	}
	var out []Rewrite
	walk(&doc, t, "", &out)
	return out
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// walk collects the rewrites of n, decoded into a value of type t at
// path.
func walk(n *yamlv3.Node, t reflect.Type, path string, out *[]Rewrite) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return // decoded its own way: sigs.k8s.io/yaml converts nothing there
	}
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, c := range n.Content {
			walk(c, t, path, out)
		}
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			switch t.Kind() {
			case reflect.Struct:
				if f, ok := fieldNamed(t, k.Value); ok {
					walk(v, f, join(path, k.Value), out)
				}
			case reflect.Map:
				if t.Key().Kind() == reflect.String {
					check(k, path, true, out)
				}
				walk(v, t.Elem(), join(path, k.Value), out)
			case reflect.Interface:
				// decoded as JSON: every key becomes a string, the
				// values keep what YAML read
				check(k, path, true, out)
				walk(v, t, join(path, k.Value), out)
			}
		}
	case yamlv3.SequenceNode:
		switch t.Kind() {
		case reflect.Slice, reflect.Array:
			for i, c := range n.Content {
				walk(c, t.Elem(), path+"["+strconv.Itoa(i)+"]", out)
			}
		case reflect.Interface:
			for i, c := range n.Content {
				walk(c, t, path+"["+strconv.Itoa(i)+"]", out)
			}
		}
	case yamlv3.ScalarNode:
		if t.Kind() == reflect.String {
			check(n, path, false, out)
		}
	}
}

// check adds n, a key or value decoded into a string, when it is
// unquoted and read as another string than the one written.
func check(n *yamlv3.Node, path string, key bool, out *[]Rewrite) {
	if n.Kind != yamlv3.ScalarNode || n.Style != 0 || !retypable(n.Value) {
		return
	}
	read, ok := readAs(n.Value, key)
	if !ok || read == n.Value {
		return
	}
	*out = append(*out, Rewrite{Line: n.Line, Path: pathOrTop(path), Key: key, Written: n.Value, Read: read})
}

// numberStarts are the first characters of what YAML 1.1 may read as a
// number (or, for ~, as null).
const numberStarts = "0123456789+-.~"

// retypable reports whether YAML 1.1 may read the plain scalar s as
// something else than a string: a number, a boolean or null.
func retypable(s string) bool {
	if s == "" {
		return false // null, decoded as "": what is written
	}
	if strings.IndexByte(numberStarts, s[0]) >= 0 {
		return true
	}
	switch strings.ToLower(s) {
	case "y", "yes", "n", "no", "on", "off", "true", "false", "null":
		return true
	}
	return false
}

// mayRewrite reports whether raw may hold a plain scalar YAML 1.1 reads
// as something else than a string: a word outside quotes and comments,
// between the delimiters of YAML's flow and block syntax (a colon only
// before a space or another delimiter), that is retypable. It errs
// towards yes (a word of a block scalar counts); what it can miss is a
// scalar after a quote left open inside a block scalar and closed by a
// later one.
func mayRewrite(raw []byte) bool {
	start := -1 // of the current word
	for i := 0; i <= len(raw); i++ {
		c := byte('\n')
		if i < len(raw) {
			c = raw[i]
		}
		switch {
		case start < 0 && (c == '"' || c == '\''):
			j := closingQuote(raw, i)
			if j < 0 {
				return true // unterminated: let the parser say
			}
			i = j
		case start < 0 && c == '#' && (i == 0 || strings.IndexByte(" \t\r\n", raw[i-1]) >= 0):
			for i < len(raw) && raw[i] != '\n' {
				i++
			}
		case strings.IndexByte(" \t\r\n,[]{}", c) >= 0 || c == ':' && (i+1 == len(raw) || strings.IndexByte(" \t\r\n,[]{}", raw[i+1]) >= 0):
			if start >= 0 && retypableWord(raw[start:i]) {
				return true
			}
			start = -1
		case start < 0:
			start = i
		}
	}
	return false
}

// retypableWord is retypable but for YAML's own words: an item's dash, a
// document's marker or end.
func retypableWord(w []byte) bool {
	switch string(w) { // no allocation: the compiler compares the bytes
	case "-", "---", "...":
		return false
	}
	if len(w) > len("false") {
		return strings.IndexByte(numberStarts, w[0]) >= 0
	}
	var lower [len("false")]byte
	for i, c := range w {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	return retypable(string(lower[:len(w)]))
}

// closingQuote returns the index of the quote that closes the one at i,
// or -1.
func closingQuote(raw []byte, i int) int {
	q := raw[i]
	for j := i + 1; j < len(raw); j++ {
		switch {
		case q == '"' && raw[j] == '\\':
			j++
		case raw[j] == q && q == '\'' && j+1 < len(raw) && raw[j+1] == '\'':
			j++ // '' is a quote inside single quotes
		case raw[j] == q:
			return j
		}
	}
	return -1
}

// readAs is the string sigs.k8s.io/yaml decodes the plain scalar s into,
// as a value or as a key of a map of strings.
func readAs(s string, key bool) (string, bool) {
	var m map[string]string
	doc := "v: " + s
	if key {
		doc = s + ": v"
	}
	if yaml.Unmarshal([]byte(doc), &m) != nil || len(m) != 1 {
		return "", false
	}
	if !key {
		v, ok := m["v"]
		return v, ok
	}
	for k := range m {
		return k, true
	}
	return "", false
}

// fieldNamed returns the type of the field of struct t that
// encoding/json decodes the key name into: its exact JSON name first,
// then one equal to it but for case, fields of embedded structs
// included.
func fieldNamed(t reflect.Type, name string) (reflect.Type, bool) {
	var fold reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && tag == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if ft, ok := fieldNamed(et, name); ok {
					return ft, true
				}
				continue
			}
		}
		if tag == "" {
			tag = f.Name
		}
		switch {
		case tag == name:
			return f.Type, true
		case fold == nil && strings.EqualFold(tag, name):
			fold = f.Type
		}
	}
	return fold, fold != nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func pathOrTop(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

// RewritesError is the error of rewrites: the first few, then how many
// more.
func RewritesError(rw []Rewrite) error {
	const shown = 5
	var b strings.Builder
	for i, r := range rw {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(rw)-shown)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.Error())
	}
	return fmt.Errorf("%s", b.String())
}
