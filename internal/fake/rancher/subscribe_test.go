package rancher

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newSubscribeRancher is a fake with no kube-apiserver behind it.
func newSubscribeRancher(t *testing.T, opts ...Option) *Fake {
	t.Helper()
	f, err := New(filepath.Join("..", "..", "..", "testdata", "fixtures", "rancher"), apiToken, opts...)
	require.NoError(t, err)
	t.Cleanup(f.Close)
	return f
}

// subscribe dials the fake's /v3/subscribe with query and token.
func subscribe(t *testing.T, f *Fake, query, token string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	u := "ws" + strings.TrimPrefix(f.URL(), "http") + "/v3/subscribe" + query
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	c, resp, err := websocket.DefaultDialer.Dial(u, h)
	if c != nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, resp, err
}

// next reads the next frame that is not a ping, within d.
func next(t *testing.T, c *websocket.Conn, d time.Duration) (name string, data map[string]any) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	for {
		_, msg, err := c.ReadMessage()
		require.NoError(t, err)
		var f struct {
			Name string         `json:"name"`
			Data map[string]any `json:"data"`
		}
		require.NoError(t, json.Unmarshal(msg, &f), string(msg))
		if f.Name != "ping" {
			return f.Name, f.Data
		}
	}
}

// TestSubscribeRefusals: the handshake fails as Rancher's: 401 without a
// valid token, 404 when no resource type matches or the stream is not
// served, 500 when Rancher is down.
func TestSubscribeRefusals(t *testing.T) {
	f := newSubscribeRancher(t)
	for _, tc := range []struct {
		name, query, token string
		setup              func()
		want               int
	}{
		{"no token", "?resourceTypes=cluster", "", nil, http.StatusUnauthorized},
		{"a wrong token", "?resourceTypes=cluster", "token-fake0:wrong", nil, http.StatusUnauthorized},
		{"no resource type matched", "?resourceTypes=nosuchtype", apiToken, nil, http.StatusNotFound},
		{"not served", "?resourceTypes=cluster", apiToken, func() { f.SetSubscribeServed(false) }, http.StatusNotFound},
		{"down", "?resourceTypes=cluster", apiToken, func() { f.SetSubscribeServed(true); f.SetDown(true) }, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			_, resp, err := subscribe(t, f, tc.query, tc.token)
			require.ErrorIs(t, err, websocket.ErrBadHandshake)
			require.NotNil(t, resp)
			assert.Equal(t, tc.want, resp.StatusCode)
		})
	}
	assert.Zero(t, f.SubscribeConnects())
}

