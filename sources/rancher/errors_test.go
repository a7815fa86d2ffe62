package rancher

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

func TestBadCA(t *testing.T) {
	f := newFake(t, false)
	cfg := config(t, f)
	cfg.CAFile = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(cfg.CAFile, []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"), 0o600))
	cfg.Default()
	_, err := newSource(cfg, sources.SourceOptions{Name: "rancher-a"}, nil)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "caFile: "), err.Error())

	require.NoError(t, os.WriteFile(cfg.CAFile, []byte("garbage"), 0o600))
	_, err = newSource(cfg, sources.SourceOptions{Name: "rancher-a"}, nil)
	require.ErrorContains(t, err, "no PEM certificate")

	// A CA file that breaks after start fails the listing.
	f.ServeFixturePages(true)
	cfg.CAFile = ""
	s := newTestSource(t, "rancher-a", cfg, testOptions{})
	s.cfg.CAFile = filepath.Join(t.TempDir(), "missing.pem")
	_, err = s.Clusters(t.Context())
	require.ErrorContains(t, err, "caFile: ")
	assert.Equal(t, 1.0, errCount(t, s, upstream.KindConfig, opCAFile))

	// A cacerts setting that is not PEM makes proxied clusters not ready.
	s.cfg.CAFile = ""
	f.SetCACerts("not a pem")
	got, err := s.Clusters(t.Context())
	require.NoError(t, err)
	for _, c := range got {
		assert.False(t, c.Ready)
		assert.Contains(t, c.NotReadyReason, "cacerts")
	}
}

func TestPageErrorKeepsPreviousListing(t *testing.T) {
	f := newFake(t, false)
	f.PutFixtureClusters()
	cfg := config(t, f)
	cfg.PageLimit = 1
	s := newTestSource(t, "rancher-a", cfg, testOptions{})
	inv, err := inventory.New([]inventory.SourceSpec{{
		Name: "rancher-a", Provider: sources.ProviderRancher, Source: s, Interval: time.Hour, Timeout: 10 * time.Second,
	}}, inventory.Options{})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(t.Context()))
	before := inv.Snapshot()
	require.Len(t, before.Clusters, 3)

	f.InterceptPages(func(w http.ResponseWriter, _ *http.Request, page int) bool {
		if page != 2 {
			return false
		}
		http.Error(w, `{"type":"error","status":"500","message":"internal boom at db"}`, http.StatusInternalServerError)
		return true
	})
	err = inv.RefreshAll(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "list clusters: get /v3/clusters page 2: rancher answered 500 Internal Server Error")
	assert.NotContains(t, err.Error(), "boom")
	assert.Equal(t, 1.0, errCount(t, s, upstream.KindServer, opClusters))

	after := inv.Snapshot()
	assert.Equal(t, before.Clusters, after.Clusters, "the last complete listing is kept")
	st, _ := after.Source("rancher-a")
	assert.True(t, st.Stale)

	// Directly: an error comes with no clusters at all.
	got, err := s.Clusters(t.Context())
	require.Error(t, err)
	assert.Nil(t, got)
}

