package rancher

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// The distinctive token of these tests and its secret part (after ':').
const (
	noCredToken  = "token-nocrd:NoCredRancherSecret7q2w9e4r5t6y8u1i3o0pzxcvbnmlkjhg"
	noCredSecret = "NoCredRancherSecret7q2w9e4r5t6y8u1i3o0pzxcvbnmlkjhg"
)

// assertNoCredential fails when text holds the token, its secret part, or
// the Authorization header's value.
func assertNoCredential(t *testing.T, where, text string) {
	t.Helper()
	for _, s := range []string{noCredToken, noCredSecret, "Bearer " + noCredToken} {
		assert.NotContains(t, text, s, "%s holds the token", where)
	}
}

// scrape renders the registry as /metrics would.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}

// noCredentialCase is a listing on success or on a failure path: setup
// prepares the fake and the configuration; wantErr is the text the
// listing's error must contain ("" for a success).
type noCredentialCase struct {
	name    string
	setup   func(t *testing.T, f *fakeRancher, cfg *Config)
	tls     bool
	wantErr string
}

var noCredentialCases = []noCredentialCase{
	{name: "success", setup: func(t *testing.T, f *fakeRancher, cfg *Config) {}},
	{name: "401", wantErr: "rejected the token", setup: func(t *testing.T, f *fakeRancher, cfg *Config) {
		f.SetAPIToken("token-other:xyz")
	}},
	{name: "403 on a page", wantErr: "rejected the token", setup: func(t *testing.T, f *fakeRancher, cfg *Config) {
		f.InterceptPages(func(w http.ResponseWriter, r *http.Request, page int) bool {
			w.WriteHeader(http.StatusForbidden)
			// An answer that quotes the request's token.
			_, _ = fmt.Fprintf(w, `{"type":"error","status":"403","message":"token %s may not list clusters"}`, r.Header.Get("Authorization"))
			return true
		})
	}},
	{name: "500 on page 2", wantErr: "500 Internal Server Error", setup: func(t *testing.T, f *fakeRancher, cfg *Config) {
		f.InterceptPages(func(w http.ResponseWriter, r *http.Request, page int) bool {
			if page != 2 {
				return false
			}
			http.Error(w, `{"type":"error","status":"500","message":"boom for `+r.Header.Get("Authorization")+`"}`, http.StatusInternalServerError)
			return true
		})
	}},
	{name: "malformed JSON", wantErr: "malformed JSON", setup: func(t *testing.T, f *fakeRancher, cfg *Config) {
		f.InterceptPages(func(w http.ResponseWriter, r *http.Request, page int) bool {
			if page != 2 {
				return false
			}
			_, _ = w.Write([]byte(`{"type":"collection","data":[{"id":"c-1","name":"` + r.Header.Get("Authorization") + `"`))
			return true
		})
	}},
	{name: "unexpected JSON", wantErr: "unexpected JSON", setup: func(t *testing.T, f *fakeRancher, cfg *Config) {
		f.InterceptPages(func(w http.ResponseWriter, r *http.Request, page int) bool {
			_, _ = w.Write([]byte(`{"type":"collection","data":[{"id":"c-1","labels":"` + r.Header.Get("Authorization") + `"}]}`))
			return true
		})
	}},
	{name: "untrusted certificate", tls: true, wantErr: "certificate", setup: func(t *testing.T, f *fakeRancher, cfg *Config) {}},
	{name: "caFile gone", wantErr: "caFile", setup: func(t *testing.T, f *fakeRancher, cfg *Config) {
		cfg.CAFile = filepath.Join(t.TempDir(), "missing.pem")
	}},
	{name: "request timeout", wantErr: "no answer within requestTimeout", setup: func(t *testing.T, f *fakeRancher, cfg *Config) {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		f.InterceptPages(func(w http.ResponseWriter, r *http.Request, page int) bool {
			if page != 2 {
				return false
			}
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return true
		})
		cfg.RequestTimeout = sources.D(200 * time.Millisecond)
	}},
	{name: "links with the token as userinfo on another host", setup: func(t *testing.T, f *fakeRancher, cfg *Config) {
		u := strings.Replace(f.URL(), "127.0.0.1", "rancher.elsewhere.example", 1)
		f.SetLinkBase(strings.Replace(u, "://", "://"+noCredToken+"@", 1))
	}},
	{name: "token with whitespace", wantErr: "whitespace", setup: func(t *testing.T, f *fakeRancher, cfg *Config) {
		require.NoError(t, os.WriteFile(cfg.Token.File, []byte(noCredToken+" "+noCredSecret+"\n"), 0o600))
	}},
}

