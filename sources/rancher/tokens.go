package rancher

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rancher/norman/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// The operations of the token manager's errors.
const (
	opTokensCreate = "tokens.create" // POST /v3/tokens
	opTokensList   = "tokens.list"   // GET /v3/tokens, one request a page
	opTokensDelete = "tokens.delete" // DELETE /v3/tokens/<name>
)

const maxTokenAnswer = 8 << 20 // bytes read from one answer

// rancherToken is a listed /v3 token (rancher/rancher management v3 Token).
type rancherToken struct {
	Name        string `json:"name"`
	ClusterID   string `json:"clusterId"`
	Description string `json:"description"`
	Current     bool   `json:"current"`
	Expired     bool   `json:"expired"`
	IsDerived   bool   `json:"isDerived"`
	TTLMillis   int64  `json:"ttl"`
	CreatedTS   int64  `json:"createdTS"` // milliseconds since the epoch
}

type createdToken struct { // the answer to POST /v3/tokens, the only one with a value
	rancherToken
	Token string `json:"token"` // "<name>:<secret>", the bearer value
}

type tokenCollection struct { // a page of GET /v3/tokens
	types.Collection
	Data []rancherToken `json:"data"`
}

func (c *tokenCollection) collection() *types.Collection { return &c.Collection }
func (c *tokenCollection) items() int                    { return len(c.Data) }

type heldToken struct { // a token minted or adopted, and not revoked
	name   string
	value  string // the bearer value: never logged, never in an error
	issued time.Time
	ttl    time.Duration
	// written is when the cluster's Secret was first seen holding it
	// (Written, or Adopt); zero until then.
	written time.Time
}

func (h *heldToken) renewAt() time.Time { return h.issued.Add(h.ttl * 2 / 3) } // a third left
func (h *heldToken) expires() time.Time { return h.issued.Add(h.ttl) }

// clusterTokens are a cluster's tokens: the one Token returns and those it
// replaced. lock (a channel: waits honour the context) guards the fields.
type clusterTokens struct {
	lock     chan struct{}
	gone     bool // released and out of the map: a waiter takes a fresh entry
	current  *heldToken
	retiring []*heldToken
}

func (e *clusterTokens) unlock() { <-e.lock }

// tokenManager mints, renews, adopts and revokes one Rancher token per
// cluster, the bearer token Argo CD uses through Rancher's proxy or the
// cluster's authorized endpoint. The value of a token lives in the
// cluster's Secret and nowhere else that outlives the process: Rancher
// returns it only in the answer to its creation. So a leadership term
// begins with Adopt, which takes the tokens our Secrets hold as the
// current ones; Token hands out only a token adopted or minted in the
// current term, and nothing is revoked while a Secret may still hold it:
// a replaced token, and a token of this installation that no Secret held,
// go a grace period after the cluster's Secret was seen holding its
// replacement (Written, Sweep). Requests carry the listing token (read anew
// each time: a rotated file is picked up). Values never appear in errors or
// logs; names (the public part) do.
type tokenManager struct {
	origin       *url.URL
	tokensURL    string
	client       *http.Client
	listingToken func() (string, error)
	ownerID      string
	// source is the name of the source minting, in the marker (set once,
	// before the first Adopt).
	source string
	ttl    time.Duration
	// grace is how long a token stays live after its replacement was
	// written (a write of an earlier leader in flight, Argo CD's cache).
	grace   time.Duration
	now     func() time.Time
	log     *slog.Logger
	metrics *tokenMetrics

	adopting sync.RWMutex // Adopt's, shared by mints: Adopt never sees a token half created
	mu       sync.Mutex   // guards the fields below
	install  string       // the installation, in the marker (set by Adopt)
	adopted  bool         // Adopt succeeded this term: Token may hand out tokens
	clusters map[string]*clusterTokens
	held     map[string]bool   // names of the tokens adopted or minted, and not revoked
	orphans  map[string]orphan // by token name
	// relist is set when a create failed without telling whether Rancher
	// made the token (a timeout, a reset connection, a 5xx): Sweep lists
	// the tokens again and takes unknown ones of ours as orphans.
	relist bool
	// hold are the clusters whose token is not rotated before it expires:
	// served through their authorized endpoint while their agent is
	// disconnected (holdRotation).
	hold map[string]bool
}