func TestTokenRejected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		env    bool
		op     string // the operation refused
	}{
		{name: "401 token file", status: http.StatusUnauthorized, op: opAPIRoot},
		{name: "403 token file", status: http.StatusForbidden, op: opClusters},
		{name: "401 token env", status: http.StatusUnauthorized, env: true, op: opAPIRoot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, false)
			f.ServeFixturePages(true)
			f.SetAPIToken("token-other:xyz")
			cfg := config(t, f)
			if tc.env {
				t.Setenv("RANCHER_TEST_TOKEN", testToken)
				cfg.Token = sources.SecretRef{Env: "RANCHER_TEST_TOKEN"}
			}
			if tc.status == http.StatusForbidden {
				f.SetAPIToken(testToken)
				f.InterceptPages(func(w http.ResponseWriter, _ *http.Request, _ int) bool {
					w.WriteHeader(http.StatusForbidden)
					_, _ = w.Write([]byte(`{"type":"error","status":"403","message":"clusters.management.cattle.io is forbidden"}`))
					return true
				})
			}
			s := newTestSource(t, "rancher-a", cfg, testOptions{})
			got, err := s.Clusters(t.Context())
			require.Error(t, err)
			assert.Nil(t, got)
			msg := err.Error()
			assert.Contains(t, msg, f.URL())
			assert.Contains(t, msg, cfg.Token.String())
			assert.Contains(t, msg, fmt.Sprint(tc.status))
			assert.NotContains(t, msg, testToken)
			assert.NotContains(t, msg, "sEcReT")
			assert.NotContains(t, msg, "must authenticate")
			assert.Equal(t, 1.0, errCount(t, s, upstream.KindAuth, tc.op))
		})
	}
	t.Run("missing token file", func(t *testing.T) {
		f := newFake(t, false)
		cfg := config(t, f)
		cfg.Token.File = filepath.Join(t.TempDir(), "nope")
		s := newTestSource(t, "rancher-a", cfg, testOptions{})
		_, err := s.Clusters(t.Context())
		require.ErrorContains(t, err, "token file:"+cfg.Token.File+": no such file or directory")
		assert.Equal(t, 1.0, errCount(t, s, upstream.KindConfig, opToken))
		assert.Empty(t, f.TakeRequests(), "nothing is sent without a token")
	})
}

func TestMalformedAnswers(t *testing.T) {
	const marker = "BODY-MARKER-c-9xyz"
	for _, tc := range []struct {
		name, body, want string
		kind             upstream.Kind
	}{
		{name: "truncated JSON", body: `{"type":"collection","data":[{"id":"c-1","name":"` + marker + `"`, want: "malformed JSON", kind: upstream.KindInvalidResponse},
		{name: "not JSON", body: "<html>" + marker + "</html>", want: "malformed JSON", kind: upstream.KindInvalidResponse},
		{name: "wrong type", body: `{"type":"collection","data":[{"id":"c-1","labels":"` + marker + `"}]}`, want: "unexpected JSON", kind: upstream.KindInvalidResponse},
		{name: "not a collection", body: `{"message":"` + marker + `"}`, want: "not a collection", kind: upstream.KindInvalidResponse},
		{name: "cluster without id", body: `{"type":"collection","data":[{"name":"` + marker + `"}]}`, want: "no id", kind: upstream.KindInvalidResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, false)
			f.ServeFixturePages(true)
			f.InterceptPages(func(w http.ResponseWriter, _ *http.Request, page int) bool {
				if page != 2 {
					return false
				}
				_, _ = w.Write([]byte(tc.body))
				return true
			})
			s := newTestSource(t, "rancher-a", config(t, f), testOptions{})
			_, err := s.Clusters(t.Context())
			require.Error(t, err)
			assert.Contains(t, err.Error(), "page 2")
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), marker)
			assert.Less(t, len(err.Error()), 200)
			assert.Equal(t, 1.0, errCount(t, s, tc.kind, opClusters))
		})
	}
}

func TestPaginationLoops(t *testing.T) {
	f := newFake(t, false)
	f.Generate(3)
	cfg := config(t, f)
	cfg.PageLimit = 1
	f.InterceptPages(func(w http.ResponseWriter, r *http.Request, page int) bool {
		if page != 2 {
			return false
		}
		// Page 2 links back to itself, as norman does for an unknown marker.
		fmt.Fprintf(w, `{"type":"collection","pagination":{"next":%q},"data":[{"id":"c-m-00000001","state":"active"}]}`, f.URL()+r.URL.RequestURI())
		return true
	})
	s := newTestSource(t, "rancher-a", cfg, testOptions{})
	_, err := s.Clusters(t.Context())
	require.ErrorContains(t, err, "earlier page")
	assert.Equal(t, 1.0, errCount(t, s, upstream.KindInvalidResponse, opClusters))

	f.InterceptPages(func(w http.ResponseWriter, r *http.Request, page int) bool {
		if page != 2 {
			return false
		}
		fmt.Fprintf(w, `{"type":"collection","data":[{"id":"c-m-00000000","state":"active"}]}`)
		return true
	})
	_, err = s.Clusters(t.Context())
	require.ErrorContains(t, err, "c-m-00000000 listed twice")
}

