package e2e

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
)

// eksClusterName is the cluster name the suite's kube-apiserver answers to
// as an EKS cluster: the x-k8s-aws-id a token must be signed for.
const eksClusterName = "e2e-eks"

// stsCaller sends a presigned GetCallerIdentity to STS with the header
// x-k8s-aws-id: cluster, and returns the caller's ARN or STS's refusal.
type stsCaller func(presigned *url.URL, cluster string) (arn string, err error)

// cloudAuthn is the token webhook the suite's kube-apiserver consults
// (--authentication-token-webhook-config-file) after its own
// authenticators, as EKS consults aws-iam-authenticator and AKS its Entra
// ID guard: a k8s-aws-v1. token is a presigned STS GetCallerIdentity URL,
// which it checks and sends to the fake STS with the cluster's name, as
// aws-iam-authenticator does; STS verifies the signature with the key it
// issued and answers with the caller's identity; a JWT is an Entra ID access token,
// checked as AKS checks one (akswebhook_test.go). Other tokens are not its
// to accept. The one apiserver plays every cluster it is told to trust:
// the EKS clusters by name, the AKS clusters by tenant and server
// application.
type cloudAuthn struct {
	srv        *httptest.Server
	configFile string

	mu          sync.Mutex
	sts         stsCaller
	eksClusters []string
	entra       *entraTrust
	// route names the cluster a token was presented to; nil: any of the
	// trusted ones
	route   func(token string) (cluster string, ok bool)
	reviews []string // one line per TokenReview: the decision and why
}

// startCloudAuthn starts the webhook (TLS, loopback) and writes the
// kubeconfig-shaped file kube-apiserver reads to reach it, into dir.
func startCloudAuthn(dir string) (*cloudAuthn, error) {
	a := &cloudAuthn{}
	a.srv = httptest.NewTLSServer(http.HandlerFunc(a.serveReview))
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.srv.Certificate().Raw})
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cloud-authn
  cluster:
    server: %s/authenticate
    certificate-authority-data: %s
users:
- name: kube-apiserver
contexts:
- name: webhook
  context: {cluster: cloud-authn, user: kube-apiserver}
