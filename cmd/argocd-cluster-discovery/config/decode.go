package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/yamldocs"
)

// maxTypeErrors bounds the values of the wrong type reported per decoded
// part of the file.
const maxTypeErrors = 100

// decodeInto decodes raw into v, case-sensitively, and returns every
// problem with its path under at: each unknown key (when strict), each
// duplicate key and each value of the wrong type. sigs.k8s.io/json stops
// at the first wrong type and then drops the unknown keys it found, so a
// value of the wrong type is replaced by null (its field keeps its
// default) and raw decoded again into v as it was, until nothing but
// unknown or duplicate keys is left.
func decodeInto(at *field.Path, raw []byte, v any, strict bool) field.ErrorList {
	opts := []kjson.StrictOption{kjson.DisallowDuplicateFields}
	if strict {
		opts = append(opts, kjson.DisallowUnknownFields)
	}
	target := reflect.ValueOf(v).Elem()
	initial := reflect.New(target.Type()).Elem()
	initial.Set(target)
	var errs field.ErrorList
	for range maxTypeErrors {
		strictErrs, err := kjson.UnmarshalStrict(raw, v, opts...)
		if err == nil {
			for _, se := range strictErrs {
				errs = append(errs, strictError(at, se))
			}
			return errs
		}
		te, ok := typeErrorOf(err)
		p, start, end, found := valueAt(at, raw, te.offset)
		if !ok || !found {
			return append(errs, field.Invalid(pathOrRoot(at), field.OmitValueType{}, err.Error()))
		}
		detail := fmt.Sprintf("got a JSON %s where %s is expected", te.value, te.typ)
		if te.typ != nil && te.typ.Kind() == reflect.String {
			detail += " (YAML reads an unquoted yes, on, 1.30 or 0123 as a boolean or a number: quote the string)"
		}
		errs = append(errs, field.TypeInvalid(p, field.OmitValueType{}, detail))
		raw = slices.Concat(raw[:start], []byte("null"), raw[end:])
		target.Set(initial)
	}
	return errs
}

// typeError is what a type error of encoding/json says.
type typeError struct {
	value  string
	typ    reflect.Type
	offset int64 // just after the value, or after the opening of an object or array
}

// typeErrorOf reads a type error of encoding/json or of sigs.k8s.io/json,
// whose UnmarshalTypeError is a copy in an internal package (same fields).
func typeErrorOf(err error) (typeError, bool) {
	var std *json.UnmarshalTypeError
	if errors.As(err, &std) {
		return typeError{std.Value, std.Type, std.Offset}, true
	}
	rv := reflect.ValueOf(err)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return typeError{}, false
	}
	s := rv.Elem()
	if s.Type().Name() != "UnmarshalTypeError" {
		return typeError{}, false
	}
	value, off, typ := s.FieldByName("Value"), s.FieldByName("Offset"), s.FieldByName("Type")
	if value.Kind() != reflect.String || off.Kind() != reflect.Int64 || !typ.IsValid() || !typ.CanInterface() {
		return typeError{}, false
	}
	t, _ := typ.Interface().(reflect.Type)
	return typeError{value.String(), t, off.Int()}, t != nil
}

// valueAt finds the value of the JSON document raw that ends at offset off
// (a scalar) or opens just before it (an object or an array), as a type
// error reports it, and returns its path under at and its extent.
func valueAt(at *field.Path, raw []byte, off int64) (p *field.Path, start, end int64, ok bool) {
	type level struct {
		path            *field.Path
		object, wantKey bool
		key             string
		index           int
	}
	var stack []*level
	done := func() { // a value of the innermost object or array is read
		if n := len(stack); n > 0 {
			stack[n-1].wantKey = stack[n-1].object
			stack[n-1].index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, 0, 0, false
		}
		d, delim := tok.(json.Delim)
		if delim && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			done()
			continue
		}
		p := at
		if n := len(stack); n > 0 {
			top := stack[n-1]
			switch {
			case top.object && top.wantKey:
				top.key, top.wantKey = tok.(string), false
				continue
			case top.object:
				p = childOf(top.path, top.key)
			default:
				p = pathOrRoot(top.path).Index(top.index)
			}
		}
		if dec.InputOffset() == off && p != nil {
			if delim {
				return p, off - 1, skipValue(dec), true
			}
			return p, before + int64(len(raw[before:])-len(bytes.TrimLeft(raw[before:], " \t\r\n,:"))), off, true
		}
		if delim {
			stack = append(stack, &level{path: p, object: d == '{', wantKey: d == '{'})
			continue
		}
		done()
	}
}

