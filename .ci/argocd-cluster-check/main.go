// Command argocd-cluster-check tells whether Argo CD can connect to a cluster
// with a cluster Secret, through Argo CD's own client code.
//
//	argocd-cluster-check [-timeout 10s] [FILE|-]
//
// It reads one Secret (YAML or JSON: data and/or stringData with name,
// server, config, ...) from FILE or stdin and turns it into a REST config as
// Argo CD's application controller does: util/db.SecretToCluster, then
// Cluster.RESTConfig (RawRestConfig plus Argo CD's transport), so exec and
// AWS credentials run as they would in Argo CD (the AWS one runs
// argocd-k8s-auth, which must be on the PATH). Then, with a discovery client,
// it asks the server for /version, as Argo CD's cluster cache does, and for
// /api: /version answers anonymous clients too, /api only authenticated ones.
//
// It prints one JSON line and exits 0 when Argo CD could connect, 1
// otherwise:
//
//	{"ok":true,"version":"v1.32.2"}
//	{"ok":false,"kind":"x509|unauthorized|forbidden|timeout|network|other","error":"..."}
//
// Neither that line nor what reaches stderr (klog, Argo CD's logger, an exec
// plugin's stderr) holds the Secret's credentials: they are redacted.
//
// With -resolve-name it resolves an Application's destination name instead,
// as Argo CD's controllers do: it reads the cluster Secrets of a namespace
// through an API server (-kubeconfig, -namespace) with util/settings'
// SettingsManager and util/db, and looks the name up with util/argo's
// GetDestinationCluster (db.GetClusterServersByName, then db.GetCluster;
// Argo CD 2.x: ValidateDestination, then db.GetCluster, see destination.go):
//
//	argocd-cluster-check -resolve-name NAME -kubeconfig FILE [-namespace argocd] [-timeout 10s]
//	{"ok":true,"name":"...","server":"...","labels":{...},"annotations":{...}}
//	{"ok":false,"kind":"other","error":"there are no clusters with this name: ..."}
//
// It prints the resolved cluster's name, server, labels and annotations,
// never its config.
//
// .ci/testbin (component argocd) builds it in the scratch module of each
// Argo CD version's ApplicationSet controller; this directory is outside the
// project's module (the go tool ignores directories starting with a dot).
// Its imports name github.com/argoproj/argo-cd/v3: for an Argo CD 2.x,
// .ci/testbin rewrites them to .../v2 and builds with the tag argocdv2,
// which picks destination_v2.go instead of destination.go (the one API
// that differs).
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/util/db"
	"github.com/argoproj/argo-cd/v3/util/settings"
)

const (
	maxInput    = 1 << 20
	maxErrorLen = 400
	redacted    = "<redacted>"
)

// Kinds of failure.
const (
	kindX509         = "x509"
	kindUnauthorized = "unauthorized"
	kindForbidden    = "forbidden"
	kindTimeout      = "timeout"
	kindNetwork      = "network"
	kindOther        = "other"
)

// result is the line printed.
type result struct {
	OK      bool   `json:"ok"`
	Version string `json:"version,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Error   string `json:"error,omitempty"`
}

func main() {
	timeout := flag.Duration("timeout", 10*time.Second, "how long the whole check may take")
	resolveName := flag.String("resolve-name", "", "resolve this Application destination name among the cluster Secrets of -namespace instead")
	kubeconfig := flag.String("kubeconfig", "", "with -resolve-name: the kubeconfig of the API server holding the cluster Secrets")
	namespace := flag.String("namespace", "argocd", "with -resolve-name: Argo CD's namespace")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: argocd-cluster-check [-timeout 10s] [FILE|-]\n"+
			"       argocd-cluster-check -resolve-name NAME -kubeconfig FILE [-namespace argocd] [-timeout 10s]\n"+
			"Connects to the cluster of an Argo CD cluster Secret (YAML or JSON, from FILE or stdin) with Argo CD's code,\n"+
			"or resolves an Application destination name to a cluster as Argo CD does.\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 1 || *timeout <= 0 || *resolveName != "" && (flag.NArg() > 0 || *kubeconfig == "" || *namespace == "") {
		flag.Usage()
		os.Exit(2)
	}
	red := &redactor{}
	flush := redirectStderr(red)
	var res any
	ok := false
	if *resolveName != "" {
		r := resolveDestination(*resolveName, *kubeconfig, *namespace, *timeout, red)
		res, ok = r, r.OK
	} else {
		r := run(flag.Arg(0), *timeout, red)
		res, ok = r, r.OK
	}
	flush()
	line, _ := json.Marshal(res) //nolint:errcheck // structs of strings, string maps and a bool always marshal
	_, _ = os.Stdout.Write(append(line, '\n'))
	if !ok {
		os.Exit(1)
	}
}

// resolved is the line printed with -resolve-name.
type resolved struct {
	OK          bool              `json:"ok"`
	Name        string            `json:"name,omitempty"`
	Server      string            `json:"server,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Kind        string            `json:"kind,omitempty"`
	Error       string            `json:"error,omitempty"`
}