// TestSubscribeEvents: a set cluster is a resource.change with its v3
// object, a removed one a resource.remove with its last object; pings
// come at the interval; nothing is replayed to a socket opened after.
func TestSubscribeEvents(t *testing.T) {
	f := newSubscribeRancher(t, WithSubscribeTiming(50*time.Millisecond, time.Hour))
	c, _, err := subscribe(t, f, "?resourceTypes=cluster", apiToken)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.Subscribers() == 1 }, 5*time.Second, 10*time.Millisecond)

	f.Set(Cluster{ID: "c-m-events01", Name: "events-one", State: "provisioning"})
	name, data := next(t, c, 5*time.Second)
	assert.Equal(t, "resource.change", name)
	assert.Equal(t, "cluster", data["type"])
	assert.Equal(t, "c-m-events01", data["id"])
	assert.Equal(t, "provisioning", data["state"])

	f.Change([]Cluster{{ID: "c-m-events01", Name: "events-one", State: "active"}})
	_, data = next(t, c, 5*time.Second)
	assert.Equal(t, "active", data["state"])

	f.Remove("c-m-events01")
	name, data = next(t, c, 5*time.Second)
	assert.Equal(t, "resource.remove", name)
	assert.Equal(t, "c-m-events01", data["id"])

	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, msg, err := c.ReadMessage()
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"ping","data":{}}`, string(msg))

	late, _, err := subscribe(t, f, "?resourceTypes=cluster", apiToken)
	require.NoError(t, err)
	require.NoError(t, late.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	for {
		_, msg, err := late.ReadMessage()
		if err != nil {
			break // the deadline: pings only, no replay
		}
		assert.JSONEq(t, `{"name":"ping","data":{}}`, string(msg))
	}
	assert.Equal(t, 2, f.SubscribeConnects())
}

// TestSubscribeCuts: the socket ends without a close frame at the end of
// its life, when cut, and when 100 events wait for a reader that does not
// read.
func TestSubscribeCuts(t *testing.T) {
	f := newSubscribeRancher(t, WithSubscribeTiming(time.Hour, 200*time.Millisecond))
	c, _, err := subscribe(t, f, "?resourceTypes=cluster", apiToken)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, _, err = c.ReadMessage()
	require.Error(t, err, "closed at the end of its life")
	assert.False(t, websocket.IsCloseError(err, websocket.CloseNormalClosure), "no close frame: %v", err)

	f = newSubscribeRancher(t, WithSubscribeTiming(time.Hour, time.Hour))
	c, _, err = subscribe(t, f, "?resourceTypes=cluster", apiToken)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.Subscribers() == 1 }, 5*time.Second, 10*time.Millisecond)
	f.CutSubscribers()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, _, err = c.ReadMessage()
	require.Error(t, err, "cut")

	// a reader that never reads: the fake's writer blocks once the socket's
	// buffers are full, then 100 events wait and the subscriber is cut
	_, _, err = subscribe(t, f, "?resourceTypes=cluster", apiToken)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.Subscribers() == 1 }, 5*time.Second, 10*time.Millisecond)
	big := strings.Repeat("x", 64<<10)
	for i := 0; f.SubscribersDropped() == 0 && i < 5000; i++ {
		f.Set(Cluster{ID: "c-m-flood", Name: "flood", State: "active", Message: big})
	}
	assert.Equal(t, 1, f.SubscribersDropped(), "cut for lagging")
	assert.Zero(t, f.Subscribers())
}

// TestSubscribeVisibility: a token sees, in the list and on the socket,
// only the clusters it may list; another token every cluster.
func TestSubscribeVisibility(t *testing.T) {
	f := newSubscribeRancher(t, WithSubscribeTiming(time.Hour, time.Hour))
	member := f.AddToken(Token{Name: "token-membr", Secret: strings.Repeat("m", 54)})
	f.SetTokenClusters("token-membr", "c-m-mine0001")
	mine, _, err := subscribe(t, f, "?resourceTypes=cluster", member)
	require.NoError(t, err)
	admin, _, err := subscribe(t, f, "?resourceTypes=cluster", apiToken)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.Subscribers() == 2 }, 5*time.Second, 10*time.Millisecond)

	f.Set(Cluster{ID: "c-m-other001", Name: "other", State: "active"})
	f.Set(Cluster{ID: "c-m-mine0001", Name: "mine", State: "active"})
	_, data := next(t, mine, 5*time.Second)
	assert.Equal(t, "c-m-mine0001", data["id"], "the other cluster's change is not shown to the member")
	_, data = next(t, admin, 5*time.Second)
	assert.Equal(t, "c-m-other001", data["id"])
	_, data = next(t, admin, 5*time.Second)
	assert.Equal(t, "c-m-mine0001", data["id"])

	list := func(token string) []string {
		req, err := http.NewRequest(http.MethodGet, f.URL()+"/v3/clusters", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		var col struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&col))
		var ids []string
		for _, c := range col.Data {
			ids = append(ids, c.ID)
		}
		return ids
	}
	assert.Equal(t, []string{"c-m-mine0001"}, list(member), "the list by the same rule")
	assert.ElementsMatch(t, []string{"c-m-mine0001", "c-m-other001"}, list(apiToken))
}
