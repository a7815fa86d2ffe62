package main

import (
	"flag"
	"fmt"
	"strings"
)

// commands are the subcommands with a configuration, in the order the
// usage lists them, each with the function that declares its own flags.
var commands = []struct {
	name, summary string
	flags         func(*flag.FlagSet)
}{
	{"serve", "list the sources, answer Argo CD's plugin API, write cluster Secrets", func(fs *flag.FlagSet) { serveFlags(fs) }},
	{"discover", "list every source once and print what the API would answer", func(fs *flag.FlagSet) { discoverFlags(fs) }},
	{"validate", "check a configuration as serve would, without listing", func(fs *flag.FlagSet) { validateFlags(fs) }},
	{"revoke-tokens", "revoke every per-cluster token this installation minted (uninstall)", func(fs *flag.FlagSet) { revokeFlags(fs) }},
}

// configFlag declares --config, which every command with a configuration
// takes.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "path of the YAML configuration `FILE` (required)")
}

// usageText is the program's usage, made from the commands' flag sets.
func usageText() string {
	var b strings.Builder
	b.WriteString("usage:\n")
	for _, c := range commands {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		configFlag(fs)
		c.flags(fs)
		fmt.Fprintf(&b, "  %s\n      %s\n", synopsis(fs), c.summary)
	}
	b.WriteString("  argocd-cluster-discovery version\n\n")
	b.WriteString("Run a command with -h for its flags.\n")
	b.WriteString("Exit codes: 0 success, 1 failure while running, 2 bad usage or configuration.\n")
	return b.String()
}

// synopsis is one command line with every flag of fs: --config FILE first,
// the others in brackets.
func synopsis(fs *flag.FlagSet) string {
	parts := []string{"argocd-cluster-discovery " + fs.Name(), "--config FILE"}
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "config" {
			return
		}
		name, _ := flag.UnquoteUsage(f)
		if name == "" {
			parts = append(parts, "["+dashes(f.Name)+"]")
		} else {
			parts = append(parts, "["+dashes(f.Name)+" "+strings.ToUpper(name)+"]")
		}
	})
	return strings.Join(parts, " ")
}

// commandUsage is one command's synopsis and its flags.
func commandUsage(fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n", synopsis(fs))
	fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		if name != "" {
			name = " " + strings.ToUpper(name)
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(&b, "  %s%s\n      %s%s\n", dashes(f.Name), name, text, def)
	})
	return b.String()
}

// dashes is a flag's name as written on a command line: -o, --output.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}