// TestNoCredentialInLogsOrErrors lists against the fake Rancher with a
// distinctive token at debug level, on success and on every failure path,
// and checks that neither the token nor its secret part appears in the
// logs, the errors, the listed clusters or the metrics.
func TestNoCredentialInLogsOrErrors(t *testing.T) {
	for _, tc := range noCredentialCases {
		t.Run(tc.name, func(t *testing.T) { checkNoCredential(t, tc) })
	}
}

func checkNoCredential(t *testing.T, tc noCredentialCase) {
	f := newFake(t, tc.tls)
	f.SetAPIToken(noCredToken)
	f.Generate(5)
	var logs testlog.Buffer
	reg := prometheus.NewRegistry()
	cfg := Config{URL: f.URL(), PageLimit: 2, Token: sources.SecretRef{File: writeToken(t, t.TempDir(), noCredToken)}}
	opts := testOptions{
		Logger:     slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"source": "rancher-a"}, reg),
	}
	tc.setup(t, f, &cfg)
	caFile := cfg.CAFile
	cfg.CAFile = "" // NewSource checks it; the "caFile gone" case removes it after start
	s := newTestSource(t, "rancher-a", cfg, opts)
	s.cfg.CAFile = caFile

	errs := listTwice(t, s, tc.wantErr)
	// The listing as the service runs it: the inventory logs failures,
	// keeps them in its status and counts them.
	inv, err := inventory.New([]inventory.SourceSpec{{
		Name: "rancher-a", Provider: sources.ProviderRancher, Source: s, Interval: time.Hour, Timeout: 10 * time.Second,
	}}, inventory.Options{Logger: opts.Logger, Registerer: reg})
	require.NoError(t, err)
	if err := inv.RefreshAll(t.Context()); err != nil {
		errs = append(errs, err.Error())
	}
	status, err := json.Marshal(inv.Status())
	require.NoError(t, err)
	assertNoCredential(t, "the inventory's status", string(status))
	if tc.wantErr != "" {
		assert.Contains(t, logs.String(), tc.wantErr, "the failure is logged")
	}
	if tc.wantErr == "" {
		// A rotated token rebuilds the client, which is logged.
		const rotated = "token-rotat:RotatedRancherSecretq2w9e4r5t6y8u1i3o0pzxcvbnm"
		require.NoError(t, os.WriteFile(cfg.Token.File, []byte(rotated+"\n"), 0o600))
		f.SetAPIToken(rotated)
		_, err = s.Clusters(t.Context())
		require.NoError(t, err)
		assert.NotContains(t, logs.String(), rotated)
		assert.NotContains(t, logs.String(), "RotatedRancherSecret")
	}

	require.NotEmpty(t, logs.String(), "debug logging is on")
	assertNoCredential(t, "the debug log", logs.String())
	for _, e := range errs {
		assertNoCredential(t, "the error", e)
	}
	assertNoCredential(t, "the metrics", scrape(t, reg))
	assertNoCredential(t, "the configuration's text", fmt.Sprintf("%v %+v", s.cfg.Token.String(), s.cfg.Token))
}

// listTwice lists twice (the second listing reuses or rebuilds the
// client), checks the outcome and the clusters, and returns the errors as
// text in every form they may be printed.
func listTwice(t *testing.T, s *Source, wantErr string) []string {
	t.Helper()
	var errs []string
	for range 2 {
		got, err := s.Clusters(t.Context())
		if wantErr == "" {
			require.NoError(t, err)
			require.Len(t, got, 5)
		} else {
			require.Error(t, err)
			assert.Contains(t, err.Error(), wantErr)
			errs = append(errs, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
			var ue *upstream.Error
			require.ErrorAs(t, err, &ue)
			errs = append(errs, fmt.Sprintf("%+v", *ue))
		}
		for _, c := range got {
			assertNoCredential(t, "a cluster", fmt.Sprintf("%+v", c))
		}
	}
	return errs
}

// TestNoCredentialListingDeadline makes sure a listing deadline,
// rather than the request timeout, leaves no token either.
func TestNoCredentialListingDeadline(t *testing.T) {
	f := newFake(t, false)
	f.SetAPIToken(noCredToken)
	f.Generate(3)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f.InterceptPages(func(w http.ResponseWriter, r *http.Request, page int) bool {
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return true
	})
	var logs testlog.Buffer
	s := newTestSource(t, "rancher-a", Config{URL: f.URL(), Token: sources.SecretRef{File: writeToken(t, t.TempDir(), noCredToken)}},
		testOptions{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := s.Clusters(ctx)
	require.Error(t, err)
	assertNoCredential(t, "the error", err.Error())
	assertNoCredential(t, "the debug log", logs.String())
}
