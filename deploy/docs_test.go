package deploy_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocLinks checks every relative link of every Markdown file of the
// repository (bin/ at the root, .git and any testdata/ directory are not
// walked): the file or directory it names exists, inside the repository,
// and a #fragment names a heading of the target Markdown file (a
// directory's README.md) by GitHub's rules, or a line (#L12, #L12-L20) of
// another file. Links with a scheme (https:, mailto:) are not fetched.
// Links inside code spans and fenced code blocks are not links.
func TestDocLinks(t *testing.T) {
	root := moduleRoot(t)
	files, err := markdownFiles(root)
	require.NoError(t, err)
	require.NotEmpty(t, files)
	docs := mdCache{}
	for _, file := range files {
		rel, err := filepath.Rel(root, file)
		require.NoError(t, err)
		t.Run(filepath.ToSlash(rel), func(t *testing.T) {
			doc, err := docs.get(file)
			require.NoError(t, err)
			for _, l := range doc.links {
				if err := docs.check(root, file, l.target); err != nil {
					t.Errorf("%s:%d: (%s): %v", filepath.ToSlash(rel), l.line, l.target, err)
				}
			}
		})
	}
}

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

// moduleRoot is the nearest directory above the test's with a go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test directory")
		dir = parent
	}
}

// markdownFiles lists the *.md files under root, without bin/ (at the root),
// .git and any testdata/ directory.
func markdownFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if name == ".git" || name == "testdata" || (name == "bin" && filepath.Dir(path) == root) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.EqualFold(filepath.Ext(path), ".md") {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

type mdLink struct {
	line   int
	target string
}

type mdDoc struct {
	links   []mdLink
	anchors map[string]bool
}

// mdCache parses each Markdown file once, by absolute path.
type mdCache map[string]*mdDoc

func (c mdCache) get(path string) (*mdDoc, error) {
	if d, ok := c[path]; ok {
		return d, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := parseMarkdown(string(b))
	c[path] = d
	return d, nil
}

var (
	schemeRE     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	lineAnchorRE = regexp.MustCompile(`^L[0-9]+(-L[0-9]+)?$`)
)

// check resolves target, a link written in the Markdown file from, and
// says why it is broken, if it is.
func (c mdCache) check(root, from, target string) error {
	if target == "" {
		return errors.New("empty link")
	}
	if schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
		return nil // external: not fetched
	}
	pathPart, fragment, _ := strings.Cut(target, "#")
	pathPart, _, _ = strings.Cut(pathPart, "?")
	p, err := url.PathUnescape(pathPart)
	if err != nil {
		return fmt.Errorf("bad escape in path: %w", err)
	}
	if fragment != "" {
		if fragment, err = url.PathUnescape(fragment); err != nil {
			return fmt.Errorf("bad escape in fragment: %w", err)
		}
	}

	resolved := from
	switch {
	case p == "":
	case strings.HasPrefix(p, "/"):
		resolved = filepath.Join(root, filepath.FromSlash(p))
	default:
		resolved = filepath.Join(filepath.Dir(from), filepath.FromSlash(p))
	}
	if rel, err := filepath.Rel(root, resolved); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return errors.New("outside the repository")
	}
	info, err := os.Stat(resolved)
	if err != nil {
		return errors.New("does not exist")
	}
	if fragment == "" {
		return nil
	}
	if info.IsDir() {
		readme := filepath.Join(resolved, "README.md")
		if _, err := os.Stat(readme); err != nil {
			return fmt.Errorf("#%s on a directory with no README.md", fragment)
		}
		resolved = readme
	}
	if !strings.EqualFold(filepath.Ext(resolved), ".md") {
		if lineAnchorRE.MatchString(fragment) {
			return nil
		}
		return fmt.Errorf("#%s is not a line anchor (#L12, #L12-L20) of a file that is not Markdown", fragment)
	}
	doc, err := c.get(resolved)
	if err != nil {
		return err
	}
	if !doc.anchors[fragment] {
		return fmt.Errorf("no heading %q in %s", fragment, filepath.Base(resolved))
	}
	return nil
}

var (
	atxHeadingRE = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	refDefRE     = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:[ \t]*(<[^>]*>|\S+)`)
	htmlLinkRE   = regexp.MustCompile(`<(?:a|img)\b[^>]*?\b(?:href|src)="([^"]*)"`)
	htmlAnchorRE = regexp.MustCompile(`<a\b[^>]*?\b(?:name|id)="([^"]+)"`)
)

