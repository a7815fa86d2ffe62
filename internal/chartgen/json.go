package chartgen

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// member is one key of a JSON object with its value as written.
type member struct {
	Key   string
	Value json.RawMessage
}

// object is a JSON object that keeps its keys in the order written, so
// that a generated file differs from the last only where its content does.
type object []member

// parseObject reads a JSON object, each value kept as written.
func parseObject(raw []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var o object
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("a key that is not a string")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		o = append(o, member{Key: key, Value: v})
	}
	return o, nil
}

// get returns the value of key.
func (o object) get(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}

// set replaces the value of key where it is, or appends it.
func (o *object) set(key string, v json.RawMessage) {
	for i := range *o {
		if (*o)[i].Key == key {
			(*o)[i].Value = v
			return
		}
	}
	*o = append(*o, member{Key: key, Value: v})
}

// MarshalJSON writes the object compactly, its keys in order.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.Key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		if err := json.Compact(&b, m.Value); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Key, err)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// raw marshals v (an object, a slice, a string) for an object's value,
// leaving <, > and & as they are written.
func raw(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only values made here
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// indented is v as the chart's files are written: two spaces, a final
// newline.
func indented(v any) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Indent(&out, raw(v), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