// resolveDestination resolves the destination name as Argo CD's
// ApplicationSet and application controllers do: util/argo's
// GetDestinationCluster over util/db, which reads the cluster Secrets of
// namespace through the SettingsManager's informer (argocd-cm must be
// there). The whole lookup gets timeout.
func resolveDestination(name, kubeconfig, namespace string, timeout time.Duration, red *redactor) resolved {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan resolved, 1)
	go func() {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			done <- resolved{Kind: kindOther, Error: red.short(fmt.Errorf("kubeconfig: %w", err))}
			return
		}
		cfg.Timeout = timeout
		kc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			done <- resolved{Kind: kindOther, Error: red.short(fmt.Errorf("kubernetes client: %w", err))}
			return
		}
		argoDB := db.NewDB(namespace, settings.NewSettingsManager(ctx, kc, namespace), kc)
		cluster, err := destinationCluster(ctx, name, argoDB)
		if err != nil {
			done <- resolved{Kind: classify(err), Error: red.short(err)}
			return
		}
		red.add(cluster.Config.BearerToken, cluster.Config.Password, string(cluster.Config.KeyData))
		done <- resolved{OK: true, Name: cluster.Name, Server: cluster.Server, Labels: cluster.Labels, Annotations: cluster.Annotations}
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(timeout + time.Second):
		return resolved{Kind: kindTimeout, Error: fmt.Sprintf("no answer within %s", timeout)}
	}
}

// run checks the Secret at path ("" or "-": stdin); the whole check,
// credential plugins included, gets timeout.
func run(path string, timeout time.Duration, red *redactor) result {
	s, err := readSecret(path)
	if err != nil {
		return result{Kind: kindOther, Error: red.short(err)}
	}
	done := make(chan result, 1)
	go func() { done <- connect(s, timeout, red) }()
	select {
	case r := <-done:
		return r
	case <-time.After(timeout + time.Second):
		// an exec plugin that hangs: the HTTP client's timeout does not cover it
		return result{Kind: kindTimeout, Error: fmt.Sprintf("no answer within %s", timeout)}
	}
}

// readSecret decodes one Secret and folds stringData into data, as the API
// server does before Argo CD reads it.
func readSecret(path string) (*corev1.Secret, error) {
	var raw []byte
	var err error
	if path == "" || path == "-" {
		raw, err = io.ReadAll(io.LimitReader(os.Stdin, maxInput+1))
	} else {
		raw, err = os.ReadFile(path)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("read secret: %w", err)
	case len(raw) > maxInput:
		return nil, fmt.Errorf("read secret: more than %d bytes", maxInput)
	}
	s := &corev1.Secret{}
	if err := yaml.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("decode secret: %w", err)
	}
	if s.Kind != "" && s.Kind != "Secret" {
		return nil, fmt.Errorf("decode secret: kind %q, not Secret", s.Kind)
	}
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
	return s, nil
}

