package sources_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestReadLocal(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	withNewline, blank := file("newline", "s3cr3t-value\n"), file("blank", " \n\t")
	t.Setenv("ACD_TEST_REF_SET", "  s3cr3t-value ")
	t.Setenv("ACD_TEST_REF_EMPTY", "")
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		ref  sources.SecretRef
		want string
		err  string
	}{
		{"a file, trimmed", sources.SecretRef{File: withNewline}, "s3cr3t-value", ""},
		{"a variable, trimmed", sources.SecretRef{Env: "ACD_TEST_REF_SET"}, "s3cr3t-value", ""},
		{"a missing file", sources.SecretRef{File: missing}, "", "file:" + missing + ": no such file or directory"},
		{"a blank file", sources.SecretRef{File: blank}, "", "file:" + blank + ": empty"},
		{"an unset variable", sources.SecretRef{Env: "ACD_TEST_REF_UNSET"}, "", "env:ACD_TEST_REF_UNSET: not set"},
		{"an empty variable", sources.SecretRef{Env: "ACD_TEST_REF_EMPTY"}, "", "env:ACD_TEST_REF_EMPTY: empty"},
		{"a Kubernetes Secret", sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "s", Key: "k"}}, "", "secret:s/k: not a file or environment reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.ref.ReadLocal()
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	at := field.NewPath("sources").Index(0).Child("rancher", "token")
	errs := sources.CheckLocalRefs([]sources.RefAt{
		{Path: at, Ref: &sources.SecretRef{File: missing}},
		{Path: at, Ref: &sources.SecretRef{Env: "ACD_TEST_REF_SET"}},
		{Path: at, Ref: &sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "s", Key: "k"}}}, // read at a write, not here
		{Path: at, Ref: &sources.SecretRef{Env: "ACD_TEST_REF_UNSET"}},
	})
	assert.Equal(t, []string{
		"sources[0].rancher.token: Invalid value: file:" + missing + ": no such file or directory",
		"sources[0].rancher.token: Invalid value: env:ACD_TEST_REF_UNSET: not set",
	}, errorStrings(errs))
}

func errorStrings(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}
