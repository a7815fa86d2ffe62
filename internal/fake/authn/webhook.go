// Package authn is the token webhook a test's kube-apiserver consults
// (--authentication-token-webhook-config-file) to authenticate as a cloud's
// clusters do: EKS tokens as aws-iam-authenticator checks them, Entra ID
// access tokens as AKS checks them.
package authn

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
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// STSCaller sends a presigned GetCallerIdentity to STS with the header
// x-k8s-aws-id: cluster, and returns the caller's ARN or STS's refusal.
type STSCaller func(presigned *url.URL, cluster string) (arn string, err error)

// Errors of the webhook's decisions that tests compare against.
var (
	// ErrNotEKS is ParseEKSToken's answer to a token that is not
	// k8s-aws-v1.
	ErrNotEKS = errors.New("not a k8s-aws-v1 token")
	// ErrNotCloudToken is the webhook's answer to a token neither
	// k8s-aws-v1 nor a JWT: not its to accept.
	ErrNotCloudToken = errors.New("neither a k8s-aws-v1 token nor a JWT")
	// ErrNoEKSCluster answers EKS tokens while the webhook trusts no EKS
	// cluster.
	ErrNoEKSCluster = errors.New("no EKS cluster trusted")
)

// Webhook is the token webhook a kube-apiserver consults after its own
// authenticators, as EKS consults aws-iam-authenticator and AKS its Entra
// ID guard: a k8s-aws-v1. token is a presigned STS GetCallerIdentity URL,
// which it checks (ParseEKSToken) and sends to STS with the cluster's name,
// as aws-iam-authenticator does; STS verifies the signature with the key
// it issued and answers with the caller's identity. A JWT is an Entra ID
// access token, checked as AKS checks one (VerifyAKSToken). Other tokens
// are not its to accept. The one apiserver plays every cluster it is told
// to trust: the EKS clusters by name (TrustEKS), the AKS clusters by
// tenant and server application (TrustEntra). The zero Webhook judges
// tokens (Review) and trusts nothing; Start serves one.
type Webhook struct {
	srv        *httptest.Server
	configFile string

	mu          sync.Mutex
	sts         STSCaller
	eksClusters []string
	entra       *EntraTrust
	// route names the cluster a token was presented to; nil: any of the
	// trusted ones
	route   func(token string) (cluster string, ok bool)
	reviews []string // one line per TokenReview: the decision and why
}

// Start serves the webhook over TLS on loopback and writes the
// kubeconfig-shaped file kube-apiserver reads to reach it (ConfigFile)
// into dir.
func Start(dir string) (*Webhook, error) {
	w := &Webhook{}
	w.srv = httptest.NewTLSServer(http.HandlerFunc(w.serveReview))
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.srv.Certificate().Raw})
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
`, w.srv.URL, base64.StdEncoding.EncodeToString(ca))
	w.configFile = filepath.Join(dir, "cloud-authn-webhook.yaml")
	if err := os.WriteFile(w.configFile, []byte(config), 0o600); err != nil {
		w.srv.Close()
		return nil, fmt.Errorf("token webhook config: %w", err)
	}
	return w, nil
}

// ConfigFile is the file for kube-apiserver's
// --authentication-token-webhook-config-file (with
// --authentication-token-webhook-version v1).
func (w *Webhook) ConfigFile() string { return w.configFile }

// Close stops serving.
func (w *Webhook) Close() { w.srv.Close() }

// TrustEKS makes the webhook accept EKS tokens for one of clusters that
// sts confirms (nil: none); it returns a function that restores what it
// trusted before.
func (w *Webhook) TrustEKS(sts STSCaller, clusters ...string) (restore func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prevSTS, prevClusters := w.sts, w.eksClusters
	w.sts, w.eksClusters = sts, clusters
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.sts, w.eksClusters = prevSTS, prevClusters
	}
}

// RouteBy makes the webhook judge each token as the cluster route names
// for it would, and only as that cluster; it returns a function that
// restores what it did before.
func (w *Webhook) RouteBy(route func(token string) (cluster string, ok bool)) (restore func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := w.route
	w.route = route
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.route = prev
	}
}

// Seen returns the decisions taken so far, one line per TokenReview
// served: "authenticated <who> at <cluster>…" or "unauthenticated: <why>".
func (w *Webhook) Seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.reviews)
}

// serveReview answers a TokenReview.
func (w *Webhook) serveReview(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(rw, "POST a TokenReview", http.StatusMethodNotAllowed)
		return
	}
	var review authenticationv1.TokenReview
	if err := json.NewDecoder(http.MaxBytesReader(rw, r.Body, 1<<20)).Decode(&review); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	user, decision, err := w.Review(review.Spec.Token, time.Now())
	status := authenticationv1.TokenReviewStatus{}
	if err == nil {
		status.Authenticated = true
		status.User = user
	}
	w.mu.Lock()
	if err != nil {
		w.reviews = append(w.reviews, "unauthenticated: "+err.Error())
	} else {
		w.reviews = append(w.reviews, "authenticated "+decision)
	}
	w.mu.Unlock()
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(authenticationv1.TokenReview{TypeMeta: review.TypeMeta, Status: status})
}

// Review authenticates token at now as the cluster it is for would, and
// says who it is and at which cluster. It does not record the decision
// (Seen lists those of the TokenReviews served).
func (w *Webhook) Review(token string, now time.Time) (authenticationv1.UserInfo, string, error) {
	w.mu.Lock()
	sts, clusters, entra, route := w.sts, w.eksClusters, w.entra, w.route
	w.mu.Unlock()
	at := ""
	if route != nil {
		c, ok := route(token)
		if !ok {
			return authenticationv1.UserInfo{}, "", errors.New("presented at no cluster's address")
		}
		at = c
	}
	switch {
	case strings.HasPrefix(token, eksTokenPrefix):
		u, err := ParseEKSToken(token, now)
		if err != nil {
			return authenticationv1.UserInfo{}, "", err
		}
		if at != "" {
			clusters = []string{at}
		}
		if sts == nil || len(clusters) == 0 {
			return authenticationv1.UserInfo{}, "", ErrNoEKSCluster
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
		user, decision, cluster, err := VerifyAKSToken(token, entra, now)
		if err == nil && at != "" && cluster != at {
			return authenticationv1.UserInfo{}, "", fmt.Errorf("a token for %s, presented at %s", decision, at)
		}
		return user, decision, err
	}
	return authenticationv1.UserInfo{}, "", ErrNotCloudToken
}
