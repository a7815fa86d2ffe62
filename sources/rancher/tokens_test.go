package rancher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

func TestTokenMintOncePerClusterUnderConcurrency(t *testing.T) {
	f := newTokenRancher(t)
	f.SetMintDelay(20 * time.Millisecond)
	m := newTestManager(t, f, 3*time.Hour, nil)
	var wg sync.WaitGroup
	got := make([][]string, 2)
	for i, cluster := range []string{"c-m-aaaa", "c-m-bbbb"} {
		got[i] = make([]string, 16)
		for j := range got[i] {
			wg.Go(func() {
				v, err := m.Token(t.Context(), cluster)
				assert.NoError(t, err)
				got[i][j] = v
			})
		}
	}
	wg.Wait()
	require.Len(t, f.creates(), 2, "one mint per cluster")
	for i := range got {
		for _, v := range got[i] {
			assert.Equal(t, got[i][0], v)
		}
		assert.Contains(t, got[i][0], secretMark)
	}
	assert.NotEqual(t, got[0][0], got[1][0])
	assert.Equal(t, 2, m.Live())
	for _, c := range f.creates() {
		cluster := c["clusterId"].(string)
		assert.Equal(t, map[string]any{"type": "token", "clusterId": cluster, "ttl": float64(3 * 3600 * 1000),
			"description": "argocd-cluster-discovery owner=prod-a cluster=" + cluster}, c)
	}
	for _, a := range f.posts() {
		assert.Equal(t, "Bearer "+testToken, a, "the listing token authenticates the POST")
	}
	assertNoSecret(t, m.logs.String())
}

func TestTokenListingTokenAuthenticatesEveryRequest(t *testing.T) {
	f := newTokenRancher(t)
	rotated := "token-zzzzz:" + strings.Repeat("r", 54)
	f.SetAPIToken(rotated)
	var current string
	var mu sync.Mutex
	m := newTestManager(t, f, time.Hour, func() (string, error) { mu.Lock(); defer mu.Unlock(); return current, nil })
	mu.Lock()
	current = testToken
	mu.Unlock()
	_, err := m.Token(t.Context(), "c-m-aaaa")
	require.Error(t, err)
	assert.Equal(t, upstream.KindAuth, upstream.KindOf(err))
	mu.Lock()
	current = rotated // the file was rotated: read anew
	mu.Unlock()
	_, err = m.Token(t.Context(), "c-m-aaaa")
	require.NoError(t, err)
	assert.Equal(t, []string{"Bearer " + testToken, "Bearer " + rotated}, f.posts())
}

func TestTokenRenewsAtTwoThirds(t *testing.T) {
	f := newTokenRancher(t)
	m := newTestManager(t, f, 3*time.Hour, nil)
	ctx := t.Context()
	first, err := m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	f.clock.Step(2*time.Hour - time.Minute)
	v, err := m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	assert.Equal(t, first, v, "more than a third left: reused")
	require.Len(t, f.creates(), 1)

	f.clock.Step(2 * time.Minute)
	second, err := m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	assert.NotEqual(t, first, second, "a third left: renewed")
	assert.Contains(t, f.TokenNames(), "token-00001", "the old one stays until the new one is in use")
	assert.Equal(t, 2, m.Live())

	v, err = m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	assert.Equal(t, second, v)
	assert.Empty(t, f.DeletedTokens(), "not revoked at the next call: only once the Secret holds the new one")

	t.Run("a failed renewal serves the current token until it expires", func(t *testing.T) {
		f.clock.Step(2*time.Hour + time.Minute)
		f.SetAPIToken("") // the listing token is refused
		v, err := m.Token(ctx, "c-m-aaaa")
		require.NoError(t, err)
		assert.Equal(t, second, v)
		f.clock.Step(time.Hour)
		_, err = m.Token(ctx, "c-m-aaaa")
		require.Error(t, err)
		assert.Equal(t, opTokensCreate, upstream.OperationOf(err))
	})
	assertNoSecret(t, m.logs.String())
}