// newTokenManager returns a manager for the Rancher server at base (no
// /v3). client trusts Rancher (nil: http.DefaultClient); redirects are not
// followed, so the listing token goes nowhere else. ownerID marks this
// deployment's tokens; ttl is asked for each (Rancher may cap it with its
// max-ttl setting); now is the clock (nil: time.Now). Its metrics are
// registered nowhere until the caller replaces them.
func newTokenManager(base *url.URL, client *http.Client, listingToken func() (string, error), ownerID string,
	ttl time.Duration, now func() time.Time, logger *slog.Logger) (*tokenManager, error) {
	switch {
	case base == nil || base.Host == "" || (base.Scheme != "https" && base.Scheme != "http"):
		return nil, errors.New("token manager: base must be the rancher server's http(s) url")
	case listingToken == nil || ttl.Milliseconds() <= 0:
		return nil, errors.New("token manager: a listing token and a positive ttl are required")
	case !markerValue(ownerID):
		return nil, errors.New("token manager: ownerID must be set, without spaces, '=' or control characters")
	}
	c := *cmp.Or(client, http.DefaultClient)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	m := &tokenManager{
		origin: &url.URL{Scheme: base.Scheme, Host: base.Host}, tokensURL: strings.TrimSuffix(base.String(), "/") + "/v3/tokens",
		client: &c, listingToken: listingToken, ownerID: ownerID, ttl: ttl, grace: defaultTokenGrace, now: now,
		log: cmp.Or(logger, slog.New(slog.DiscardHandler)), metrics: newTokenMetrics(),
		clusters: map[string]*clusterTokens{}, held: map[string]bool{}, orphans: map[string]orphan{},
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m, nil
}

// defaultTokenGrace is how long a replaced token stays live after its
// replacement was written.
const defaultTokenGrace = 10 * time.Minute

// markerValue reports whether v can be a value of a marker.
func markerValue(v string) bool {
	return v != "" && !strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '=' })
}

// errNotAdopted is Token's error before Adopt succeeded in this term.
var errNotAdopted = errors.New("the tokens our Secrets hold have not been adopted yet in this leadership term")

// Token returns the bearer value of the cluster's token: the current one
// (adopted or minted this term) while more than a third of its TTL is
// left, else a new one (concurrent calls mint once). A failed renewal
// returns the current token until it expires, and logs the error.
func (m *tokenManager) Token(ctx context.Context, clusterID string) (string, error) {
	if clusterID == "" {
		return "", failed(upstream.KindConfig, opTokensCreate, errors.New("create token: no cluster id"))
	}
	e, err := m.lock(ctx, clusterID, opTokensCreate)
	if err != nil {
		return "", err
	}
	defer e.unlock()
	m.mu.Lock()
	adopted := m.adopted
	m.mu.Unlock()
	if !adopted {
		return "", failed(upstream.KindOther, opTokensCreate, errNotAdopted)
	}
	now := m.now()
	cur := e.current
	if cur != nil && now.Before(cur.renewAt()) {
		return cur.value, nil
	}
	m.mu.Lock()
	hold := m.hold[clusterID]
	m.mu.Unlock()
	if cur != nil && hold && now.Before(cur.expires()) {
		return cur.value, nil // a new token would not reach the endpoint
	}
	h, err := m.mint(ctx, clusterID, cur != nil)
	if err != nil {
		if cur != nil && now.Before(cur.expires()) {
			m.log.Warn("could not renew the cluster's rancher token; using the current one until it expires",
				"cluster", clusterID, "token", cur.name, "expires", cur.expires(), "err", err)
			return cur.value, nil
		}
		return "", err
	}
	if cur != nil {
		e.retiring = append(e.retiring, cur)
	}
	e.current = h
	return h.value, nil
}

// holdRotation sets the clusters whose token is not rotated before it
// expires: Rancher copies a token to a cluster's authorized endpoint
// through the cluster's agent (rancher clusterauthtoken), so a token
// minted while the agent is disconnected is refused there, while the
// current one still works. The source sets them at each listing.
func (m *tokenManager) holdRotation(clusters map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hold = clusters
}

