package aro

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
)

// trust is what a listing knows of the clusters' API certificates: the
// managed-domain suffixes (a publicly trusted certificate: no caData) and
// the CAs configured for custom domains, read once per listing.
//
// ARO's managed domains get their API certificate from a public CA
// (ARO-RP pkg/cluster/tls.go: issuer OneCertV2-PublicCA, installed as the
// named serving certificate of api.<domain>), so Argo CD's system roots
// trust it. A custom domain keeps OpenShift's own certificate unless the
// customer installs another; ARM exposes no CA for it, so it must come
// from the configuration.
type trust struct {
	managed []string // lower case, without leading dot
	custom  []caRule // longest key first
	def     *caRule
}

// caRule is a configured CA: its domain key (empty for defaultCA), the
// path of its setting for reasons, and the CA or why it could not be read.
type caRule struct {
	key, path string
	ca        sources.CA
	err       string
}

// loadTrust reads the configured CAs: caData parsed, caFile read. A CA
// that cannot be read is kept with its error, which lists the clusters
// that need it not ready (err says which, for NewSource).
func loadTrust(cfg *Config) *trust {
	t := &trust{}
	for _, d := range cfg.ManagedDomains {
		t.managed = append(t.managed, domainKey(d))
	}
	for k, r := range cfg.CustomDomainCA {
		t.custom = append(t.custom, readCA(domainKey(k), fmt.Sprintf("customDomainCA[%s]", k), r))
	}
	slices.SortFunc(t.custom, func(a, b caRule) int {
		return cmp.Or(cmp.Compare(len(b.key), len(a.key)), strings.Compare(a.key, b.key))
	})
	if !cfg.DefaultCA.IsZero() {
		r := readCA("", "defaultCA", cfg.DefaultCA)
		t.def = &r
	}
	return t
}

// readCA reads one configured CA.
func readCA(key, path string, r CARef) caRule {
	rule := caRule{key: key, path: path}
	var err error
	switch {
	case r.CAData != "":
		rule.ca, err = sources.ParseCAData(r.CAData)
		if err != nil {
			err = fmt.Errorf("caData: %w", err)
		}
	default:
		var b []byte
		if b, err = os.ReadFile(r.CAFile); err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is in the message already
			}
			err = fmt.Errorf("caFile %s: %w", r.CAFile, err)
			break
		}
		if rule.ca, err = sources.ParsePEMCA(b); err != nil {
			err = fmt.Errorf("caFile %s: %w", r.CAFile, err)
		}
	}
	if err != nil {
		rule.err = path + "." + err.Error()
	}
	return rule
}

// err returns the first CA that could not be read, for NewSource.
func (t *trust) err() error {
	for _, r := range append(slices.Clone(t.custom), azurearm.Deref(t.def)) {
		if r.err != "" {
			return errors.New(r.err)
		}
	}
	return nil
}

// forHost returns the CA of an API server host (lower case): the CA of the
// longest customDomainCA key it is or ends in, else none for a managed
// domain, else defaultCA; or why there is none.
func (t *trust) forHost(host string) (sources.CA, string) {
	in := func(domain string) bool { return host == domain || strings.HasSuffix(host, "."+domain) }
	for _, r := range t.custom {
		if in(r.key) {
			return r.use()
		}
	}
	if slices.ContainsFunc(t.managed, in) {
		return sources.CA{}, ""
	}
	if t.def != nil {
		return t.def.use()
	}
	return sources.CA{}, fmt.Sprintf("custom domain: %s is not under a managed domain (managedDomains: %s), and no CA is configured for it (customDomainCA or defaultCA)",
		host, strings.Join(t.managedSuffixes(), ", "))
}

func (t *trust) managedSuffixes() []string {
	out := make([]string, len(t.managed))
	for i, d := range t.managed {
		out[i] = "." + d
	}
	return out
}

// use returns the rule's CA, or why it cannot be read.
func (r *caRule) use() (sources.CA, string) {
	if r.err != "" {
		return sources.CA{}, "CA unavailable: " + r.err
	}
	return r.ca, ""
}