// parseMarkdown returns the links of a Markdown document, with their line
// numbers, and the anchors its headings (ATX only) and HTML anchors make.
func parseMarkdown(text string) *mdDoc {
	doc := &mdDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	var fence string // the open fence's marker, "" outside a fenced block
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t") == "" {
				fence = ""
			}
			continue
		}
		if m := fenceMarker(trimmed); m != "" {
			fence = m
			continue
		}
		if m := atxHeadingRE.FindStringSubmatch(line); m != nil {
			s := slug(headingText(m[1]))
			if k := seen[s]; k > 0 {
				doc.anchors[fmt.Sprintf("%s-%d", s, k)] = true
			} else {
				doc.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range htmlAnchorRE.FindAllStringSubmatch(line, -1) {
			doc.anchors[m[1]] = true
		}
		if m := refDefRE.FindStringSubmatch(line); m != nil {
			doc.links = append(doc.links, mdLink{n, strings.Trim(m[1], "<>")})
			continue
		}
		plain := stripCodeSpans(line)
		for _, target := range inlineTargets(plain) {
			doc.links = append(doc.links, mdLink{n, target})
		}
		for _, m := range htmlLinkRE.FindAllStringSubmatch(plain, -1) {
			doc.links = append(doc.links, mdLink{n, m[1]})
		}
	}
	return doc
}

// fenceMarker returns the backtick or tilde run opening a fenced code
// block, or "".
func fenceMarker(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(trimmed, c+c+c) {
			return strings.Repeat(c, len(trimmed)-len(strings.TrimLeft(trimmed, c)))
		}
	}
	return ""
}

// stripCodeSpans blanks the code spans of a line, backtick runs included.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		j := i
		for j < len(line) && line[j] == '`' {
			j++
		}
		run := line[i:j]
		end := closingRun(line, j, len(run))
		if end < 0 { // no closing run: literal backticks
			b.WriteString(run)
			i = j
			continue
		}
		b.WriteString(strings.Repeat(" ", end+len(run)-i))
		i = end + len(run)
	}
	return b.String()
}

// closingRun finds, from i, a backtick run of exactly n, or returns -1.
func closingRun(line string, i, n int) int {
	for i < len(line) {
		if line[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(line) && line[j] == '`' {
			j++
		}
		if j-i == n {
			return i
		}
		i = j
	}
	return -1
}

// inlineTargets returns the destinations of the inline links and images of
// a line: what follows "](", up to the title or the closing parenthesis,
// with balanced parentheses inside.
func inlineTargets(line string) []string {
	var out []string
	for rest := line; ; {
		i := strings.Index(rest, "](")
		if i < 0 {
			return out
		}
		rest = strings.TrimLeft(rest[i+2:], " \t")
		if strings.HasPrefix(rest, "<") {
			if end := strings.IndexByte(rest, '>'); end > 0 {
				out = append(out, rest[1:end])
				rest = rest[end+1:]
			}
			continue
		}
		depth, end := 0, len(rest)
	scan:
		for k, r := range rest {
			switch {
			case r == '(':
				depth++
			case r == ')' && depth == 0, r == ' ', r == '\t':
				end = k
				break scan
			case r == ')':
				depth--
			}
		}
		out = append(out, rest[:end])
		rest = rest[end:]
	}
}

var (
	mdLinkRE   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	emphasisRE = regexp.MustCompile(`(^|\W)[*_]+|[*_]+(\W|$)`)
)

// headingText is the text GitHub renders for an ATX heading's content:
// code spans keep their content verbatim, links keep their text, emphasis
// markers go (intraword underscores stay: they are not emphasis).
func headingText(h string) string {
	h = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(h), "#"))
	var b strings.Builder
	parts := strings.Split(h, "`")
	for i, part := range parts {
		if i%2 == 1 && i < len(parts)-1 { // inside a code span
			b.WriteString(part)
			continue
		}
		part = mdLinkRE.ReplaceAllString(part, "$1")
		for {
			next := emphasisRE.ReplaceAllString(part, "$1$2")
			if next == part {
				break
			}
			part = next
		}
		b.WriteString(part)
	}
	return b.String()
}

// slug is GitHub's anchor for a heading's text: lower case, each space a
// '-', every other character but letters, digits, marks, '-' and '_'
// dropped.
func slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
