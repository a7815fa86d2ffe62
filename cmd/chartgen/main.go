// Command chartgen writes the parts of the chart's values schema and of the
// lint configuration that follow from the provider registry (see package
// internal/chartgen). With -check it writes nothing and exits 1 when a file
// differs from what it would write.
//
//	go run ./cmd/chartgen [-root DIR] [-check]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/chartgen"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// files are the generated files, relative to the repository's root, each
// with what makes it from its current content and the registry.
var files = []struct {
	name string
	make func([]byte, *sources.Registry) ([]byte, error)
}{
	{"deploy/helm/argocd-cluster-discovery/values.schema.json", chartgen.Schema},
	{".golangci.yml", chartgen.Depguard},
}

func main() {
	root := flag.String("root", ".", "the repository's root `DIR`")
	check := flag.Bool("check", false, "write nothing; exit 1 when a file is not what the registry makes")
	flag.Parse()
	stale := 0
	for _, f := range files {
		name, path := f.name, filepath.Join(*root, f.name)
		have, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "chartgen: %v\n", err)
			os.Exit(1)
		}
		want, err := f.make(have, config.Providers())
		if err != nil {
			fmt.Fprintf(os.Stderr, "chartgen: %s: %v\n", name, err)
			os.Exit(1)
		}
		switch {
		case bytes.Equal(have, want):
		case *check:
			fmt.Fprintf(os.Stderr, "chartgen: %s is not what the provider registry makes: run go generate ./cmd/argocd-cluster-discovery/config\n", name)
			stale++
		default:
			if err := os.WriteFile(path, want, 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "chartgen: %v\n", err)
				os.Exit(1)
			}
			fmt.Printf("chartgen: wrote %s\n", name)
		}
	}
	if stale > 0 {
		os.Exit(1)
	}
}
