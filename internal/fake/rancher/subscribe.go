package rancher

// /v3/subscribe as norman serves it (rancher/norman v0.10.0
// pkg/subscribe/handler.go, pkg/broadcast/broadcaster.go,
// store/proxy/proxy_store.go): a websocket authenticated as the rest of
// /v3, showing each token the clusters it may list (SetTokenClusters); 404 "no resources types matched" before the upgrade when no
// resourceTypes value is a schema the fake knows; a text frame
// {"name": "resource.change"|"resource.remove", "data": <v3 cluster>} for
// every change of a cluster the token can list, and {"name": "ping",
// "data": {}} every 5 s; no resume and no initial burst (a connection that
// joins a running shared watch gets none); the socket closed without a
// close frame when the shared watch ends (every 30 minutes) or when 100
// events wait for a slow reader. What the client sends is read and
// discarded.

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// The defaults of the subscription, Rancher's.
const (
	subscribePing     = 5 * time.Second
	subscribeLifetime = 30 * time.Minute
	subscribeBuffer   = 100
)

// subscribeState is the fake's subscribers and their settings.
type subscribeState struct {
	subs     map[*subscriber]struct{}
	connects int
	dropped  int // subscribers cut for lagging
	noStream bool
	ping     time.Duration
	lifetime time.Duration
	// visible are the clusters each token (by name) may list and see
	// changes of; a token not in it sees every cluster (an admin's)
	visible map[string]map[string]bool
}

// subscriber is one socket: the events wait in out (subscribeBuffer);
// tok is the token it authenticated with.
type subscriber struct {
	tok  *fakeToken
	out  chan []byte
	done chan struct{}
	once sync.Once
}

func (s *subscriber) cut() { s.once.Do(func() { close(s.done) }) }

// WithSubscribeTiming sets the subscription's ping interval and the life
// of a socket before the fake cuts it, as Rancher's shared watch ends
// (defaults 5 s and 30 minutes).
func WithSubscribeTiming(ping, lifetime time.Duration) Option {
	return func(f *Fake) { f.ping, f.lifetime = ping, lifetime }
}

// SetTokenClusters makes the token named name see only the clusters ids,
// in the cluster list and in /v3/subscribe, as the token of a Rancher user
// with memberships in those clusters only (Rancher filters both by the
// same rule, pkg/rbac/user_based.go); no ids: every cluster again.
func (f *Fake) SetTokenClusters(name string, ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(ids) == 0 {
		delete(f.visible, name)
		return
	}
	if f.visible == nil {
		f.visible = map[string]map[string]bool{}
	}
	f.visible[name] = map[string]bool{}
	for _, id := range ids {
		f.visible[name][id] = true
	}
}

// sees reports whether the token t may see cluster id. Called with f.mu
// held.
func (f *Fake) sees(t *fakeToken, id string) bool {
	if t == nil {
		return true
	}
	set, ok := f.visible[t.Name]
	return !ok || set[id]
}

// SetSubscribeServed makes /v3/subscribe answer 404 "no resources types
// matched" (false), as a Rancher whose cluster schema is not served
// there, or serve again (true).
func (f *Fake) SetSubscribeServed(served bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noStream = !served
}

// Subscribers counts the open sockets; SubscribeConnects the sockets
// opened so far; SubscribersDropped those cut for lagging.
func (f *Fake) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// SubscribeConnects counts the sockets opened so far.
func (f *Fake) SubscribeConnects() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connects
}

// SubscribersDropped counts the sockets cut because 100 events waited.
func (f *Fake) SubscribersDropped() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

// CutSubscribers closes every socket, as Rancher does when its shared
// watch ends.
func (f *Fake) CutSubscribers() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		s.cut()
	}
}

// publish queues an event of cluster id for every subscriber whose user
// may see it; one whose buffer is full is cut, as norman's broadcaster
// unsubscribes it. Called with f.mu held.
func (f *Fake) publish(name, id string, data []byte) {
	if len(f.subs) == 0 {
		return
	}
	msg, _ := json.Marshal(map[string]json.RawMessage{"name": json.RawMessage(`"` + name + `"`), "data": data})
	for s := range f.subs {
		if !f.sees(s.tok, id) {
			continue
		}
		select {
		case s.out <- msg:
		default:
			f.dropped++
			delete(f.subs, s)
			s.cut()
		}
	}
}

// changed publishes resource.change for the clusters set and
// resource.remove for those removed (old: their objects before). Called
// with f.mu held.
func (f *Fake) changed(set []Cluster, removed []Cluster) {
	for _, c := range set {
		if b, err := f.clusterJSON(c); err == nil {
			f.publish("resource.change", c.ID, b)
		}
	}
	for _, c := range removed {
		if b, err := f.clusterJSON(c); err == nil {
			f.publish("resource.remove", c.ID, b)
		}
	}
}

// serveSubscribe answers GET /v3/subscribe. Called without f.mu.
func (f *Fake) serveSubscribe(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	down, noStream := f.down, f.noStream
	caller, msg := f.authorize(r, "", false)
	ping, lifetime := cmp.Or(f.ping, subscribePing), cmp.Or(f.lifetime, subscribeLifetime)
	f.mu.Unlock()
	switch {
	case down:
		writeRancher(w, http.StatusInternalServerError, []byte(`{"type":"error","status":"500","code":"ServerError","message":"Internal error occurred"}`))
		return
	case msg != "":
		writeUnauthorized(w, msg)
		return
	case noStream || !slices.Contains(r.URL.Query()["resourceTypes"], "cluster"):
		writeAPIError(w, http.StatusNotFound, "NotFound", "no resources types matched")
		return
	}
	c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade answered
	}
	s := &subscriber{tok: caller, out: make(chan []byte, subscribeBuffer), done: make(chan struct{})}
	f.mu.Lock()
	if f.subs == nil {
		f.subs = map[*subscriber]struct{}{}
	}
	f.subs[s] = struct{}{}
	f.connects++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.subs, s)
		f.mu.Unlock()
		_ = c.Close() // no close frame, as norman's handler
	}()
	go func() { // the client's messages are read and discarded
		for {
			if _, _, err := c.NextReader(); err != nil {
				s.cut()
				return
			}
		}
	}()
	pings := time.NewTicker(ping)
	defer pings.Stop()
	end := time.NewTimer(lifetime)
	defer end.Stop()
	for {
		var frame []byte
		select {
		case <-s.done:
			return
		case <-end.C:
			return
		case <-pings.C:
			frame = []byte(`{"name":"ping","data":{}}`)
		case frame = <-s.out:
		}
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if c.WriteMessage(websocket.TextMessage, frame) != nil {
			return
		}
	}
}
