package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// validateFlags declares validate's flags on fs.
func validateFlags(fs *flag.FlagSet) (noCreds *bool) {
	return fs.Bool("no-credentials", false,
		"read no credential (token file or variable) and build only the sources of kind file; the server section may be left out")
}

// cmdValidate checks a configuration as serve would before starting, and
// reports every problem at once: the file (each problem with its path),
// then every credential reference resolved (a file that exists and is not
// empty, a variable that is set: the plugin tokens, each source's own, the
// bearer tokens of the clusters a file source lists) and every source
// built (a static file missing or invalid, a CA file). Nothing is listed
// and nothing listens. With --no-credentials (the chart's install hook,
// which runs before the credentials are mounted), no credential is read,
// only the sources of kind file are built (their clusters file is part of
// the configuration) and the server section may be left out.
func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	noCreds := validateFlags(fs)
	cfg, code, done := loadConfig(fs, args, stderr, loading{offline: func() bool { return *noCreds }})
	if done {
		return code
	}
	errs := checkConfig(cfg, !*noCreds)
	if len(errs) == 0 && !*noCreds {
		// what serve builds besides the sources (the inventory, the
		// token set) must build too
		if _, err := build(cfg, slog.New(slog.DiscardHandler), nil); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(stderr, "invalid configuration:\n%v\n", errors.Join(errs...))
		return 2
	}
	fmt.Fprintf(stdout, "configuration is valid: %d source(s)\n", len(cfg.Sources))
	return 0
}

// checkConfig builds the sources (every one with credentials, only those
// of kind file without) and, with credentials, resolves every local
// credential reference. It returns every problem, in the file's order.
func checkConfig(cfg *config.Config, withCreds bool) []error {
	var errs []error
	if withCreds {
		for i, ref := range cfg.Server.Tokens {
			if err := generator.CheckToken(ref); err != nil {
				errs = append(errs, field.Invalid(field.NewPath("server", "tokens").Index(i), field.OmitValueType{}, err.Error()))
			}
		}
	}
	for i := range cfg.Sources {
		errs = append(errs, checkSource(cfg, i, withCreds)...)
	}
	return errs
}

// checkSource is checkConfig for sources[i].
func checkSource(cfg *config.Config, i int, withCreds bool) []error {
	sc := &cfg.Sources[i]
	r, ok := cfg.Registry().Lookup(sc.Provider)
	if !ok || sc.Section == nil {
		return []error{fmt.Errorf("sources[%d] (%s): provider %q is not available", i, sc.Name, sc.Provider)}
	}
	if !withCreds && r.Kind() != sources.KindFile {
		return nil
	}
	var errs []error
	if cr, ok := sc.Section.(sources.CredentialRefs); ok && withCreds {
		for _, e := range sources.CheckLocalRefs(cr.CredentialRefs(field.NewPath("sources").Index(i).Child(string(sc.Provider)))) {
			errs = append(errs, e)
		}
	}
	src, err := sc.Section.NewSource(sources.SourceOptions{Name: sc.Name, Logger: slog.New(slog.DiscardHandler), OwnerID: cfg.Secrets.OwnerID,
		TokenBindings: tokenBindings(cfg), Agents: agentSecrets(cfg)})
	if err != nil {
		return append(errs, fmt.Errorf("sources[%d] (%s): %w", i, sc.Name, err))
	}
	if r.Kind() != sources.KindFile || !withCreds {
		return errs
	}
	// a file source's clusters are the configuration's too: their bearer
	// token references are resolved like the file's own
	cs, err := src.Clusters(context.Background())
	if err != nil {
		return append(errs, fmt.Errorf("sources[%d] (%s): %w", i, sc.Name, err))
	}
	for _, c := range cs {
		if ref := c.Auth.TokenRef; ref != nil && (ref.File != "" || ref.Env != "") {
			if _, err := ref.ReadLocal(); err != nil {
				errs = append(errs, fmt.Errorf("sources[%d] (%s): cluster %s: bearer token %w", i, sc.Name, c.Name, err))
			}
		}
	}
	return errs
}

// logFlags are --log-level and --log-format: they override log.level and
// log.format of the file, for the commands that log.
type logFlags struct{ level, format string }

// declareLogFlags declares --log-level and --log-format on fs.
func declareLogFlags(fs *flag.FlagSet) *logFlags {
	l := &logFlags{}
	fs.Func("log-level", "override log.level: `LEVEL` debug, info, warn or error", oneOf(&l.level, "debug", "info", "warn", "error"))
	fs.Func("log-format", "override log.format: `FORMAT` json or text", oneOf(&l.format, "json", "text"))
	return l
}

// oneOf sets *to to a flag's value when it is one of allowed.
func oneOf(to *string, allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				*to = v
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %v", v, allowed)
	}
}

// apply writes the flags that were given over the file's log section.
func (l *logFlags) apply(c *config.Log) {
	if l == nil {
		return
	}
	if l.level != "" {
		c.Level = l.level
	}
	if l.format != "" {
		c.Format = l.format
	}
}
