package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// revokeFlags declares revoke-tokens' flags on fs.
func revokeFlags(fs *flag.FlagSet) (ignore *bool, logs *logFlags) {
	return fs.Bool("ignore-errors", false, "report the tokens that could not be revoked and exit 0"), declareLogFlags(fs)
}

// cmdRevokeTokens revokes every token the sources minted for this
// installation (the chart's pre-delete hook): held by a Secret or not.
// It runs as the service's ServiceAccount, whose uid names the
// installation in the tokens (installationID). Exit 1 if any source could
// not revoke all of its tokens, unless --ignore-errors (the hook: an
// unreachable Rancher must not block an uninstall; what is left expires
// at its TTL).
func cmdRevokeTokens(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("revoke-tokens", flag.ContinueOnError)
	ignore, logs := revokeFlags(fs)
	cfg, code, done := loadConfig(fs, args, stderr, loading{offline: func() bool { return true }, logs: logs})
	if done {
		return code
	}
	logger := newLogger(cfg.Log, stderr)
	issuers := map[string]sources.TokenIssuer{}
	if _, err := buildSpecs(cfg, logger, nil, issuers); err != nil {
		fmt.Fprintf(stderr, "invalid configuration:\n%v\n", err)
		return 2
	}
	failed := 1
	if *ignore {
		failed = 0
	}
	rc, err := kubeConfig(cfg.Secrets)
	if err != nil {
		fmt.Fprintf(stderr, "revoke-tokens: %v\n", err)
		return failed
	}
	client, err := kubeclient.NewForConfig(rc)
	if err != nil {
		fmt.Fprintf(stderr, "revoke-tokens: kubernetes client: %v\n", err)
		return failed
	}
	install, err := installationID(client, cfg.Secrets.Namespace, logger)
	if err != nil {
		fmt.Fprintf(stderr, "revoke-tokens: %v\n", err)
		return failed
	}
	code = 0
	for _, name := range slices.Sorted(maps.Keys(issuers)) {
		k, ok := issuers[name].(sources.TokenKeeper)
		if !ok {
			continue
		}
		n, err := k.RevokeTokens(ctx, install)
		if err != nil {
			fmt.Fprintf(stderr, "source %s: revoked %d tokens, then: %v\n", name, n, err)
			code = failed
			continue
		}
		fmt.Fprintf(stdout, "source %s: revoked %d tokens\n", name, n)
	}
	return code
}
