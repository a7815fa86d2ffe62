package rancher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

func TestTokenMintOncePerClusterUnderConcurrency(t *testing.T) {
	f := newFakeTokens(t)
	f.with(func(f *fakeTokens) { f.delay = 20 * time.Millisecond })
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
	f := newFakeTokens(t)
	rotated := "token-zzzzz:" + strings.Repeat("r", 54)
	f.with(func(f *fakeTokens) { f.bearer = rotated })
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
	f := newFakeTokens(t)
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
	assert.Contains(t, f.names(), "token-00001", "the old one stays until the new one is in use")
	assert.Equal(t, 2, m.Live())

	v, err = m.Token(ctx, "c-m-aaaa")
	require.NoError(t, err)
	assert.Equal(t, second, v)
	assert.Empty(t, f.deleted(), "not revoked at the next call: only once the Secret holds the new one")

	t.Run("a failed renewal serves the current token until it expires", func(t *testing.T) {
		f.clock.Step(2*time.Hour + time.Minute)
		f.with(func(f *fakeTokens) { f.bearer = "nobody" })
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
	f := newFakeTokens(t)
	f.with(func(f *fakeTokens) { f.maxTTL = 30 * time.Minute })
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
	f := newFakeTokens(t)
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
	assert.ElementsMatch(t, []string{"token-00001", "token-00002"}, f.deleted())
	assert.Equal(t, []string{"token-00003", "token-abcde"}, f.names())
	assert.Equal(t, 1, m.Live())

	require.NoError(t, m.Release(ctx, "c-m-aaaa"), "nothing left to release")
	require.NoError(t, m.Release(ctx, "c-m-never"))
	assert.Len(t, f.deleted(), 2)

	t.Run("a token already gone is released", func(t *testing.T) {
		f.with(func(f *fakeTokens) { delete(f.tokens, "token-00003") })
		require.NoError(t, m.Release(ctx, "c-m-bbbb"))
		assert.Zero(t, m.Live())
	})
	t.Run("a failed revocation is kept for the next release", func(t *testing.T) {
		_, err := m.Token(ctx, "c-m-cccc")
		require.NoError(t, err)
		f.with(func(f *fakeTokens) { f.bearer = "nobody" })
		err = m.Release(ctx, "c-m-cccc")
		require.Error(t, err)
		assert.Equal(t, opTokensDelete, upstream.OperationOf(err))
		assert.Equal(t, 1, m.Live())
		f.with(func(f *fakeTokens) { f.bearer = testToken })
		require.NoError(t, m.Release(ctx, "c-m-cccc"))
		assert.Zero(t, m.Live())
	})
	t.Run("a cluster minted again after its release gets a new token", func(t *testing.T) {
		_, err := m.Token(ctx, "c-m-aaaa")
		require.NoError(t, err)
		assert.Contains(t, f.names(), fmt.Sprintf("token-%05d", len(f.creates())))
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
			f := newFakeTokens(t)
			f.with(func(f *fakeTokens) {
				f.intercept = func(w http.ResponseWriter, r *http.Request) bool {
					if r.Method == http.MethodDelete {
						return false
					}
					tc.answer(w, r)
					return true
				}
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
	f := newFakeTokens(t)
	m := newTestManager(t, f, time.Hour, nil)
	_, err := m.Token(t.Context(), "c-m-aaaa")
	require.NoError(t, err)
	f.with(func(f *fakeTokens) {
		f.intercept = func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"message":"` + r.Header.Get("Authorization") + ` token-00001:` + secretMark + `"}`))
			return true
		}
	})
	err = m.Release(t.Context(), "c-m-aaaa")
	assert.Equal(t, upstream.KindServer, upstream.KindOf(err))
	assert.Equal(t, opTokensDelete, upstream.OperationOf(err))
	assertNoSecret(t, err.Error())
	err = m.Adopt(t.Context(), "", nil)
	assert.Equal(t, upstream.KindServer, upstream.KindOf(err))
	assert.Equal(t, opTokensList, upstream.OperationOf(err))
	f.with(func(f *fakeTokens) {
		f.intercept = func(w http.ResponseWriter, r *http.Request) bool {
			_, _ = w.Write([]byte(`{"type":"token"}`))
			return true
		}
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

	f.srv.Close()
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
