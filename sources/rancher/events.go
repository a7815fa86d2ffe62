package rancher

// Rancher's change events as a hint (sources.Hinter): the leader holds
// one websocket per source on norman's /v3/subscribe?resourceTypes=cluster,
// which shows every change of every cluster the listing token can list
// (rancher/norman v0.10.0 pkg/subscribe, store/proxy; rancher
// pkg/rbac/user_based.go), and each change, each (re)connect and each
// drop asks the inventory for a listing sooner. An event never changes the
// inventory: the listing is the only truth.
//
// What the server does, read from norman and rancher v2.9–v2.14: a text
// frame {"name": "resource.change"|"resource.remove"|"ping", "data": {...}}
// per event, with the v3 object (type cluster) as data; a ping every 5 s;
// no resume (a reconnect must be followed by a listing); the socket is cut
// when its shared watch ends (every 30 minutes per Rancher replica) or when
// 100 events wait for a slow reader; 404 "no resources types matched"
// before the upgrade when the cluster schema is not served (Rancher with
// its multi-cluster manager off, or a proxy that routes /v3 elsewhere).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// The subscriber's timing. A variable set of them is the tests'.
type eventTiming struct {
	// readTimeout is three of Rancher's 5 s pings: a socket silent for
	// longer is dead (a proxy that stopped forwarding).
	readTimeout time.Duration
	// backoff is the first and the longest wait before a reconnect after
	// a failure; a connection that lasted stable resets it.
	backoffMin, backoffMax, stable time.Duration
	// authBackoff is the wait after a 401 or 403: the token, or a proxy's
	// policy, must change first.
	authBackoff time.Duration
	// handshake bounds the upgrade.
	handshake time.Duration
}

var defaultEventTiming = eventTiming{
	readTimeout: 15 * time.Second,
	backoffMin:  time.Second, backoffMax: 30 * time.Second, stable: time.Minute,
	authBackoff: 5 * time.Minute,
	handshake:   10 * time.Second,
}

// maxEventFrame bounds one frame: a v3 cluster object with its
// annotations is tens of KiB.
const maxEventFrame = 8 << 20

// events is a source's subscriber and what /status and the metrics show
// of it.
type events struct {
	s      *Source
	timing eventTiming
	m      *eventMetrics

	mu     sync.Mutex
	status sources.HintStatus
}

// eventMetrics are argocd_cluster_discovery_rancher_events_*.
type eventMetrics struct {
	connected, disabled prometheus.Gauge
	received            *prometheus.CounterVec // by name: change, remove
	connects            prometheus.Counter
	failures            *prometheus.CounterVec // by kind
}

func newEventMetrics(reg prometheus.Registerer) (*eventMetrics, error) {
	ns := upstream.Namespace(sources.ProviderRancher)
	m := &eventMetrics{
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "events_connected",
			Help: "1 while the subscription to Rancher's cluster events (/v3/subscribe) is open."}),
		disabled: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "events_disabled",
			Help: "1 when Rancher does not serve /v3/subscribe (404): the source is polled only."}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_received_total",
			Help: "Cluster events received, by name (change, remove); each one asks for a listing sooner."}, []string{"name"}),
		connects: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "events_connects_total",
			Help: "Subscriptions opened; each one is followed by a listing (Rancher has no resume)."}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_failures_total",
			Help: "Subscriptions that could not be opened, or were cut other than by Rancher's routine close, by kind."}, []string{"kind"}),
	}
	for _, n := range []string{"change", "remove"} {
		m.received.WithLabelValues(n)
	}
	for _, k := range upstream.Kinds() {
		m.failures.WithLabelValues(string(k))
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.connected, m.disabled, m.received, m.connects, m.failures} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Hints runs the subscriber until ctx is cancelled (sources.Hinter); with
// events off it returns at once.
func (s *Source) Hints(ctx context.Context, hint func()) {
	if !s.cfg.EventsOn() {
		return
	}
	s.events.run(ctx, hint)
}