// TestPagesCutShort: a last page (no next link) after fewer clusters than
// the pagination's total (a next link lost by a proxy, a page cut short)
// fails the listing: the clusters not listed must not count as absent; so
// does a last page without a total after pages that gave one.
func TestPagesCutShort(t *testing.T) {
	for _, tc := range []struct {
		name string
		page int
		body string
		want string
	}{
		{"page 1 partial without next", 1, `{"type":"collection","pagination":{"limit":1,"total":3,"partial":true},"data":[{"id":"c-m-00000000","state":"active"}]}`,
			"page 1: the pages held 1 items of the 3"},
		{"page 2 the last of two, of three", 2, `{"type":"collection","pagination":{"limit":1,"total":3,"partial":true},"data":[{"id":"c-m-00000001","state":"active"}]}`,
			"page 2: the pages held 2 items of the 3"},
		{"page 2 the last of two, without pagination", 2, `{"type":"collection","data":[{"id":"c-m-00000001","state":"active"}]}`,
			"page 2: the last page gives no pagination total where the pages before it did"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, false)
			f.Generate(3)
			cfg := config(t, f)
			cfg.PageLimit = 1
			s := newTestSource(t, "rancher-a", cfg, testOptions{})
			all, err := s.Clusters(t.Context())
			require.NoError(t, err)
			require.Len(t, all, 3, "the fake pages as norman does: every page counted")

			f.InterceptPages(func(w http.ResponseWriter, _ *http.Request, page int) bool {
				if page != tc.page {
					return false
				}
				_, _ = w.Write([]byte(tc.body))
				return true
			})
			_, err = s.Clusters(t.Context())
			require.ErrorContains(t, err, tc.want)
			assert.Equal(t, 1.0, errCount(t, s, upstream.KindInvalidResponse, opClusters))
		})
	}
}

