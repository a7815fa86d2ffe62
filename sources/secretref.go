package sources

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ErrNotLocal is returned by ReadLocal for a reference that is not read on
// this machine (a Kubernetes Secret, a token a source issues).
var ErrNotLocal = errors.New("not a file or environment reference")

// ReadLocal returns the value of a file or environment variable reference,
// without its surrounding white space. It is the one reader of such
// references: the plugin's tokens, a source's API token and a cluster's
// bearer token all go through it. Its errors name the reference, never a
// value: a file that cannot be read, a variable that is not set, a value
// that is empty.
func (r *SecretRef) ReadLocal() (string, error) {
	var v string
	switch {
	case r == nil:
		return "", errors.New("no reference")
	case r.File != "":
		b, err := os.ReadFile(r.File)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is in the reference already
			}
			return "", fmt.Errorf("%s: %w", r.String(), err)
		}
		v = string(b)
	case r.Env != "":
		var ok bool
		if v, ok = os.LookupEnv(r.Env); !ok {
			return "", fmt.Errorf("%s: not set", r.String())
		}
	default:
		return "", fmt.Errorf("%s: %w", r.String(), ErrNotLocal)
	}
	if v = strings.TrimSpace(v); v == "" {
		return "", fmt.Errorf("%s: empty", r.String())
	}
	return v, nil
}

// RefAt is a credential reference of the configuration with its path in
// the file.
type RefAt struct {
	Path *field.Path
	Ref  *SecretRef
}

// CredentialRefs is implemented by a configuration section that names
// credentials read on this machine (a token file, a variable): `validate`
// resolves each before anything starts, so that a missing file is a
// configuration error rather than a source that never lists.
type CredentialRefs interface {
	// CredentialRefs returns the section's references with their full
	// paths under path (the section's own).
	CredentialRefs(path *field.Path) []RefAt
}

// CheckLocalRefs reads every file and environment reference of refs and
// returns a problem per reference that cannot be read, with its path
// (never a value). Kubernetes Secret and issued references are skipped:
// they are read at a Secret's write.
func CheckLocalRefs(refs []RefAt) field.ErrorList {
	var errs field.ErrorList
	for _, ra := range refs {
		if ra.Ref == nil || ra.Ref.File == "" && ra.Ref.Env == "" {
			continue
		}
		if _, err := ra.Ref.ReadLocal(); err != nil {
			errs = append(errs, field.Invalid(ra.Path, field.OmitValueType{}, err.Error()))
		}
	}
	return errs
}
