package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// discoverOptions are discover's flags.
type discoverOptions struct {
	input          *string
	secrets, check *bool
	checkTimeout   *time.Duration
	output         *string
	logs           *logFlags
}

// discoverFlags declares discover's flags on fs.
func discoverFlags(fs *flag.FlagSet) discoverOptions {
	return discoverOptions{
		input:        fs.String("input", "{}", "the plugin `JSON` input as Argo CD sends it, e.g. '{\"parameters\":{\"tenant\":\"acme\"}}'"),
		secrets:      fs.Bool("secrets", false, "print the cluster Secrets that would be written (credentials redacted) instead of parameters"),
		check:        fs.Bool("check", false, "connect to each cluster with the credentials its Secret would get and call /version; one line per cluster"),
		checkTimeout: fs.Duration("check-timeout", 10*time.Second, "how long --check waits for each cluster"),
		output:       outputFlag(fs),
		logs:         declareLogFlags(fs),
	}
}

// cmdDiscover lists every source once and prints the parameters exactly as
// the plugin API would answer the given input.
func cmdDiscover(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("discover", flag.ContinueOnError)
	f := discoverFlags(fs)
	input, secrets, check, checkTimeout := f.input, f.secrets, f.check, f.checkTimeout
	cfg, code, done := loadConfig(fs, args, stderr, loading{offline: func() bool { return true }, logs: f.logs})
	if done {
		return code
	}
	logger := newLogger(cfg.Log, stderr)
	if *check {
		// tokens minted for the check carry an owner of their own: the
		// check must never revoke the running service's tokens (a source
		// revokes its owner's leftovers before its first token)
		cfg.Secrets.OwnerID = checkOwner(cfg.Secrets.OwnerID)
	}
	issuers := map[string]sources.TokenIssuer{}
	inv, err := buildInventory(cfg, logger, nil, issuers)
	if err != nil {
		fmt.Fprintf(stderr, "invalid configuration:\n%v\n", err)
		return 2
	}
	// The same strict decoder as the plugin API: what the API rejects with
	// 400, discover rejects too.
	filter, err := generator.ParseInput([]byte(*input), cfg.Registry().Names())
	if err != nil {
		if json.Valid([]byte(*input)) {
			fmt.Fprintf(stderr, "error: --input: %v\n", err)
		} else {
			fmt.Fprintf(stderr, "error: --input must be a JSON object such as {\"parameters\":{...}}: %v\n", err)
		}
		return 2
	}
	var longest time.Duration
	for i := range cfg.Sources {
		longest = max(longest, cfg.EffectiveTimeout(&cfg.Sources[i]))
	}
	listCtx, cancel := context.WithTimeout(ctx, longest+5*time.Second)
	defer cancel()
	listErr := inv.RefreshAll(listCtx)
	res, err := generator.Render(inv.Snapshot(), &filter)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		if listErr != nil {
			fmt.Fprintf(stderr, "listing errors:\n%v\n", listErr)
		}
		var ie *generator.InputError
		if errors.As(err, &ie) {
			return 2
		}
		return 1
	}
	if *check {
		n, err := printChecks(stdout, checkClusters(ctx, stderr, cfg, inv.Snapshot(), issuers, *checkTimeout), *f.output)
		if err != nil {
			fmt.Fprintf(stderr, "error: write the check: %v\n", err)
			return 1
		}
		if n > 0 {
			fmt.Fprintf(stderr, "%d cluster(s) could not be reached with the credentials of their Secret\n", n)
			return 1
		}
		return 0
	}
	if *secrets {
		if err := printSecrets(stdout, cfg, inv.Snapshot()); err != nil {
			fmt.Fprintf(stderr, "error: %v\n", err)
			return 1
		}
		return 0
	}
	if _, err := res.WriteTo(stdout); err != nil {
		fmt.Fprintf(stderr, "error: write the answer: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout)
	return 0
}

// outputFlag declares --output and its short form -o: how --check prints
// its results, text (a line per cluster) or json.
func outputFlag(fs *flag.FlagSet) *string {
	v := "text"
	set := oneOf(&v, "text", "json")
	fs.Func("output", "with --check: `FORMAT` text (a line per cluster: name, server, phase, result) or json", set)
	fs.Func("o", "short for --output `FORMAT`", set)
	return &v
}