func TestTokenRenewalFollowsRanchersMaxTTL(t *testing.T) {
	f := newTokenRancher(t)
	f.SetMaxTTL(30 * time.Minute)
	m := newTestManager(t, f, 3*time.Hour, nil)
	first, err := m.Token(t.Context(), "c-m-aaaa")
	require.NoError(t, err)
	f.clock.Step(19 * time.Minute)
	v, _ := m.Token(t.Context(), "c-m-aaaa")
	assert.Equal(t, first, v)
	f.clock.Step(2 * time.Minute)
	v, _ = m.Token(t.Context(), "c-m-aaaa")
	assert.NotEqual(t, first, v, "renewed at two thirds of the 30m Rancher granted")
}

func TestTokenRelease(t *testing.T) {
	f := newTokenRancher(t)
	m := newTestManager(t, f, 3*time.Hour, nil)
	ctx := t.Context()
	_, err := m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	f.clock.Step(2*time.Hour + time.Minute)
	_, err = m.Token(ctx, "c-m-aaaa") // renewed: the first is retiring
	require.NoError(t, err)
	_, err = m.Token(ctx, "c-m-bbbb")
	require.NoError(t, err)

	require.NoError(t, m.Release(ctx, "c-m-aaaa"))
	assert.ElementsMatch(t, []string{"token-00001", "token-00002"}, f.DeletedTokens())
	assert.Equal(t, []string{"token-00003", "token-abcde"}, f.TokenNames())
	assert.Equal(t, 1, m.Live())

	require.NoError(t, m.Release(ctx, "c-m-aaaa"), "nothing left to release")
	require.NoError(t, m.Release(ctx, "c-m-never"))
	assert.Len(t, f.DeletedTokens(), 2)

	t.Run("a token already gone is released", func(t *testing.T) {
		f.DeleteToken("token-00003")
		require.NoError(t, m.Release(ctx, "c-m-bbbb"))
		assert.Zero(t, m.Live())
	})
	t.Run("a failed revocation is kept for the next release", func(t *testing.T) {
		_, err := m.Token(ctx, "c-m-cccc")
		require.NoError(t, err)
		f.SetAPIToken("") // the listing token is refused
		err = m.Release(ctx, "c-m-cccc")
		require.Error(t, err)
		assert.Equal(t, opTokensDelete, upstream.OperationOf(err))
		assert.Equal(t, 1, m.Live())
		f.SetAPIToken(testToken)
		require.NoError(t, m.Release(ctx, "c-m-cccc"))
		assert.Zero(t, m.Live())
	})
	t.Run("a cluster minted again after its release gets a new token", func(t *testing.T) {
		_, err := m.Token(ctx, "c-m-aaaa")
		require.NoError(t, err)
		assert.Contains(t, f.TokenNames(), fmt.Sprintf("token-%05d", len(f.creates())))
	})
}

