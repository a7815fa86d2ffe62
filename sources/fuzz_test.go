package sources_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/fuzzseed"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// FuzzNormalizeServer checks the one validation every source's server URL
// goes through (it becomes the Secret's server, which Argo CD compares as a
// string):
//   - an accepted URL is returned in a normal form that is accepted again
//     unchanged (idempotent), without trailing slash or whitespace, with an
//     http or https scheme and a host;
//   - a rejected URL returns "" and an error that does not quote the user
//     info it may carry.
//
// Run it with: go test ./sources -run '^$' -fuzz '^FuzzNormalizeServer$' -fuzztime 1m
func FuzzNormalizeServer(f *testing.F) {
	fuzzseed.Add(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		in := string(raw)
		out, err := sources.NormalizeServer(in)
		if err != nil {
			if out != "" {
				t.Fatalf("error %v with a result %q", err, out)
			}
			if ui := userInfo(in); len(ui) >= 10 && strings.Contains(err.Error(), ui) {
				t.Fatalf("error %q quotes the user info", err)
			}
			return
		}
		again, err := sources.NormalizeServer(out)
		if err != nil || again != out {
			t.Fatalf("not idempotent: %q → %q → %q (%v)", in, out, again, err)
		}
		lower := strings.ToLower(out)
		if strings.HasSuffix(out, "/") || strings.ContainsFunc(out, unicode.IsSpace) ||
			!(strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "http://")) {
			t.Fatalf("accepted %q as %q", in, out)
		}
	})
}

// userInfo is what stands between "://" and the last "@" of the authority.
func userInfo(s string) string {
	_, rest, ok := strings.Cut(s, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		return rest[:i]
	}
	return ""
}
