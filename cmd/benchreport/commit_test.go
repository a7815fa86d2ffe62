package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommitOf: the report names the commit measured, "-dirty" only when
// a tracked file other than the report changed (the run rewrites the
// report itself), untracked files aside.
func TestCommitOf(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	write := func(name, text string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	git("init", "-q")
	write("cmd/benchreport/last-run.md", "old report\n")
	write("main.go", "package main\n")
	git("add", ".")
	git("commit", "-q", "-m", "first")
	const report = "cmd/benchreport/last-run.md"
	clean := regexp.MustCompile(`^[0-9a-f]{12}$`)

	assert.Regexp(t, clean, commitOf(dir, report))
	write(report, "this run's report\n")
	assert.Regexp(t, clean, commitOf(dir, report), "the report this run writes is no change")
	assert.Regexp(t, `^[0-9a-f]{12}-dirty$`, commitOf(dir, ""), "without a report every tracked change counts")
	write("new.go", "package main\n")
	assert.Regexp(t, clean, commitOf(dir, report), "an untracked file is no change")
	write("main.go", "package main // changed\n")
	assert.Regexp(t, `^[0-9a-f]{12}-dirty$`, commitOf(dir, report))
	assert.Equal(t, "unknown", commitOf(t.TempDir(), report), "not a checkout")
}
