package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocLinksSlugs: heading anchors as GitHub makes them.
func TestDocLinksSlugs(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"The plugin API", "the-plugin-api"},
		{"Filters (`input.parameters`)", "filters-inputparameters"},
		{"Load: `make load`", "load-make-load"},
		{"1. Build and push the image", "1-build-and-push-the-image"},
		{"Passes, cache and leader election", "passes-cache-and-leader-election"},
		{"Dedupe: one cluster found twice", "dedupe-one-cluster-found-twice"},
		{"`secrets.tenant_rules` and `max_x`", "secretstenant_rules-and-max_x"},
		{"snake_case stays, _emphasis_ goes", "snake_case-stays-emphasis-goes"},
		{"**Bold** and [a link](https://example.com)", "bold-and-a-link"},
		{"A -- B", "a----b"},
		{"Größe ändern", "größe-ändern"},
		{"  Trailing closing hashes ##", "trailing-closing-hashes"},
	} {
		t.Run(tc.heading, func(t *testing.T) {
			assert.Equal(t, tc.want, slug(headingText(tc.heading)))
		})
	}
}

// TestDocLinksParse: what counts as a link, a heading and an anchor.
func TestDocLinksParse(t *testing.T) {
	doc := parseMarkdown(strings.Join([]string{
		"# Title",
		"See [a](a.md), [b](<b c.md> \"title\"), ![img](img/x.png) and [c](d/(e).md#f).",
		"Not links: `[x](code.md)` and ``[y](code2.md)``; [z]: in text. [ref][r]",
		"",
		"[r]: ref.md#anchor",
		"   ```yaml",
		"   [w](fenced.md)",
		"   # not a heading",
		"   ```",
		"~~~",
		"[v](tilde.md)",
		"~~~",
		"## Title",
		"<a href=\"html.md#h\">html</a> <a name=\"custom-anchor\"></a>",
		"[ext](https://example.com/x.md) [mail](mailto:a@example.com) [frag](#title-1)",
	}, "\n"))
	var got []string
	for _, l := range doc.links {
		got = append(got, fmt.Sprintf("%d %s", l.line, l.target))
	}
	assert.Equal(t, []string{
		"2 a.md", "2 b c.md", "2 img/x.png", "2 d/(e).md#f",
		"5 ref.md#anchor",
		"14 html.md#h",
		"15 https://example.com/x.md", "15 mailto:a@example.com", "15 #title-1",
	}, got)
	assert.Equal(t, map[string]bool{"title": true, "title-1": true, "custom-anchor": true}, doc.anchors)
}

// TestDocLinksCheck: the checker rejects what it must.
func TestDocLinksCheck(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write("README.md", "# Top\n## Install with Helm\n")
	write("docs/guide.md", "# Guide\n")
	write("pkg/README.md", "# Package\n## Metrics\n")
	write("pkg/code.go", "package pkg\n")
	from := filepath.Join(root, "docs", "guide.md")
	docs := mdCache{}
	for _, tc := range []struct{ target, err string }{
		{"../README.md", ""},
		{"../README.md#install-with-helm", ""},
		{"#guide", ""},
		{"../pkg", ""},
		{"../pkg/", ""},
		{"../pkg#metrics", ""},
		{"/pkg/code.go", ""},
		{"../pkg/code.go#L1-L2", ""},
		{"../pkg/README.md?plain=1#metrics", ""},
		{"https://example.com/nowhere", ""},
		{"../missing.md", "does not exist"},
		{"../README.md#install", `no heading "install"`},
		{"#nowhere", `no heading "nowhere"`},
		{"../pkg/code.go#main", "not a line anchor"},
		{"../docs#x", "no README.md"},
		{"../../outside.md", "outside the repository"},
		{"", "empty link"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			err := docs.check(root, from, tc.target)
			if tc.err == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.err)
			}
		})
	}
}