// HintStatus reports the subscriber (sources.Hinter).
func (s *Source) HintStatus() sources.HintStatus {
	e := s.events
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.status
	st.Enabled = s.cfg.EventsOn()
	return st
}

// run connects, reads and reconnects until ctx is cancelled. A 404 (no
// such stream) is asked again after the long wait a refusal gets.
func (e *events) run(ctx context.Context, hint func()) {
	log := e.s.log.With("stream", "/v3/subscribe")
	backoff := e.timing.backoffMin
	first := true
	for ctx.Err() == nil {
		c, err := e.dial(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var he *handshakeError
			switch {
			case errors.As(err, &he) && he.status == http.StatusNotFound:
				// a Rancher with its multi-cluster manager off, or one whose
				// ingress answers 404 during a rollout: asked again rarely
				if e.disable(err) {
					log.Warn("rancher does not serve its cluster events (404): the source is polled only, at its interval; asking again every "+
						e.timing.authBackoff.String(), "error", err.Error())
				}
				if !sleep(ctx, jitter(e.timing.authBackoff)) {
					return
				}
			case errors.As(err, &he) && (he.status == http.StatusUnauthorized || he.status == http.StatusForbidden):
				e.failed(upstream.KindAuth, err)
				log.Error("rancher refused the subscription to its cluster events; retrying in "+e.timing.authBackoff.String()+", polling meanwhile",
					"error", err.Error())
				if !sleep(ctx, jitter(e.timing.authBackoff)) {
					return
				}
			default:
				e.failed(upstream.Classify(err), err)
				log.Warn("cannot subscribe to rancher's cluster events; retrying, polling meanwhile", "error", err.Error(), "retryIn", backoff.String())
				if !sleep(ctx, fullJitter(backoff)) {
					return
				}
				backoff = min(2*backoff, e.timing.backoffMax)
			}
			continue
		}
		e.connected(first)
		first = false
		hint() // no resume: what changed while away is seen by a listing
		opened := time.Now()
		err = e.read(ctx, c, hint)
		_ = c.Close()
		e.disconnected()
		if ctx.Err() != nil {
			return
		}
		hint() // a change may have raced the close
		if time.Since(opened) >= e.timing.stable {
			backoff = e.timing.backoffMin // Rancher's routine close (30 minutes), or a lag drop
		} else {
			e.failed(upstream.Classify(err), err)
			backoff = min(2*backoff, e.timing.backoffMax)
		}
		log.Debug("rancher's cluster events stream closed; reconnecting", "error", err.Error(), "after", time.Since(opened).Round(time.Millisecond).String())
		if !sleep(ctx, fullJitter(backoff)) { // a short-lived connection backs off as a failed dial does
			return
		}
	}
}

// handshakeError is a refused upgrade: its HTTP status and Rancher's
// message, never a header.
type handshakeError struct {
	status int
	msg    string
}

func (e *handshakeError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("subscribe: HTTP %d", e.status)
	}
	return fmt.Sprintf("subscribe: HTTP %d: %s", e.status, e.msg)
}

