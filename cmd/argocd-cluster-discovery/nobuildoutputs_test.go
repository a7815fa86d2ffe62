package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoBuildOutputs: .ci/no-build-outputs (the first step of make lint)
// names every tracked build output, each once, and fails; it passes a tree
// of sources, and ignores what git does not track.
func TestNoBuildOutputs(t *testing.T) {
	script, err := os.ReadFile("../../.ci/no-build-outputs")
	require.NoError(t, err)
	git, err := exec.LookPath("git")
	require.NoError(t, err, "the check reads git's index")

	run := func(t *testing.T, files map[string][]byte, untracked map[string][]byte) (string, error) {
		t.Helper()
		dir := t.TempDir()
		files[".ci/no-build-outputs"] = script
		for name, data := range files {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
		}
		for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}} {
			cmd := exec.Command(git, args...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, string(out))
		}
		for name, data := range untracked {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
		}
		cmd := exec.Command("bash", ".ci/no-build-outputs")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	t.Run("sources pass", func(t *testing.T) {
		out, err := run(t, map[string][]byte{
			"main.go":            []byte("package main\n"),
			"docs/with space.md": []byte("# a file whose name has a space\n"),
			"testdata/zeros":     make([]byte, 1<<20), // exactly 1 MB is allowed
		}, map[string][]byte{"built": append([]byte("\x7fELF"), make([]byte, 2<<20)...)})
		require.NoError(t, err, out)
		assert.Contains(t, out, "no tracked binary or file over 1 MB")
	})

	t.Run("every build output is named", func(t *testing.T) {
		out, err := run(t, map[string][]byte{
			"main.go":          []byte("package main\n"),
			"bin/tool":         append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 64)...),
			"tool.exe":         append([]byte("MZ\x90\x00"), make([]byte, 64)...),
			"darwin/tool":      append([]byte("\xcf\xfa\xed\xfe"), make([]byte, 64)...),
			"fat/tool":         append([]byte("\xca\xfe\xba\xbe"), make([]byte, 64)...),
			"data/big.json":    make([]byte, 1<<20+1),
			"docs/a binary.md": append([]byte("\x7fELF"), make([]byte, 8)...),
		}, nil)
		require.Error(t, err, out)
		for _, want := range []string{
			"tracked ELF binary: bin/tool\n", "tracked PE binary: tool.exe\n", "tracked Mach-O binary: darwin/tool\n",
			"tracked Mach-O binary: fat/tool\n", "tracked file over 1 MB: data/big.json (1048577 bytes)\n",
			"tracked ELF binary: docs/a binary.md\n",
		} {
			assert.Equal(t, 1, strings.Count(out, want), "%q in:\n%s", want, out)
		}
		assert.NotContains(t, out, "main.go")
		assert.Contains(t, out, "remove these from git")
	})
}
