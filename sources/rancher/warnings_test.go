package rancher

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// TestPlainHTTPIsWarned: a plain-http url or secretURL sends tokens
// unencrypted (the listing token, or every cluster's from Argo CD): the
// source says so when it starts.
func TestPlainHTTPIsWarned(t *testing.T) {
	for _, tc := range []struct{ name, url, secretURL, want string }{
		{"url", "http://rancher.internal:8080", "", "rancher url is plain http"},
		{"secretURL", "https://rancher.example.com", "http://rancher.cattle-system.svc", "rancher secretURL is plain http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testlog.Buffer
			newTestSource(t, "r", Config{URL: tc.url, SecretURL: tc.secretURL, Token: sources.SecretRef{File: "/t"}},
				testOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			assert.Contains(t, logs.String(), tc.want)
		})
	}
	var logs testlog.Buffer
	newTestSource(t, "r", Config{URL: "https://rancher.example.com", Token: sources.SecretRef{File: "/t"}}, testOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	assert.NotContains(t, logs.String(), "plain http")
}
