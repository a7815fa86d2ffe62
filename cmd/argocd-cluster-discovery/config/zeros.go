package config

import (
	"bytes"
	"encoding/json"
	"time"
)

// writtenZeros returns the part of a section as written that holds a zero
// (a number, or a duration such as "0s"), keeping its shape: objects with
// only those keys, arrays with every element (an object element reduced
// the same way, {} when it holds none). ok is false when there is none.
//
// A provider's section is decoded into an empty value and then given its
// defaults, which fill what is zero; decoding these zeros again afterwards
// makes a value written in the file the value used: `concurrency: 0` is
// then reported with its range instead of becoming the default, and a
// zero that is allowed is kept.
func writtenZeros(raw json.RawMessage) (out json.RawMessage, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, false
	}
	switch raw[0] {
	case '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil, false
		}
		kept := map[string]json.RawMessage{}
		for k, v := range obj {
			if z, ok := writtenZeros(v); ok {
				kept[k] = z
			}
		}
		if len(kept) == 0 {
			return nil, false
		}
		b, err := json.Marshal(kept)
		return b, err == nil
	case '[':
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil {
			return nil, false
		}
		found := false
		for i, v := range arr {
			z, ok := writtenZeros(v)
			switch {
			case ok:
				arr[i], found = z, true
			case bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")):
				arr[i] = json.RawMessage("{}") // decoded onto the element: changes nothing
			}
		}
		if !found {
			return nil, false
		}
		b, err := json.Marshal(arr)
		return b, err == nil
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		d, err := time.ParseDuration(s)
		return raw, err == nil && d == 0
	default:
		var n float64
		if json.Unmarshal(raw, &n) != nil {
			return nil, false
		}
		return raw, n == 0
	}
}
