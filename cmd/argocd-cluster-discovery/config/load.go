package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/yamldocs"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Load reads path and returns the configuration, defaulted, with relative
// paths resolved and validated; the error lists every problem of the file
// at once, each with its full path.
func Load(path string) (*Config, error) { return LoadFor(path, Serve) }

// Purpose is what a command needs of the file.
type Purpose int

const (
	// Serve is everything serve needs, the server section's listen address
	// and plugin tokens included.
	Serve Purpose = iota
	// Offline is a command that listens on nothing and answers nobody
	// (discover, validate --no-credentials, revoke-tokens): the server
	// section may be left out; what it holds is still checked.
	Offline
)

// LoadFor is Load for a command's purpose.
func LoadFor(path string, p Purpose) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := parse(raw, filepath.Dir(path), Providers(), p)
	if err != nil {
		return nil, fmt.Errorf("config %s:\n%w", path, err)
	}
	return cfg, nil
}

// Parse is Load for bytes already read, with the providers of this
// binary; dir resolves relative paths.
func Parse(raw []byte, dir string) (*Config, error) { return ParseWith(raw, dir, Providers()) }

// ParseWith is Parse with the given providers. The steps are the same for
// every part of the file: decode (unknown keys are errors), defaults,
// relative paths, then validation, which changes nothing.
func ParseWith(raw []byte, dir string, reg *sources.Registry) (*Config, error) {
	return parse(raw, dir, reg, Serve)
}

func parse(raw []byte, dir string, reg *sources.Registry, p Purpose) (*Config, error) {
	cfg := Default()
	cfg.Dir, cfg.registry, cfg.offline = dir, reg, p == Offline
	// not YAMLToJSONStrict: it stops at the first key written twice, with
	// its line; duplicateKeys reports each, with its path
	if n := yamldocs.Count(raw); n > 1 { // YAMLToJSON would drop all but the first
		return nil, fmt.Errorf("parse: %d YAML documents (separated by ---): the configuration is one", n)
	}
	doc, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if string(doc) == "null" {
		doc = []byte("{}")
	}
	if doc[0] != '{' {
		return nil, errors.New("parse: the configuration must be a mapping of keys (log:, server:, sources:, ...)")
	}
	errs := duplicateKeys(raw)
	errs = append(errs, rewrittenKeys(raw)...)
	errs = append(errs, decodeInto(nil, doc, &cfg, true)...)
	errs = append(errs, cfg.decodeSources(reg)...)
	for i := range cfg.Sources {
		s := &cfg.Sources[i]
		if s.Section == nil {
			continue
		}
		s.Section.Default()
		s.keepWrittenZeros()
		s.Section.SetDirectory(dir)
		if d, ok := s.Section.(sources.Deprecations); ok {
			cfg.Warnings = append(cfg.Warnings, d.Deprecations(sourcePath(i, s.Provider))...)
		}
	}
	cfg.resolvePaths()
	errs = append(errs, cfg.Validate()...)
	if len(errs) > 0 {
		return nil, errorList(errs)
	}
	cfg.Warnings = append(cfg.Warnings, cfg.hybridWarnings()...)
	return &cfg, nil
}

// resolvePaths makes the relative file paths of the file's own sections
// relative to its directory (the providers' sections do it themselves).
func (c *Config) resolvePaths() {
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(c.Dir, *p)
		}
	}
	for i := range c.Server.Tokens {
		abs(&c.Server.Tokens[i].File)
	}
	abs(&c.Secrets.Kubeconfig)
}

func sourcePath(i int, p sources.Provider) *field.Path {
	return field.NewPath("sources").Index(i).Child(string(p))
}

// errorList is every problem of the file, one per line, sorted by path.
type errorList field.ErrorList

func (l errorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i] < lines[j] })
	return strings.Join(lines, "\n")
}

// Errors returns the field errors behind err, for tests and tools.
func Errors(err error) field.ErrorList {
	var l errorList
	if errors.As(err, &l) {
		return field.ErrorList(l)
	}
	return nil
}

// unknownKey is the error of a key no type has.
func unknownKey(at *field.Path) *field.Error {
	return field.Forbidden(at, "unknown key")
}
