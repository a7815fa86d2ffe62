package main

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// errNotChecked marks a credential discover --check does not use itself.
var errNotChecked = errors.New("not checked")

// secretConfig is what --check reads of the config key of a cluster
// Secret (ClusterConfig in argo-cd pkg/apis/application/v1alpha1).
type secretConfig struct {
	BearerToken     string `json:"bearerToken"`
	TLSClientConfig struct {
		Insecure   bool   `json:"insecure"`
		ServerName string `json:"serverName"`
		CAData     []byte `json:"caData"`
	} `json:"tlsClientConfig"`
	AWSAuthConfig      json.RawMessage `json:"awsAuthConfig"`
	ExecProviderConfig json.RawMessage `json:"execProviderConfig"`
	ProxyURL           string          `json:"proxyUrl"`
}

// checkOwner is the owner id of the tokens discover --check mints.
func checkOwner(ownerID string) string {
	if ownerID == "" {
		ownerID = "unset"
	}
	return ownerID + "-check"
}

// checkClusters connects to every cluster that would get a Secret, with
// exactly the credentials its Secret would carry, calls /version and
// prints one line per cluster. It returns the number of clusters that
// could not be reached. Tokens minted for the check are released after it.
func checkClusters(ctx context.Context, w io.Writer, cfg *config.Config, snap *inventory.Snapshot,
	issuers map[string]sources.TokenIssuer, timeout time.Duration) int {
	rc := cfg.Secrets.Reconciler()
	if rc.OwnerID == "" {
		rc.OwnerID = "owner-id-not-set"
	}
	for name, iss := range issuers {
		// a term of its own: the check's tokens carry its own owner id,
		// and it writes no Secret, so it adopts none
		if k, ok := iss.(sources.TokenKeeper); ok {
			if err := k.AdoptTokens(ctx, "check", nil); err != nil {
				fmt.Fprintf(w, "source %s: %v\n", name, err)
			}
		}
	}
	issued := map[sources.IssuedToken]bool{}
	defer func() {
		for t := range issued {
			_ = issuers[t.Source].ReleaseToken(context.Background(), t.Cluster)
		}
	}()
	resolve := func(ref sources.SecretRef) (string, error) {
		switch {
		case ref.File != "":
			b, err := os.ReadFile(ref.File)
			return strings.TrimSpace(string(b)), err
		case ref.Env != "":
			return os.Getenv(ref.Env), nil
		case ref.Issued != nil && issuers[ref.Issued.Source] != nil:
			issued[*ref.Issued] = true
			return issuers[ref.Issued.Source].IssueToken(ctx, ref.Issued.Cluster)
		}
		return "", fmt.Errorf("%w (a token in a Kubernetes Secret)", errNotChecked)
	}
	failed := 0
	for _, c := range snap.Clusters {
		if rc.Select != nil && !rc.Select(c) {
			continue
		}
		result, ok := checkOne(ctx, c, &rc.Options, resolve, timeout)
		if !ok {
			failed++
		}
		fmt.Fprintf(w, "%-40s %s\n", c.Name, result)
	}
	return failed
}

// checkOne returns the line of one cluster and whether it is not a failure.
func checkOne(ctx context.Context, c *sources.Cluster, o *clustersecret.Options, resolve clustersecret.TokenResolver, timeout time.Duration) (string, bool) {
	d, err := clustersecret.Build(c, o, resolve)
	if errors.Is(err, errNotChecked) {
		return "not checked (a token in a Kubernetes Secret)", true
	}
	if err != nil {
		return "error: " + redact(err.Error(), ""), false
	}
	var sc secretConfig
	if err := json.Unmarshal(d.Secret.Data["config"], &sc); err != nil {
		return "error: config: " + err.Error(), false
	}
	if len(sc.ExecProviderConfig) > 0 || len(sc.AWSAuthConfig) > 0 {
		return "not checked (exec credentials)", true
	}
	rcfg := &rest.Config{Host: string(d.Secret.Data["server"]), BearerToken: sc.BearerToken, Timeout: timeout,
		TLSClientConfig: rest.TLSClientConfig{Insecure: sc.TLSClientConfig.Insecure, ServerName: sc.TLSClientConfig.ServerName, CAData: sc.TLSClientConfig.CAData}}
	if sc.ProxyURL != "" {
		u, err := url.Parse(sc.ProxyURL)
		if err != nil {
			return "error: proxyUrl: " + err.Error(), false
		}
		rcfg.Proxy = http.ProxyURL(u)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rcfg)
	if err != nil {
		return "error: " + redact(err.Error(), sc.BearerToken), false
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := dc.RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return classifyCheck(err, sc.BearerToken), false
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	_ = json.Unmarshal(body, &v)
	return "ok " + v.GitVersion, true
}

// classifyCheck says why /version failed the way Argo CD's operators read
// it: x509 (with the issuer seen), 401, 403, timeout, or the error.
func classifyCheck(err error, token string) string {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var netErr net.Error
	switch {
	case errors.As(err, &unknown):
		issuer := ""
		if unknown.Cert != nil {
			issuer = unknown.Cert.Issuer.String()
		}
		return fmt.Sprintf("x509: certificate signed by unknown authority (issuer %q)", issuer)
	case errors.As(err, &hostname):
		return "x509: " + hostname.Error()
	case apierrors.IsUnauthorized(err):
		return "401 unauthorized"
	case apierrors.IsForbidden(err):
		return "403 forbidden"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	return "error: " + redact(err.Error(), token)
}

// redact removes token (and its base64) from s.
func redact(s, token string) string {
	if token == "" {
		return s
	}
	s = strings.ReplaceAll(s, token, "<redacted>")
	return strings.ReplaceAll(s, base64.StdEncoding.EncodeToString([]byte(token)), "<redacted>")
}