// dial opens /v3/subscribe?resourceTypes=cluster with the listing's token
// (read again each time: it may rotate), CA and proxy (the environment's,
// as the listing's transport; norman's own dialer ignores both).
func (e *events) dial(ctx context.Context) (*websocket.Conn, error) {
	s := e.s
	token, err := readToken(s.cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	var caPEM []byte
	if s.cfg.CAFile != "" {
		if caPEM, err = readCAFile(s.cfg.CAFile); err != nil {
			return nil, fmt.Errorf("subscribe: caFile: %w", err)
		}
	}
	d := e.dialer(caPEM)
	u := *s.origin
	u.Scheme = map[string]string{"https": "wss", "http": "ws"}[u.Scheme]
	u.Path, u.RawQuery = "/v3/subscribe", url.Values{"resourceTypes": {"cluster"}}.Encode()
	h := http.Header{"Authorization": {"Bearer " + token}, "User-Agent": {"argocd-cluster-discovery"}}
	c, resp, err := d.DialContext(ctx, u.String(), h)
	if err != nil {
		if resp != nil {
			defer func() { _ = resp.Body.Close() }()
			return nil, &handshakeError{status: resp.StatusCode, msg: apiMessage(resp)}
		}
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	c.SetReadLimit(maxEventFrame)
	return c, nil
}

// dialer trusts what the listing trusts, through the listing's proxy.
func (e *events) dialer(caPEM []byte) *websocket.Dialer {
	d := &websocket.Dialer{HandshakeTimeout: e.timing.handshake, Proxy: http.ProxyFromEnvironment}
	if t, ok := e.s.transport(caPEM).(*http.Transport); ok {
		d.Proxy, d.NetDialContext = t.Proxy, t.DialContext
		if t.TLSClientConfig != nil {
			d.TLSClientConfig = t.TLSClientConfig.Clone()
		}
	} else if caPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		d.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if d.NetDialContext == nil {
		d.NetDialContext = (&net.Dialer{Timeout: e.timing.handshake}).DialContext
	}
	return d
}

// apiMessage is the message of a norman error body, on its first line and
// bounded, or "".
func apiMessage(resp *http.Response) string {
	var body struct {
		Message string `json:"message"`
	}
	if json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 4096)).Decode(&body) != nil {
		return ""
	}
	msg, _, _ := strings.Cut(body.Message, "\n")
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}

// frame is what the subscriber reads of a message.
type frame struct {
	Name string `json:"name"`
	Data struct {
		Type string `json:"type"`
	} `json:"data"`
}

// read reads frames until the socket fails (Rancher's routine close
// included) or ctx is cancelled: each cluster change or removal is a
// hint; each frame, a ping included, extends the read deadline.
func (e *events) read(ctx context.Context, c *websocket.Conn, hint func()) error {
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	for {
		if err := c.SetReadDeadline(time.Now().Add(e.timing.readTimeout)); err != nil {
			return err
		}
		_, msg, err := c.ReadMessage()
		if err != nil {
			return err
		}
		var f frame
		if json.Unmarshal(msg, &f) != nil || f.Data.Type != "cluster" {
			continue // a ping, or what a later Rancher adds
		}
		switch f.Name {
		case "resource.change", "resource.remove":
			e.received(f.Name)
			hint()
		}
	}
}

func (e *events) connected(first bool) {
	e.m.connected.Set(1)
	e.m.connects.Inc()
	e.m.disabled.Set(0)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.Connected, e.status.LastConnect, e.status.LastError, e.status.Disabled = true, time.Now(), "", ""
	if !first {
		e.status.Reconnects++
	}
}

func (e *events) disconnected() {
	e.m.connected.Set(0)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.Connected = false
}

func (e *events) received(name string) {
	e.m.received.WithLabelValues(map[string]string{"resource.change": "change", "resource.remove": "remove"}[name]).Inc()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.LastEvent = time.Now()
}

func (e *events) failed(kind upstream.Kind, err error) {
	e.m.failures.WithLabelValues(string(kind)).Inc()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.LastError = err.Error()
}

// disable reports a 404 to /v3/subscribe, and whether the stream was not
// reported disabled already.
func (e *events) disable(err error) bool {
	e.m.disabled.Set(1)
	e.m.failures.WithLabelValues(string(upstream.KindNotFound)).Inc()
	e.mu.Lock()
	defer e.mu.Unlock()
	was := e.status.Disabled != ""
	e.status.Disabled, e.status.LastError = "rancher answered 404 to /v3/subscribe: polling only", err.Error()
	return !was
}

// sleep waits d or until ctx is cancelled, and reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fullJitter is a wait drawn in [d/2, d].
func fullJitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// jitter is d ± 10%.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.9 + 0.2*rand.Float64()))
}