func TestTokenErrorsAreClassified(t *testing.T) {
	echo := func(status int) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			_, _ = fmt.Fprintf(w, `{"type":"error","message":"token %s is bad: %s"}`,
				r.Header.Get("Authorization"), "token-00001:"+secretMark+"000")
		}
	}
	created := func(change func(o map[string]any)) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			o := map[string]any{"type": "token", "name": "token-00009", "clusterId": "c-m-aaaa",
				"token": "token-00009:" + secretMark + "9", "ttl": 3600000, "isDerived": true}
			change(o)
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(o)
		}
	}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the listing token left for another server: %s", r.URL)
	}))
	t.Cleanup(other.Close)
	for _, tc := range []struct {
		name    string
		answer  func(w http.ResponseWriter, r *http.Request)
		op      string
		kind    upstream.Kind
		revoked bool
	}{
		{"401", echo(401), opTokensCreate, upstream.KindAuth, false},
		{"403", echo(403), opTokensCreate, upstream.KindAuth, false},
		{"422", echo(422), opTokensCreate, upstream.KindServer, false},
		{"429", echo(429), opTokensCreate, upstream.KindThrottled, false},
		{"500", echo(500), opTokensCreate, upstream.KindServer, false},
		{"malformed", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"token":"token-1:` + secretMark))
		},
			opTokensCreate, upstream.KindInvalidResponse, false},
		{"wrong type", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"name":7}`)) },
			opTokensCreate, upstream.KindInvalidResponse, false},
		{"no value", created(func(o map[string]any) { delete(o, "token") }), opTokensCreate, upstream.KindInvalidResponse, true},
		{"value of another token", created(func(o map[string]any) { o["token"] = "token-x:" + secretMark }),
			opTokensCreate, upstream.KindInvalidResponse, true},
		{"other cluster", created(func(o map[string]any) { o["clusterId"] = "c-m-zzzz" }), opTokensCreate, upstream.KindInvalidResponse, true},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/v3/tokens", http.StatusTemporaryRedirect)
		},
			opTokensCreate, upstream.KindServer, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTokenRancher(t)
			f.Intercept(func(w http.ResponseWriter, r *http.Request, _ http.Handler) bool {
				if r.Method == http.MethodDelete {
					return false
				}
				tc.answer(w, r)
				return true
			})
			m := newTestManager(t, f, time.Hour, nil)
			_, err := m.Token(t.Context(), "c-m-aaaa")
			require.Error(t, err)
			var ue *upstream.Error
			require.ErrorAs(t, err, &ue)
			assert.Equal(t, tc.kind, ue.Kind, err.Error())
			assert.Equal(t, tc.op, ue.Operation)
			assertNoSecret(t, err.Error())
			assertNoSecret(t, m.logs.String())
			assert.Equal(t, tc.revoked, slices.Contains(f.requests(), "DELETE /v3/tokens/token-00009"),
				"an unusable new token is revoked")
			assert.Zero(t, m.Live())
		})
	}
}

func TestTokenErrorsOfEachOperation(t *testing.T) {
	f := newTokenRancher(t)
	m := newTestManager(t, f, time.Hour, nil)
	_, err := m.Token(t.Context(), "c-m-aaaa")
	require.NoError(t, err)
	f.Intercept(func(w http.ResponseWriter, r *http.Request, _ http.Handler) bool {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"message":"` + r.Header.Get("Authorization") + ` token-00001:` + secretMark + `"}`))
		return true
	})
	err = m.Release(t.Context(), "c-m-aaaa")
	assert.Equal(t, upstream.KindServer, upstream.KindOf(err))
	assert.Equal(t, opTokensDelete, upstream.OperationOf(err))
	assertNoSecret(t, err.Error())
	err = m.Adopt(t.Context(), "", nil)
	assert.Equal(t, upstream.KindServer, upstream.KindOf(err))
	assert.Equal(t, opTokensList, upstream.OperationOf(err))
	f.Intercept(func(w http.ResponseWriter, r *http.Request, _ http.Handler) bool {
		_, _ = w.Write([]byte(`{"type":"token"}`))
		return true
	})
	err = m.Adopt(t.Context(), "", nil)
	assert.Equal(t, upstream.KindInvalidResponse, upstream.KindOf(err), "not a collection")
	m.adopted = true // as after a successful Adopt: the errors of the other operations

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = m.Token(ctx, "c-m-bbbb")
	assert.Equal(t, upstream.KindCanceled, upstream.KindOf(err))

	bad := newTestManager(t, f, time.Hour, func() (string, error) { return "", errors.New("token file:/x: not set") })
	_, err = bad.Token(t.Context(), "c-m-aaaa")
	assert.Equal(t, upstream.KindConfig, upstream.KindOf(err))
	assert.Equal(t, opToken, upstream.OperationOf(err))

	f.Close()
	_, err = m.Token(t.Context(), "c-m-bbbb")
	assert.Equal(t, upstream.KindNetwork, upstream.KindOf(err))
	assert.Equal(t, opTokensCreate, upstream.OperationOf(err))
	assertNoSecret(t, m.logs.String())
}