// skipValue reads the rest of the object or array just opened and returns
// the offset after it.
func skipValue(dec *json.Decoder) int64 {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return dec.InputOffset()
}

func childOf(p *field.Path, name string) *field.Path {
	if p == nil {
		return field.NewPath(name)
	}
	return p.Child(name)
}

func pathOrRoot(p *field.Path) *field.Path {
	if p == nil {
		return field.NewPath("")
	}
	return p
}

// strictError turns an unknown or duplicate key of sigs.k8s.io/json into a
// field error under at.
func strictError(at *field.Path, err error) *field.Error {
	fe, ok := err.(interface{ FieldPath() string })
	if !ok {
		return field.Invalid(pathOrRoot(at), field.OmitValueType{}, err.Error())
	}
	p := joinPath(at, fe.FieldPath())
	if strings.HasPrefix(err.Error(), "duplicate field") {
		return field.Duplicate(p, field.OmitValueType{})
	}
	return unknownKey(p)
}

// joinPath appends a dotted path with [i] indexes ("a.b[2].c") to at.
func joinPath(at *field.Path, rel string) *field.Path {
	p := at
	for _, part := range strings.Split(rel, ".") {
		if part == "" {
			continue
		}
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			p = childOf(p, name)
		}
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			n, err := strconv.Atoi(idx)
			if err != nil {
				p = childOf(p, "["+idx+"]") // not an index: keep the text as it was
			} else {
				p = pathOrRoot(p).Index(n)
			}
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return pathOrRoot(p)
}

// rewrittenKeys reports the unquoted keys YAMLToJSON turns into other
// strings than the ones written: `on:` is the key "true" (YAML 1.1), which
// a map of labels would take without a word.
func rewrittenKeys(raw []byte) field.ErrorList {
	var errs field.ErrorList
	for _, r := range yamldocs.Rewrites(raw, reflect.TypeFor[any]()) {
		errs = append(errs, field.Invalid(field.NewPath(r.Path), r.Written,
			fmt.Sprintf("line %d: the unquoted key is read as %q (YAML 1.1): quote it to keep it as written", r.Line, r.Read)))
	}
	return errs
}

// duplicateKeys returns each key written again in a mapping of the YAML
// document raw, at its path. Converting the document to JSON keeps one of
// the values, so a duplicate is found here or not at all. It reads the
// document with the YAML library sigs.k8s.io/yaml uses, into MapSlices,
// which keep every key.
func duplicateKeys(raw []byte) field.ErrorList {
	var root yamlv2.MapSlice
	if yamlv2.Unmarshal(raw, &root) != nil {
		return nil // not a mapping: reported by Parse
	}
	return duplicatesIn(nil, root)
}

func duplicatesIn(at *field.Path, v any) field.ErrorList {
	var errs field.ErrorList
	switch v := v.(type) {
	case yamlv2.MapSlice:
		seen := make(map[string]bool, len(v))
		for _, item := range v {
			k := fmt.Sprint(item.Key) // as the key is written in JSON
			p := childOf(at, k)
			if seen[k] {
				e := field.Duplicate(p, field.OmitValueType{})
				e.Detail = "the key is written more than once"
				errs = append(errs, e)
			}
			seen[k] = true
			errs = append(errs, duplicatesIn(p, item.Value)...)
		}
	case []any:
		for i, item := range v {
			errs = append(errs, duplicatesIn(pathOrRoot(at).Index(i), item)...)
		}
	}
	return errs
}