func TestCancelWhileRancherHangs(t *testing.T) {
	f := newFake(t, false)
	f.ServeFixturePages(true)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var hung atomic.Bool
	f.InterceptPages(func(w http.ResponseWriter, r *http.Request, page int) bool {
		if page != 2 {
			return false
		}
		hung.Store(true)
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return true
	})
	cfg := config(t, f)
	cfg.RequestTimeout = sources.D(time.Minute)
	s := newTestSource(t, "rancher-a", cfg, testOptions{})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			for !hung.Load() {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
		}()
		start := time.Now()
		got, err := s.Clusters(ctx)
		require.Error(t, err)
		assert.Nil(t, got)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Less(t, time.Since(start), 5*time.Second)
		assert.Equal(t, 1.0, errCount(t, s, upstream.KindCanceled, opClusters))
	})
	t.Run("listing deadline", func(t *testing.T) {
		hung.Store(false)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := s.Clusters(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("request timeout", func(t *testing.T) {
		s.timeout = 200 * time.Millisecond
		start := time.Now()
		_, err := s.Clusters(t.Context())
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "no answer within requestTimeout 200ms")
		assert.Less(t, time.Since(start), 5*time.Second)
		assert.Equal(t, 2.0, errCount(t, s, upstream.KindTimeout, opClusters))
	})
}

func TestNoPartialResult(t *testing.T) {
	f := newFake(t, false)
	f.ServeFixturePages(true)
	f.InterceptPages(func(w http.ResponseWriter, _ *http.Request, page int) bool {
		if page == 2 {
			panic(http.ErrAbortHandler) // the connection drops mid-listing
		}
		return false
	})
	s := newTestSource(t, "rancher-a", config(t, f), testOptions{})
	got, err := s.Clusters(t.Context())
	require.Error(t, err)
	assert.Nil(t, got)
	assert.Equal(t, 1.0, errCount(t, s, upstream.KindNetwork, opClusters))
}

// failures are the ways a listing fails, with the kind and operation its
// error carries. The fake answers path with status and body when path is
// set; setup may change the rest and return the listing's context.
var failures = []struct {
	name       string
	tls        bool
	path, body string
	status     int
	setup      func(t *testing.T, f *fakeRancher, cfg *Config) context.Context
	kind       upstream.Kind
	op, msg    string // msg: in the message
}{
	{name: "token file missing", kind: upstream.KindConfig, op: opToken, msg: "no such file or directory",
		setup: func(t *testing.T, _ *fakeRancher, cfg *Config) context.Context {
			require.NoError(t, os.Remove(cfg.Token.File))
			return nil
		}},
	{name: "token rejected", kind: upstream.KindAuth, op: opAPIRoot, msg: "get /v3: rancher ",
		setup: func(_ *testing.T, f *fakeRancher, _ *Config) context.Context {
			f.SetAPIToken("token-other:xyz")
			return nil
		}},
	{name: "not a Rancher server", path: "/v3", status: http.StatusOK, body: "{}",
		kind: upstream.KindInvalidResponse, op: opAPIRoot, msg: "no X-Api-Schemas header"},
	{name: "no schemas", path: "/v3/schemas", status: http.StatusNotFound, body: "{}",
		kind: upstream.KindNotFound, op: opSchemas, msg: "get /v3 schemas: rancher answered 404 Not Found"},
	{name: "no cluster type", path: "/v3/schemas", status: http.StatusOK, body: `{"type":"collection","data":[]}`,
		kind: upstream.KindInvalidResponse, op: opSchemas, msg: "no listable cluster type"},
	{name: "cacerts throttled", path: "/v3/settings/cacerts", status: http.StatusTooManyRequests, body: "{}",
		kind: upstream.KindThrottled, op: opCACerts, msg: "429 Too Many Requests"},
	{name: "a page times out at a proxy", path: "/v3/clusters", status: http.StatusGatewayTimeout, body: "{}",
		kind: upstream.KindTimeout, op: opClusters, msg: "504 Gateway Timeout"},
	{name: "untrusted certificate", tls: true, kind: upstream.KindTLS, op: opAPIRoot, msg: "certificate"},
	{name: "cancelled before it began", kind: upstream.KindCanceled, op: opListing, msg: "context canceled",
		setup: func(t *testing.T, _ *fakeRancher, _ *Config) context.Context {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return ctx
		}},
	{name: "deadline passed before it began", kind: upstream.KindTimeout, op: opListing, msg: "deadline exceeded",
		setup: func(t *testing.T, _ *fakeRancher, _ *Config) context.Context {
			ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		}},
}

// TestFailuresCarryKindAndOperation checks that every failed listing
// returns an error whose chain holds an *upstream.Error with the kind and
// the operation that failed, and that errors_total counts it under both
// (the failure paths of the tests above are counted there too).
func TestFailuresCarryKindAndOperation(t *testing.T) {
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.tls)
			f.ServeFixturePages(true)
			cfg := config(t, f)
			if tc.path != "" {
				f.Answer(tc.path, tc.status, tc.body)
			}
			ctx := t.Context()
			if tc.setup != nil {
				if c := tc.setup(t, f, &cfg); c != nil {
					ctx = c
				}
			}
			s := newTestSource(t, "rancher-a", cfg, testOptions{})
			got, err := s.Clusters(ctx)
			require.Error(t, err)
			assert.Nil(t, got)
			var ue *upstream.Error
			require.ErrorAs(t, err, &ue)
			assert.Equal(t, tc.kind, ue.Kind)
			assert.Equal(t, tc.op, ue.Operation)
			assert.Equal(t, tc.kind, upstream.KindOf(err))
			assert.Contains(t, err.Error(), tc.msg)
			assert.NotContains(t, err.Error(), testToken)
			assert.Equal(t, 1.0, errCount(t, s, tc.kind, tc.op))
			if tc.op != opListing && tc.op != opToken {
				assert.Equal(t, 1.0, testutil.ToFloat64(s.metrics.APIRequests.WithLabelValues(tc.op, string(tc.kind))),
					"the failed request is counted with its kind as the outcome")
			}
		})
	}
}
