// Package fuzzseed is test support (imported only by _test.go files): it gives fuzz targets their seed inputs from the
// repository's testdata/fuzz/<Target>/ directory, where every seed is a
// plain file (a request body, a YAML file, an upstream JSON answer) that
// can be read and reviewed as it is.
//
// Go itself reads only <package>/testdata/fuzz/<Target>/, in its own
// encoding: the fuzzer writes the inputs that made a target fail there,
// and `go test` replays them. Those regression inputs stay in the package;
// the seeds people write live at the root, indexed by
// testdata/fuzz/README.md.
package fuzzseed

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// Add adds every file of testdata/fuzz/<f.Name()>/ at the repository root
// to f's corpus, then each of files (paths from the root, e.g. upstream
// fixtures). A missing directory or file fails the target: a seed corpus
// that silently vanished would make every fuzz run start from nothing.
func Add(f *testing.F, files ...string) {
	f.Helper()
	for _, input := range Read(f, files...) {
		f.Add(input)
	}
}

// Read returns what Add would add, for targets that derive their seeds
// from larger documents.
func Read(f *testing.F, files ...string) [][]byte {
	f.Helper()
	root := Root(f)
	dir := filepath.Join(root, "testdata", "fuzz", f.Name())
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.Fatalf("seed corpus: %v", err)
	}
	var paths []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != "README.md" {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(paths)
	if len(paths) == 0 {
		f.Fatalf("seed corpus %s is empty", dir)
	}
	for _, p := range files {
		paths = append(paths, filepath.Join(root, filepath.FromSlash(p)))
	}
	out := make([][]byte, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatalf("seed: %v", err)
		}
		out = append(out, b)
	}
	return out
}

// Root is the directory of the module's go.mod, found upwards from the
// package directory a test runs in.
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