func TestTokenManagerRefusesABadConfiguration(t *testing.T) {
	base, _ := url.Parse("https://rancher.example.com")
	tok := func() (string, error) { return testToken, nil }
	for name, build := range map[string]func() (*tokenManager, error){
		"no owner":    func() (*tokenManager, error) { return newTokenManager(base, nil, tok, "", time.Hour, nil, nil) },
		"owner space": func() (*tokenManager, error) { return newTokenManager(base, nil, tok, "a b", time.Hour, nil, nil) },
		"no ttl":      func() (*tokenManager, error) { return newTokenManager(base, nil, tok, "a", 0, nil, nil) },
		"no token":    func() (*tokenManager, error) { return newTokenManager(base, nil, nil, "a", time.Hour, nil, nil) },
		"no base":     func() (*tokenManager, error) { return newTokenManager(nil, nil, tok, "a", time.Hour, nil, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			_, err := build()
			require.Error(t, err)
		})
	}
}

// tokenRancher is the shared fake Rancher (internal/fake/rancher) as the
// token tests use it: tokens on a fake clock, named token-00001, ... with
// secrets carrying secretMark, the listing token (testToken) a login
// token (current, not deletable with itself), every request recorded.
type tokenRancher struct {
	*fakerancher.Fake
	clock *clocktesting.FakeClock
}

// secretMark is in every secret the fake mints; tests check it never
// appears in errors or logs.
const secretMark = "sEcReTmInTeD"

func newTokenRancher(t testing.TB) *tokenRancher {
	t.Helper()
	clock := clocktesting.NewFakeClock(time.Date(2026, 8, 21, 10, 0, 0, 0, time.UTC))
	f, err := fakerancher.New(fixturesDir, testToken,
		fakerancher.WithClock(clock), fakerancher.WithLoginAPIToken(), fakerancher.WithRecording(),
		fakerancher.WithTokenNames(func(n int) (string, string) {
			return fmt.Sprintf("token-%05d", n), fmt.Sprintf("%s%042d", secretMark, n)
		}))
	require.NoError(t, err)
	t.Cleanup(f.Close)
	return &tokenRancher{Fake: f, clock: clock}
}

// creates are the bodies of the POSTs to /v3/tokens, posts their
// Authorization headers, requests "METHOD path" of every request.
func (f *tokenRancher) creates() []map[string]any {
	var out []map[string]any
	for _, r := range f.Requests() {
		if r.Method == http.MethodPost && r.Path == "/v3/tokens" {
			var body map[string]any
			if err := json.Unmarshal(r.Body, &body); err != nil {
				body = map[string]any{"unreadable": string(r.Body)}
			}
			out = append(out, body)
		}
	}
	return out
}

func (f *tokenRancher) posts() []string {
	var out []string
	for _, r := range f.Requests() {
		if r.Method == http.MethodPost {
			out = append(out, r.Authorization)
		}
	}
	return out
}

func (f *tokenRancher) requests() []string {
	var out []string
	for _, r := range f.Requests() {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

type testManager struct {
	*tokenManager
	logs *bytes.Buffer
}

func newTestManager(t *testing.T, f *tokenRancher, ttl time.Duration, listingToken func() (string, error)) testManager {
	t.Helper()
	if listingToken == nil {
		listingToken = func() (string, error) { return testToken, nil }
	}
	logs := &bytes.Buffer{}
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	base, err := url.Parse(f.URL())
	require.NoError(t, err)
	m, err := newTokenManager(base, f.Client(), listingToken, "prod-a", ttl, f.clock.Now, logger)
	require.NoError(t, err)
	m.adopted = true // as after an Adopt with no Secrets (the Adopt tests call it)
	return testManager{tokenManager: m, logs: logs}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// assertNoSecret checks that no secret (minted or listing) is in s.
func assertNoSecret(t *testing.T, s string) {
	t.Helper()
	assert.NotContains(t, s, secretMark)
	assert.NotContains(t, s, strings.SplitN(testToken, ":", 2)[1])
}