current-context: webhook
`, a.srv.URL, base64.StdEncoding.EncodeToString(ca))
	a.configFile = filepath.Join(dir, "cloud-authn-webhook.yaml")
	if err := os.WriteFile(a.configFile, []byte(config), 0o600); err != nil {
		a.srv.Close()
		return nil, err
	}
	return a, nil
}

// startControlPlane starts the webhook, then the control plane with the
// kube-apiserver flags that make it consult the webhook, after its own
// authenticators, for the tokens they do not accept, as EKS consults
// aws-iam-authenticator.
func (x *env) startControlPlane() (*rest.Config, error) {
	a, err := startCloudAuthn(x.dir)
	if err != nil {
		return nil, fmt.Errorf("cloud token webhook: %w", err)
	}
	x.cloudAuthn = a
	x.testEnv.ControlPlane.GetAPIServer().Configure().
		Set("authentication-token-webhook-config-file", a.configFile).
		Set("authentication-token-webhook-version", "v1")
	return x.testEnv.Start()
}

func (a *cloudAuthn) Close() { a.srv.Close() }

// trustEKS makes the webhook accept EKS tokens for one of clusters that
// sts confirms (nil: none); it returns a function that restores what it
// trusted before.
func (a *cloudAuthn) trustEKS(sts stsCaller, clusters ...string) (restore func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	prevSTS, prevClusters := a.sts, a.eksClusters
	a.sts, a.eksClusters = sts, clusters
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.sts, a.eksClusters = prevSTS, prevClusters
	}
}

// routeBy makes the webhook judge each token as the cluster route names
// for it would, and only as that cluster; it returns a function that
// restores what it did before.
func (a *cloudAuthn) routeBy(route func(token string) (string, bool)) (restore func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	prev := a.route
	a.route = route
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.route = prev
	}
}

// seen returns the decisions taken so far.
func (a *cloudAuthn) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.reviews...)
}

// serveReview answers a TokenReview.
func (a *cloudAuthn) serveReview(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a TokenReview", http.StatusMethodNotAllowed)
		return
	}
	var review authenticationv1.TokenReview
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	user, decision, err := a.review(review.Spec.Token, time.Now())
	status := authenticationv1.TokenReviewStatus{}
	if err == nil {
		status.Authenticated = true
		status.User = user
	}
	a.mu.Lock()
	if err != nil {
		a.reviews = append(a.reviews, "unauthenticated: "+err.Error())
	} else {
		a.reviews = append(a.reviews, "authenticated "+decision)
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(authenticationv1.TokenReview{TypeMeta: review.TypeMeta, Status: status})
}

// review authenticates token as the cluster it is for would, and says
// who it is for which cluster.
func (a *cloudAuthn) review(token string, now time.Time) (authenticationv1.UserInfo, string, error) {
	a.mu.Lock()
	sts, clusters, entra, route := a.sts, a.eksClusters, a.entra, a.route
	a.mu.Unlock()
	at := ""
	if route != nil {
		c, ok := route(token)
		if !ok {
			return authenticationv1.UserInfo{}, "", errors.New("presented at no cluster's address")
		}
		at = c
	}
	switch {
	case strings.HasPrefix(token, "k8s-aws-v1."):
		u, err := parseEKSToken(token, now)
		if err != nil {
			return authenticationv1.UserInfo{}, "", err
		}
		if at != "" {
			clusters = []string{at}
		}
		if sts == nil || len(clusters) == 0 {
			return authenticationv1.UserInfo{}, "", errNoEKSCluster
		}
		// each cluster's authenticator sends its own name
		for _, c := range clusters {
			var arn string
			if arn, err = sts(u, c); err == nil {
				user := authenticationv1.UserInfo{Username: arn, UID: "aws-iam-authenticator:" + arn, Groups: eksGroups(arn)}
				return user, arn + " at " + c, nil
			}
		}
		return authenticationv1.UserInfo{}, "", err
	case strings.Count(token, ".") == 2:
		user, decision, cluster, err := verifyAKSToken(token, entra, now)
		if err == nil && at != "" && cluster != at {
			return authenticationv1.UserInfo{}, "", fmt.Errorf("a token for %s, presented at %s", decision, at)
		}
		return user, decision, err
	}
	return authenticationv1.UserInfo{}, "", errNotCloudToken
}

// errNoEKSCluster answers EKS tokens while the webhook trusts no EKS
// cluster.
var errNoEKSCluster = errors.New("no EKS cluster trusted")

// eksGroups maps an identity to its groups, as aws-iam-authenticator's
// mapRoles would: an assumed role's group is e2e-eks:<role>.
func eksGroups(arn string) []string {
	parts := strings.Split(arn, "/")
	if len(parts) == 3 && strings.Contains(parts[0], ":assumed-role") {
		return []string{"e2e-eks:" + parts[1]}
	}
	return []string{"e2e-eks:users"}
}

// errNotEKS is parseEKSToken's answer to tokens that are not k8s-aws-v1;
// errNotCloudToken the webhook's to tokens neither k8s-aws-v1 nor a JWT.
var (
	errNotEKS        = errors.New("not a k8s-aws-v1 token")
	errNotCloudToken = errors.New("neither a k8s-aws-v1 token nor a JWT")
)

// parseEKSToken checks an EKS token as aws-iam-authenticator does before it
// sends it to STS, and returns the presigned URL: a GET of STS
// GetCallerIdentity on an STS host, X-Amz-Expires 0 to 60, dated within
// the last 15 minutes, host and x-k8s-aws-id among the signed headers, a
// SigV4 credential for STS in the region of the host.
func parseEKSToken(token string, now time.Time) (*url.URL, error) {
	const prefix = "k8s-aws-v1."
	if !strings.HasPrefix(token, prefix) {
		return nil, errNotEKS
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, prefix))
	if err != nil {
		return nil, fmt.Errorf("token is not base64url: %w", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return nil, fmt.Errorf("token is not a URL: %w", err)
	}
	q := u.Query()
	if u.Scheme != "https" || !isSTSHost(u.Host) || (u.Path != "/" && u.Path != "") {
		return nil, fmt.Errorf("not an STS URL: %s://%s%s", u.Scheme, u.Host, u.Path)
	}
	if q.Get("Action") != "GetCallerIdentity" || q.Get("Version") != "2011-06-15" || q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		return nil, fmt.Errorf("not a SigV4 GetCallerIdentity: Action=%q Version=%q", q.Get("Action"), q.Get("Version"))
	}
	if x, err := strconv.Atoi(q.Get("X-Amz-Expires")); err != nil || x < 0 || x > 60 {
		return nil, fmt.Errorf("X-Amz-Expires=%q, want 0 to 60", q.Get("X-Amz-Expires"))
	}
	date, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil || now.Sub(date) > 15*time.Minute || date.Sub(now) > 5*time.Minute {
		return nil, fmt.Errorf("X-Amz-Date=%q expired or invalid", q.Get("X-Amz-Date"))
	}
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	if !contains(signed, "x-k8s-aws-id") || !contains(signed, "host") {
		return nil, fmt.Errorf("X-Amz-SignedHeaders=%q lacks host or x-k8s-aws-id", q.Get("X-Amz-SignedHeaders"))
	}
	cred := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(cred) != 5 || cred[3] != "sts" || cred[4] != "aws4_request" || cred[1] != date.Format("20060102") {
		return nil, fmt.Errorf("X-Amz-Credential=%q is not an STS scope of the request's date", q.Get("X-Amz-Credential"))
	}
	// the global endpoint takes us-east-1 signatures only
	if want := stsHost(cred[2]); u.Host != want && (u.Host != "sts.amazonaws.com" || cred[2] != "us-east-1") {
		return nil, fmt.Errorf("signed for region %s, sent to %s", cred[2], u.Host)
	}
	return u, nil
}

func isSTSHost(host string) bool {
	return strings.HasPrefix(host, "sts.") && strings.HasSuffix(host, ".amazonaws.com") && !strings.Contains(host, ":")
}

func stsHost(region string) string { return "sts." + region + ".amazonaws.com" }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
