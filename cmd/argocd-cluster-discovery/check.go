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

// The results of discover --check.
const (
	// checkOK: /version answered with the Secret's credentials.
	checkOK = "ok"
	// checkFailed: the cluster could not be reached, or refused the
	// Secret's credentials; Argo CD shows its connection as Failed.
	checkFailed = "failed"
	// checkReachable: exec credentials (EKS, AKS), which only Argo CD
	// runs: the API server was reached anonymously with the Secret's CA.
	checkReachable = "reachable"
	// checkNotChecked: a token in a Kubernetes Secret.
	checkNotChecked = "not-checked"
	// checkUnserved: listed but given no Secret (pending, a name
	// conflict, a duplicate, never rendered).
	checkUnserved = "unserved"
)

// checkResult is one cluster of discover --check.
type checkResult struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Server string `json:"server,omitempty"`
	Phase  string `json:"phase,omitempty"`
	Result string `json:"result"`
	// Status is the HTTP status the cluster's API server (or Rancher's
	// proxy) answered /version with; 0 when nothing answered.
	Status int    `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// failed reports whether the result counts against the exit code.
func (r checkResult) failed() bool { return r.Result == checkFailed }

// line is the result as discover --check prints it:
// <name> <server> <phase> <result> [detail].
func (r checkResult) line() string {
	server, phase := r.Server, r.Phase
	if server == "" {
		server = "-"
	}
	if phase == "" {
		phase = "-"
	}
	return strings.TrimRight(fmt.Sprintf("%-32s %-48s %-9s %-11s %s", r.Name, server, phase, r.Result, r.Detail), " ")
}

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
// exactly the credentials its Secret would carry, calls /version, and
// returns one result per cluster, the clusters that are listed but not
// served (with why) after them. Tokens minted for the check are released
// after it.
func checkClusters(ctx context.Context, w io.Writer, cfg *config.Config, snap *inventory.Snapshot,
	issuers map[string]sources.TokenIssuer, timeout time.Duration) []checkResult {
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
		case ref.File != "" || ref.Env != "":
			return ref.ReadLocal()
		case ref.Issued != nil && issuers[ref.Issued.Source] != nil:
			issued[*ref.Issued] = true
			return issuers[ref.Issued.Source].IssueToken(ctx, ref.Issued.Cluster)
		}
		return "", fmt.Errorf("%w (a token in a Kubernetes Secret)", errNotChecked)
	}
	var out []checkResult
	for _, c := range snap.Clusters {
		if rc.Select != nil && !rc.Select(c) {
			continue
		}
		r := checkOne(ctx, c, &rc.Options, resolve, timeout)
		r.Name, r.Source, r.Phase = c.Name, c.Source, string(c.Phase)
		out = append(out, r)
	}
	return append(out, unservedResults(snap)...)
}

// unservedResults are the clusters of snap that get no Secret, with why.
func unservedResults(snap *inventory.Snapshot) []checkResult {
	var out []checkResult
	for _, u := range snap.Unserved {
		detail := u.Reason
		if detail == "" && u.State != "" {
			detail = "upstream state " + u.State
		}
		out = append(out, checkResult{Name: u.Name, Source: u.Source, Phase: string(u.Phase), Result: checkUnserved, Detail: detail})
	}
	for _, c := range snap.Conflicts {
		detail := "name conflict between sources " + strings.Join(c.Sources, ", ")
		if c.KeptSource != "" {
			detail += "; the established cluster of " + c.KeptSource + " keeps the name"
		}
		out = append(out, checkResult{Name: c.Name, Source: strings.Join(c.Sources, ","), Result: checkUnserved, Detail: detail})
	}
	for _, d := range snap.Duplicates {
		out = append(out, checkResult{Name: d.Name, Source: d.Source, Result: checkUnserved,
			Detail: fmt.Sprintf("duplicate (same %s) of %s from source %s", d.Reason, d.KeptName, d.KeptSource)})
	}
	return out
}

// checkOne checks one served cluster.
func checkOne(ctx context.Context, c *sources.Cluster, o *clustersecret.Options, resolve clustersecret.TokenResolver, timeout time.Duration) checkResult {
	d, err := clustersecret.Build(c, o, resolve)
	if errors.Is(err, errNotChecked) {
		return checkResult{Server: c.Server, Result: checkNotChecked, Detail: "a token in a Kubernetes Secret"}
	}
	if err != nil {
		return checkResult{Server: c.Server, Result: checkFailed, Detail: redact(err.Error(), "")}
	}
	server := string(d.Secret.Data["server"])
	var sc secretConfig
	if err := json.Unmarshal(d.Secret.Data["config"], &sc); err != nil {
		return checkResult{Server: server, Result: checkFailed, Detail: "config: " + err.Error()}
	}
	exec := len(sc.ExecProviderConfig) > 0 || len(sc.AWSAuthConfig) > 0
	token := sc.BearerToken
	if exec {
		token = "" // only Argo CD runs the exec plugin: an anonymous call proves the CA and the address
	}
	rcfg := &rest.Config{Host: server, BearerToken: token, Timeout: timeout,
		TLSClientConfig: rest.TLSClientConfig{Insecure: sc.TLSClientConfig.Insecure, ServerName: sc.TLSClientConfig.ServerName, CAData: sc.TLSClientConfig.CAData}}
	if sc.ProxyURL != "" {
		u, err := url.Parse(sc.ProxyURL)
		if err != nil {
			return checkResult{Server: server, Result: checkFailed, Detail: "proxyUrl: " + err.Error()}
		}
		rcfg.Proxy = http.ProxyURL(u)
	}
	r := callVersion(ctx, rcfg, timeout)
	r.Server = server
	r.Detail = redact(r.Detail, sc.BearerToken)
	if exec && r.Status != 0 {
		// the API server answered over TLS with the Secret's CA: what is
		// left unproven is the exec credential
		r.Result = checkReachable
		r.Detail = fmt.Sprintf("TLS and CA ok, anonymous /version: %s; exec credentials not checked", r.Detail)
	}
	return r
}

// callVersion calls /version with rcfg and says what came back: the version,
// the HTTP status with the answer's own code and message (a Kubernetes
// Status, or Rancher's "code: message"), or why nothing answered.
func callVersion(ctx context.Context, rcfg *rest.Config, timeout time.Duration) checkResult {
	dc, err := discovery.NewDiscoveryClientForConfig(rcfg)
	if err != nil {
		return checkResult{Result: checkFailed, Detail: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res := dc.RESTClient().Get().AbsPath("/version").Do(ctx)
	var status int
	res.StatusCode(&status)
	body, err := res.Raw()
	if err == nil {
		var v struct {
			GitVersion string `json:"gitVersion"`
		}
		_ = json.Unmarshal(body, &v)
		return checkResult{Result: checkOK, Status: status, Detail: v.GitVersion}
	}
	if status != 0 {
		return checkResult{Result: checkFailed, Status: status, Detail: answerText(status, body)}
	}
	return checkResult{Result: checkFailed, Detail: classifyCheck(err)}
}

// printChecks writes the results as lines or, with format json, as one
// JSON array; it returns how many failed.
func printChecks(w io.Writer, results []checkResult, format string) (int, error) {
	failed := 0
	for _, r := range results {
		if r.failed() {
			failed++
		}
	}
	if format == "json" {
		if results == nil {
			results = []checkResult{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return failed, enc.Encode(results)
	}
	for _, r := range results {
		if _, err := fmt.Fprintln(w, r.line()); err != nil {
			return failed, err
		}
	}
	return failed, nil
}

// answerText is an error answer as "<status> <code>: <message>": Rancher's
// proxy answers {"code":"ClusterUnavailable","message":"cluster agent
// disconnected"}, an API server a Status with reason and message.
func answerText(status int, body []byte) string {
	var a struct {
		Code    json.RawMessage `json:"code"`
		Reason  string          `json:"reason"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &a) != nil {
		a.Message = plainText(body) // Rancher's proxy answers some errors as text
	}
	code := a.Reason
	var word string // Rancher's code is a word; a Status's is the number
	if json.Unmarshal(a.Code, &word) == nil && word != "" {
		code = word
	}
	if code == "" {
		code = http.StatusText(status)
	}
	if a.Message == "" || a.Message == code {
		return fmt.Sprintf("%d %s", status, code)
	}
	return fmt.Sprintf("%d %s: %s", status, code, a.Message)
}

// plainText is a short error answer written as text, "" for anything else
// (HTML, binary, a page of text).
func plainText(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) == 0 || len(s) > 200 || strings.HasPrefix(s, "<") {
		return ""
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return ""
		}
	}
	return s
}

// classifyCheck says why nothing answered /version: x509 (with the issuer
// seen), timeout, or the error.
func classifyCheck(err error) string {
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
	return err.Error()
}

// redact removes token (and its base64) from s.
func redact(s, token string) string {
	if token == "" {
		return s
	}
	s = strings.ReplaceAll(s, token, "<redacted>")
	return strings.ReplaceAll(s, base64.StdEncoding.EncodeToString([]byte(token)), "<redacted>")
}
