package sources

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Duration is a time.Duration written as a Go duration string ("30s",
// "5m") in the configuration file. It is parsed once, when the file is
// decoded. A value that does not parse does not stop the decoding: it is
// kept and reported by Validate, so that the error names its field and
// the other problems of the file are reported with it.
type Duration struct {
	d   time.Duration
	bad string
}

// D makes a Duration.
func D(d time.Duration) Duration { return Duration{d: d} }

// Std returns the time.Duration (zero for an unset or invalid value).
func (d Duration) Std() time.Duration { return d.d }

// IsZero reports whether the duration is unset (zero and no invalid text).
func (d Duration) IsZero() bool { return d.d == 0 && d.bad == "" }

// Parsed reports whether the text written, if any, was a duration.
func (d Duration) Parsed() bool { return d.bad == "" }

// String returns the duration as Go writes it.
func (d Duration) String() string { return d.d.String() }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.d.String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		*d = Duration{bad: string(b)}
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		*d = Duration{bad: s}
		return nil
	}
	*d = Duration{d: v}
	return nil
}

// Validate checks that the duration parsed and lies in [min, max]; a zero
// max means no upper bound.
func (d Duration) Validate(path *field.Path, minimum, maximum time.Duration) *field.Error {
	switch {
	case d.bad != "":
		return field.Invalid(path, d.bad, `not a duration such as "30s" or "5m"`)
	case d.d < minimum:
		return field.Invalid(path, d.d.String(), fmt.Sprintf("must be at least %s", minimum))
	case maximum > 0 && d.d > maximum:
		return field.Invalid(path, d.d.String(), fmt.Sprintf("must be at most %s", maximum))
	}
	return nil
}