// Release revokes and forgets the cluster's tokens (it has left, or its
// Secret was deleted). One not revoked is kept for the next call.
func (m *tokenManager) Release(ctx context.Context, clusterID string) error {
	e, err := m.lock(ctx, clusterID, opTokensDelete)
	if err != nil {
		return err
	}
	defer e.unlock()
	if e.current != nil {
		e.retiring, e.current = append(e.retiring, e.current), nil
	}
	if err := m.retire(ctx, clusterID, e, m.now(), "released"); err != nil {
		return fmt.Errorf("release tokens of cluster %s: %w", clusterID, err)
	}
	m.mu.Lock()
	delete(m.clusters, clusterID) // e is the entry: only Release removes one, under e's lock
	e.gone = true
	m.mu.Unlock()
	return nil
}

// Live is the number of tokens adopted or minted and not yet revoked.
func (m *tokenManager) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.held)
}

// lock takes the cluster's entry, created if need be.
func (m *tokenManager) lock(ctx context.Context, clusterID, op string) (*clusterTokens, error) {
	for {
		m.mu.Lock()
		e := m.clusters[clusterID]
		if e == nil {
			e = &clusterTokens{lock: make(chan struct{}, 1)}
			m.clusters[clusterID] = e
		}
		m.mu.Unlock()
		select {
		case e.lock <- struct{}{}:
		case <-ctx.Done():
			return nil, m.fail(op, "wait for the cluster's token", ctx.Err())
		}
		if !e.gone {
			return e, nil
		}
		e.unlock()
	}
}

// retire revokes the cluster's retiring tokens. One that cannot be
// revoked is kept for the next call (the first such error is returned),
// or forgotten once expired (Rancher purges expired tokens).
func (m *tokenManager) retire(ctx context.Context, clusterID string, e *clusterTokens, now time.Time, why string) error {
	var first error
	left := e.retiring[:0]
	for _, h := range e.retiring {
		err := m.revoke(ctx, clusterID, h.name, why)
		switch {
		case err == nil:
		case now.Before(h.expires()):
			m.log.Warn("could not revoke a rancher token; trying again later", "cluster", clusterID, "token", h.name, "err", err)
			left, first = append(left, h), cmp.Or(first, err)
		default:
			m.log.Warn("could not revoke an expired rancher token; forgetting it", "cluster", clusterID, "token", h.name, "err", err)
			m.forget(h.name)
		}
	}
	clear(e.retiring[len(left):])
	e.retiring = left
	return first
}

func (m *tokenManager) forget(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held, name)
	m.metrics.live.Set(float64(len(m.held)))
}

// mint creates a token for the cluster (renewal: it replaces one).
func (m *tokenManager) mint(ctx context.Context, clusterID string, renewal bool) (*heldToken, error) {
	m.adopting.RLock()
	defer m.adopting.RUnlock()
	m.mu.Lock()
	k := marker{owner: m.ownerID, install: m.install, source: m.source, cluster: clusterID}
	m.mu.Unlock()
	body, _ := json.Marshal(map[string]any{ // strings and a number: cannot fail
		"type": "token", "clusterId": clusterID, "ttl": m.ttl.Milliseconds(), "description": k.String(),
	})
	what := "create token for cluster " + clusterID
	issued := m.now()
	var tok createdToken
	if err := m.do(ctx, opTokensCreate, what, http.MethodPost, m.tokensURL, body, &tok); err != nil {
		if ambiguous(err) {
			m.mu.Lock()
			m.relist = true // Rancher may have created it: the next Sweep looks
			m.mu.Unlock()
		}
		return nil, err
	}
	if why := checkCreated(&tok, clusterID); why != "" {
		if tok.Name != "" { // a token was created all the same
			if err := m.revoke(ctx, clusterID, tok.Name, "unusable"); err != nil {
				m.log.Warn("could not revoke an unusable new rancher token", "cluster", clusterID, "token", tok.Name, "err", err)
			}
		}
		return nil, invalid(opTokensCreate, "%s: %s", what, why)
	}
	h := &heldToken{name: tok.Name, value: tok.Token, issued: issued, ttl: m.ttl}
	if d := time.Duration(tok.TTLMillis) * time.Millisecond; d > 0 && d < h.ttl {
		h.ttl = d // Rancher clamped it to its max-ttl setting
	}
	m.mu.Lock()
	m.held[h.name] = true // before the adopting lock is released
	m.metrics.live.Set(float64(len(m.held)))
	m.mu.Unlock()
	m.metrics.mints.WithLabelValues(map[bool]string{false: "new", true: "renewal"}[renewal]).Inc()
	m.log.Info("minted a rancher token", "cluster", clusterID, "token", h.name, "ttl", h.ttl, "renewAt", h.renewAt())
	return h, nil
}

