package config

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const demoConfig = "../../../testdata/demo/config.yaml"

// Sections of a valid configuration, for building test documents.
const (
	okServer = `server:
  tokens:
    - env: ACD_TOKEN
`
	okSources = `sources:
  - name: one
    provider: static
    static:
      file: clusters.yaml
`
	tokensOnly = "server:\n  tokens: [{env: T}]\n"
)

// paths returns the field paths of the problems behind a Parse error,
// sorted, one per problem (a path appears twice when it has two).
func paths(err error) []string {
	var out []string
	for _, e := range Errors(err) {
		out = append(out, e.Field)
	}
	sort.Strings(out)
	return out
}

// hasFieldPrefix reports whether one problem's path starts with prefix:
// how the tests check a provider section's errors, whose wording is the
// provider's.
func hasFieldPrefix(errs field.ErrorList, prefix string) bool {
	for _, e := range errs {
		if strings.HasPrefix(e.Field, prefix) {
			return true
		}
	}
	return false
}

// hasError reports whether errs has a problem of type typ at path.
func hasError(errs field.ErrorList, path string, typ field.ErrorType) bool {
	for _, e := range errs {
		if e.Field == path && e.Type == typ {
			return true
		}
	}
	return false
}

// problem is an invalid document and what its error must say.
type problem struct {
	name string
	yaml string
	// wantErr are substrings of the error; the first names the field.
	wantErr []string
	// wantPrefix, when set, is the start of one problem's path (a
	// provider section's problem, whose wording is the provider's).
	wantPrefix string
	// wantCount is the number of problems reported; 0: not checked.
	wantCount int
}

// checkProblems parses each document and checks its error.
func checkProblems(t *testing.T, tests []problem) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "/etc/acd")
			require.Error(t, err)
			assert.Nil(t, cfg)
			for _, w := range tt.wantErr {
				assert.Contains(t, err.Error(), w)
			}
			if tt.wantPrefix != "" {
				assert.True(t, hasFieldPrefix(Errors(err), tt.wantPrefix), "no problem under %s: %v", tt.wantPrefix, err)
			}
			if tt.wantCount > 0 {
				assert.Len(t, Errors(err), tt.wantCount, "problems reported: %v", err)
			}
		})
	}
}

// sectionParser returns a Parse of a valid server and static source plus
// the given extra YAML, as section tests need.
func sectionParser(t *testing.T) func(extra string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "clusters.yaml"), []byte("clusters: []\n"), 0o600))
	return func(extra string) (*Config, error) {
		return Parse([]byte(okServer+okSources+extra), dir)
	}
}
