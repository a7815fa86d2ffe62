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

// moduleRoot is the nearest directory above the test's with a go.mod, its
// links resolved: a checkout reached through a link (CI's fixed path) is
// walked as the directory it is.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	dir, err = filepath.EvalSymlinks(dir)
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