// checkCreated says why a POST's answer is no usable token for the
// cluster, or "". It never quotes the value.
func checkCreated(t *createdToken, clusterID string) string {
	switch {
	case t.Name == "" || strings.ContainsAny(t.Name, ":/?# "):
		return "the answer has no valid token name"
	case !strings.HasPrefix(t.Token, t.Name+":") || len(t.Token) == len(t.Name)+1:
		return "the answer has no token value for " + t.Name
	case t.ClusterID != clusterID:
		return fmt.Sprintf("token %s is scoped to cluster %q, not %s", t.Name, t.ClusterID, clusterID)
	case t.Expired:
		return fmt.Sprintf("token %s is already expired", t.Name)
	}
	return ""
}

// revoke deletes the token and forgets it; one already gone is revoked.
// why is the reason label of the revocations metric.
func (m *tokenManager) revoke(ctx context.Context, clusterID, name, why string) error {
	err := m.do(ctx, opTokensDelete, "revoke token "+name, http.MethodDelete, m.tokensURL+"/"+url.PathEscape(name), nil, nil)
	if err == nil {
		m.forget(name)
		m.metrics.revocations.WithLabelValues(why).Inc()
		m.log.Info("revoked a rancher token", "cluster", clusterID, "token", name, "reason", why)
	}
	return err
}

// do sends one request authenticated by the listing token and decodes a
// 2xx answer into out, if set. A 404 or 410 on DELETE is success. Errors
// never quote the answer: Rancher's may echo a token.
func (m *tokenManager) do(ctx context.Context, op, what, method, link string, body []byte, out any) error {
	err := m.send(ctx, op, what, method, link, body, out)
	if err != nil {
		m.metrics.failures.WithLabelValues(op).Inc()
	}
	return err
}

func (m *tokenManager) send(ctx context.Context, op, what, method, link string, body []byte, out any) error {
	bearer, err := m.listingToken()
	if err != nil {
		return failed(upstream.KindConfig, opToken, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, link, bytes.NewReader(body)) // nil: http.NoBody
	if err != nil {
		return failed(upstream.KindConfig, op, fmt.Errorf("%s: invalid request", what))
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		return m.fail(op, what, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxTokenAnswer))
		_ = resp.Body.Close()
	}()
	code := resp.StatusCode
	switch {
	case method == http.MethodDelete && (code == http.StatusNotFound || code == http.StatusGone):
		return nil
	case code < 200 || code > 299:
		return m.failStatus(op, what, code)
	case out == nil:
		return nil
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, maxTokenAnswer)).Decode(out)
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return invalid(op, "%s: truncated or empty answer", what)
	case err != nil:
		return m.fail(op, what, err)
	}
	return nil
}

// fail classifies a failed request of op (see failTransport).
func (m *tokenManager) fail(op, what string, err error) error { return failTransport(op, what, err) }

// failStatus is the error of an answer with a status other than 2xx.
func (m *tokenManager) failStatus(op, what string, code int) error {
	kind := upstream.ForStatus(code)
	status := fmt.Sprintf("%d %s", code, http.StatusText(code))
	if kind == upstream.KindAuth {
		return failed(kind, op, fmt.Errorf("%s: rancher %s rejected the listing token (%s)", what, m.origin, status))
	}
	return failed(kind, op, fmt.Errorf("%s: rancher answered %s", what, status))
}