// connect converts the Secret with Argo CD's code and asks the server for
// /version and /api.
func connect(s *corev1.Secret, timeout time.Duration, red *redactor) result {
	deadline := time.Now().Add(timeout)
	if t := s.Labels[common.LabelKeySecretType]; t != common.LabelValueSecretTypeCluster {
		return result{Kind: kindOther, Error: fmt.Sprintf("not a cluster Secret to Argo CD: label %s is %q, not %q",
			common.LabelKeySecretType, t, common.LabelValueSecretTypeCluster)}
	}
	cluster, err := db.SecretToCluster(s)
	if err != nil {
		return result{Kind: kindOther, Error: red.short(err)}
	}
	cfg := cluster.Config
	red.add(cfg.BearerToken, cfg.Password, string(cfg.KeyData))
	if cfg.ExecProviderConfig != nil {
		for _, v := range cfg.ExecProviderConfig.Env {
			red.add(v)
		}
	}
	if cluster.Server == "" {
		return result{Kind: kindOther, Error: "no server in the Secret"}
	}
	config, err := cluster.RESTConfig()
	if err != nil {
		return failure(fmt.Errorf("rest config: %w", err), red)
	}
	config.Timeout = timeout
	// as the application controller's cluster cache does below debug level
	config.WarningHandler = rest.NoWarnings{}
	dc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return failure(fmt.Errorf("discovery client: %w", err), red)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return failure(fmt.Errorf("server version: %w", err), red)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := dc.RESTClient().Get().AbsPath("/api").Do(ctx).Error(); err != nil {
		return failure(fmt.Errorf("api discovery: %w", err), red)
	}
	return result{OK: true, Version: v.GitVersion}
}

func failure(err error, red *redactor) result {
	return result{Kind: classify(err), Error: red.short(err)}
}

// classify names what kind of failure err is.
func classify(err error) string {
	var (
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
		roots     x509.SystemRootsError
		netErr    net.Error
		opErr     *net.OpError
		dnsErr    *net.DNSError
	)
	msg := err.Error()
	switch {
	case apierrors.IsUnauthorized(err):
		return kindUnauthorized
	case apierrors.IsForbidden(err):
		return kindForbidden
	case errors.As(err, &verify), errors.As(err, &authority), errors.As(err, &invalid), errors.As(err, &hostname),
		errors.As(err, &roots), strings.Contains(msg, "x509: "), strings.Contains(msg, "unable to load root certificates"):
		return kindX509
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return kindTimeout
	case errors.As(err, &opErr), errors.As(err, &dnsErr), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return kindNetwork
	}
	return kindOther
}

// redactor replaces credential values in text.
type redactor struct {
	mu     sync.Mutex
	values []string
}

// add records credential values; a multi-line one (a PEM key) is also
// recorded line by line, for text that is redacted a line at a time.
func (r *redactor) add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range values {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		r.values = append(r.values, v)
		if strings.Contains(v, "\n") {
			for _, l := range strings.Split(v, "\n") {
				if l = strings.TrimSpace(l); l != "" {
					r.values = append(r.values, l)
				}
			}
		}
	}
	// longest first, so that no part of a longer value survives a shorter one
	slices.SortFunc(r.values, func(a, b string) int { return len(b) - len(a) })
	r.values = slices.Compact(r.values)
}

func (r *redactor) redact(s string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, redacted)
	}
	return s
}

// short is err's message, redacted, on one line and at most maxErrorLen
// bytes.
func (r *redactor) short(err error) string {
	s := strings.Join(strings.Fields(r.redact(err.Error())), " ")
	if len(s) <= maxErrorLen {
		return s
	}
	n := maxErrorLen
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// redirectStderr sends what is written to stderr from now on (klog, Argo
// CD's logrus logger, exec credential plugins, which client-go gives
// os.Stderr when their authenticator is made) through r, a line at a time.
// The returned function restores stderr and flushes.
func redirectStderr(r *redactor) (flush func()) {
	orig := os.Stderr
	pr, pw, err := os.Pipe()
	if err != nil {
		return func() {}
	}
	os.Stderr = pw
	logrus.SetOutput(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), maxInput)
		for sc.Scan() {
			fmt.Fprintln(orig, r.redact(sc.Text()))
		}
	}()
	return func() {
		os.Stderr = orig
		logrus.SetOutput(orig)
		_ = pw.Close()
		// a plugin still running holds the pipe open: do not wait for it
		select {
		case <-done:
		case <-time.After(time.Second):
		}
	}
}
