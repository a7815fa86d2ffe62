package rancher

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// The fake's tokens are Rancher's tokens.management.cattle.io of one user,
// as pkg/auth/tokens serves them under /v3/tokens: the API token the
// listing uses (an API key, never expiring) and the tokens derived from
// it with POST /v3/tokens. A token with a clusterId is scoped to that
// cluster: Rancher's authenticator (pkg/auth/requests, "clusterID does not
// match") refuses it on every route but /k8s/clusters/<that id>, so /v3
// answers it 401. A token past its ttl is refused everywhere and listed
// with expired: true until it is deleted.

const (
	fakeUserID = "user-e2e01"
	// tokenAlphabet is wrangler's randomtoken and GenerateName alphabet.
	tokenAlphabet = "bcdfghjklmnpqrstvwxz2456789"
	tokenLabel    = "authn.management.cattle.io/token-userId"
)

// fakeToken is one token: Name:Secret is its bearer value.
type fakeToken struct {
	Name, Secret, ClusterID, Description, UserID string
	TTL                                          time.Duration // 0: never expires
	Created                                      time.Time
	// Synced is a token scoped to a cluster that Rancher copied to the
	// cluster's authorized endpoint (rancher clusterauthtoken, through the
	// cluster's agent): done at creation while the agent is connected, else
	// when it connects again. The endpoint accepts only synced tokens.
	Synced bool
	// Login is a login (session) token, not derived (WithLoginAPIToken).
	Login bool
}

// tokenState is the fake's part that the tokens API keeps, under f.mu.
type tokenState struct {
	tokens           map[string]*fakeToken // by name; deleted ones are gone
	apiToken         string                // the API token's name
	clock            clock.PassiveClock    // WithClock; nil: the wall clock
	skew             time.Duration         // AdvanceClock
	created, deleted int                   // through the API
	// deletedNames are the names of the tokens deleted through the API,
	// in order.
	deletedNames []string
	// names and seq name the tokens the fake creates (WithTokenNames).
	names func(n int) (name, secret string)
	seq   int
	// loginAPIToken: the API token is a login token (WithLoginAPIToken).
	loginAPIToken bool
	// pageSize is the most tokens a page of GET /v3/tokens holds (0: 1000).
	pageSize int
	// mintDelay is how long the answer to POST /v3/tokens waits.
	mintDelay time.Duration
	// createdFor counts the tokens created through the API, per clusterId
	createdFor map[string]int
	// maxTTL is Rancher's auth-token-max-ttl-minutes setting: a created
	// token's ttl is cut to it (0: no limit).
	maxTTL time.Duration
	// refuseMints makes POST /v3/tokens answer 403, as Rancher does when
	// the user lost the right to create tokens.
	refuseMints bool
	// onRevoke, when set, is called with the bearer value of each token
	// deleted through the API, before the answer (under f.mu: it must not
	// call the fake).
	onRevoke func(bearer string)
}

// OnRevoke sets the function called with each revoked token's value.
func (f *Fake) OnRevoke(fn func(bearer string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onRevoke = fn
}

// generateKubeconfig answers POST /v3/clusters/<id>?action=generateKubeconfig
// as Rancher does with its kubeconfig-generate-token setting on (its
// default): a token scoped to that cluster is enough (the route names the
// cluster), and the kubeconfig carries a new token of the same user,
// unscoped unless the cluster's authorized endpoint is on, valid 30 days
// (kubeconfig-token-ttl-minutes). Called with f.mu held.
func (f *Fake) generateKubeconfig(w http.ResponseWriter, r *http.Request, id string) {
	if _, msg := f.authorize(r, id, false); msg != "" {
		writeUnauthorized(w, msg)
		return
	}
	c, ok := f.clusters[id]
	if !ok {
		writeAPIError(w, http.StatusNotFound, "NotFound", "clusters.management.cattle.io \""+id+"\" not found")
		return
	}
	scope := ""
	if c.ACE {
		scope = id
	}
	t := f.newToken(scope, "Kubeconfig token", 30*24*time.Hour)
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: %q\n  cluster:\n    server: %q\nusers:\n- name: %q\n  user:\n    token: %q\n",
		c.Name, f.srv.URL+proxyPrefix+id, c.Name, t.Name+":"+t.Secret)
	b, _ := json.Marshal(map[string]string{"type": "generateKubeConfigOutput", "baseType": "generateKubeConfigOutput", "config": cfg})
	writeRancher(w, http.StatusOK, b)
}

// RefuseMints makes token creation fail (403) or work again.
func (f *Fake) RefuseMints(refuse bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuseMints = refuse
}

// DropTokens deletes the tokens scoped to cluster, as an administrator
// would in Rancher's UI.
func (f *Fake) DropTokens(cluster string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, t := range f.tokens {
		if t.ClusterID == cluster {
			delete(f.tokens, name)
		}
	}
}

// SetMaxTTL sets Rancher's maximum token lifetime for tokens created from
// now on.
func (f *Fake) SetMaxTTL(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.maxTTL = d
}

// initTokens registers the API token, "token-xxxxx:<secret>".
func (f *Fake) initTokens(apiToken string) {
	f.tokens = map[string]*fakeToken{}
	f.setAPIToken(apiToken)
}

// setAPIToken replaces the API token by apiToken ("": none). Called with
// f.mu held (or before the fake serves).
func (f *Fake) setAPIToken(apiToken string) {
	delete(f.tokens, f.apiToken)
	f.apiToken = ""
	if apiToken == "" {
		return
	}
	name, secret, _ := strings.Cut(apiToken, ":")
	f.tokens[name] = &fakeToken{Name: name, Secret: secret, Description: "e2e API key", UserID: fakeUserID,
		Created: f.now(), Login: f.loginAPIToken}
	f.apiToken = name
}

func (f *Fake) now() time.Time {
	if f.clock != nil {
		return f.clock.Now().Add(f.skew)
	}
	return time.Now().Add(f.skew)
}

func (f *Fake) expired(t *fakeToken) bool {
	return t.TTL > 0 && !f.now().Before(t.Created.Add(t.TTL))
}

// Expires returns when the token whose bearer value ("name:secret") is
// given expires, on the fake's clock (the wall clock unless a test clock
// or AdvanceClock moved it); false for an unknown token or one that never
// expires.
func (f *Fake) Expires(bearer string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name, _, _ := strings.Cut(bearer, ":")
	t := f.tokens[name]
	if t == nil || t.TTL <= 0 {
		return time.Time{}, false
	}
	return t.Created.Add(t.TTL), true
}

// AdvanceClock moves the clock by which tokens expire forward by d.
func (f *Fake) AdvanceClock(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.skew += d
}

// IssueToken creates a token as POST /v3/tokens would (scoped to cluster
// unless ""; ttl 0 never expires), without counting it in TokensCreated,
// and returns its bearer value.
func (f *Fake) IssueToken(cluster string, ttl time.Duration) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.newToken(cluster, "issued by the test", ttl)
	return t.Name + ":" + t.Secret
}

// LiveTokens counts the tokens scoped to cluster ("": the unscoped ones,
// the API token included) that are neither expired nor deleted.
func (f *Fake) LiveTokens(cluster string) int {
	return f.LiveTokensByCluster()[cluster]
}

// LiveTokensByCluster counts the live tokens per clusterId ("": unscoped).
func (f *Fake) LiveTokensByCluster() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := map[string]int{}
	for _, t := range f.tokens {
		if !f.expired(t) {
			n[t.ClusterID]++
		}
	}
	return n
}

// TokensCreated counts the tokens created through POST /v3/tokens.
func (f *Fake) TokensCreated() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.created
}

// TokensCreatedFor counts the tokens created through POST /v3/tokens
// scoped to cluster, deleted ones included.
func (f *Fake) TokensCreatedFor(cluster string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.createdFor[cluster]
}

// TokensDeleted counts the tokens deleted through DELETE /v3/tokens/<name>.
func (f *Fake) TokensDeleted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deleted
}

// requestToken reads the credentials as Rancher's GetTokenAuthFromRequest
// does: a bearer "name:secret", or Basic with name and secret.
func requestToken(r *http.Request) (name, secret string) {
	if user, pass, ok := r.BasicAuth(); ok {
		return user, pass
	}
	v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "", ""
	}
	name, secret, _ = strings.Cut(strings.TrimSpace(v), ":")
	return name, secret
}

// authorize returns the live token the request carries if it may be used
// on a route of cluster ("" for /v3), else the message of the 401. With
// scopedOnly (an authorized cluster endpoint) only a token scoped to
// cluster passes. Called with f.mu held.
func (f *Fake) authorize(r *http.Request, cluster string, scopedOnly bool) (*fakeToken, string) {
	name, secret := requestToken(r)
	t := f.tokens[name]
	if name == "" || secret == "" || t == nil || subtle.ConstantTimeCompare([]byte(secret), []byte(t.Secret)) != 1 ||
		f.expired(t) {
		return nil, "must authenticate"
	}
	if (scopedOnly || t.ClusterID != "") && t.ClusterID != cluster {
		return nil, "clusterID does not match"
	}
	return t, ""
}

// randomString draws n characters of tokenAlphabet.
func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	for i := range b {
		b[i] = tokenAlphabet[int(b[i])%len(tokenAlphabet)]
	}
	return string(b)
}

// nextName draws the name and secret of a new token: wrangler's random
// ones, or WithTokenNames'. Called with f.mu held.
func (f *Fake) nextName() (name, secret string) {
	for {
		if f.names == nil {
			name, secret = "token-"+randomString(5), randomString(54)
		} else {
			f.seq++
			name, secret = f.names(f.seq)
		}
		if f.tokens[name] == nil {
			return name, secret
		}
	}
}

// newToken stores a new derived token of the fake's user. Called with
// f.mu held.
func (f *Fake) newToken(cluster, description string, ttl time.Duration) *fakeToken {
	name, secret := f.nextName()
	c, known := f.clusters[cluster]
	t := &fakeToken{Name: name, Secret: secret, ClusterID: cluster, Description: description,
		UserID: fakeUserID, TTL: ttl, Created: f.now(), Synced: known && !c.Disconnected}
	f.tokens[name] = t
	return t
}

// serveTokens serves /v3/tokens and /v3/tokens/<name>, the caller (the
// token the request carries) already authorized. Called with f.mu held.
func (f *Fake) serveTokens(w http.ResponseWriter, r *http.Request, caller *fakeToken) {
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/v3/tokens"), "/")
	t := f.tokens[name]
	switch {
	case name == "" && r.Method == http.MethodGet:
		f.listTokens(w, r, caller)
	case name == "" && r.Method == http.MethodPost:
		f.createToken(w, r)
	case name == "":
		writeAPIError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "Method "+r.Method+" not supported")
	case t == nil:
		writeAPIError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("tokens.management.cattle.io %q not found", name))
	case r.Method == http.MethodGet:
		b, _ := json.Marshal(f.renderToken(t, caller))
		writeRancher(w, http.StatusOK, b)
	case r.Method == http.MethodDelete && t == caller && t.Login:
		writeAPIError(w, http.StatusBadRequest, "BadRequest", "Cannot delete token for current session. Use logout instead")
	case r.Method == http.MethodDelete:
		if f.onRevoke != nil {
			f.onRevoke(t.Name + ":" + t.Secret)
		}
		delete(f.tokens, name)
		if name == f.apiToken {
			f.apiToken = ""
		}
		f.deleted++
		f.deletedNames = append(f.deletedNames, name)
		w.WriteHeader(http.StatusNoContent)
	default:
		writeAPIError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "Method "+r.Method+" not supported")
	}
}

// createToken derives a token from the caller's: 201 with the token
// object and, only in this answer, its bearer value in "token".
func (f *Fake) createToken(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Type        string `json:"type"`
		ClusterID   string `json:"clusterId"`
		Description string `json:"description"`
		TTL         int64  `json:"ttl"` // milliseconds
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	switch {
	case err != nil:
		writeAPIError(w, http.StatusUnprocessableEntity, "InvalidFormat", err.Error())
		return
	case in.Type != "" && in.Type != "token":
		writeAPIError(w, http.StatusUnprocessableEntity, "InvalidType", "type "+in.Type+" is not token")
		return
	case in.TTL < 0:
		writeAPIError(w, http.StatusUnprocessableEntity, "InvalidBodyContent", "ttl must not be negative")
		return
	case f.refuseMints:
		writeAPIError(w, http.StatusForbidden, "Forbidden", "tokens.management.cattle.io is forbidden: User cannot create resource")
		return
	}
	ttl := time.Duration(in.TTL) * time.Millisecond
	if f.maxTTL > 0 && (ttl == 0 || ttl > f.maxTTL) {
		ttl = f.maxTTL
	}
	t := f.newToken(in.ClusterID, in.Description, ttl)
	f.created++
	if f.createdFor == nil {
		f.createdFor = map[string]int{}
	}
	f.createdFor[in.ClusterID]++
	obj := f.renderToken(t, nil)
	obj["token"] = t.Name + ":" + t.Secret
	b, _ := json.Marshal(obj)
	writeRancher(w, http.StatusCreated, b)
}

// listTokens answers the user's tokens, expired ones included, in the
// collection envelope of /v3/clusters, sorted by name and paged as norman
// pages (paging.go): limit tokens, at most the page size
// (SetTokenPageSize; default 1000), from the name marker on, with an
// absolute next link (SetLinkBase) carrying the query and the limit, and
// partial while more follow. Rancher's tokens handler (pkg/auth/tokens)
// writes every token in one answer: the paging is for a client that must
// follow pages all the same.
func (f *Fake) listTokens(w http.ResponseWriter, r *http.Request, caller *fakeToken) {
	names := make([]string, 0, len(f.tokens))
	for name := range f.tokens {
		names = append(names, name)
	}
	sort.Strings(names)
	size := f.pageSize
	if size < 1 {
		size = defaultLimit
	}
	self := f.links() + "/v3/tokens"
	p := pageOf(names, r.URL.Query(), size, size, self)
	data := make([][]byte, 0, p.end-p.start)
	for _, name := range names[p.start:p.end] {
		b, _ := json.Marshal(f.renderToken(f.tokens[name], caller)) // strings, numbers, booleans: no error
		data = append(data, b)
	}
	writeRancher(w, http.StatusOK, collectionJSON("token", self, p.pagination, data))
}

// renderToken is the token object as /v3/tokens shows it to caller (nil:
// the creator's answer), without its bearer value: current is a login
// token shown to its own request, as Rancher shows it.
func (f *Fake) renderToken(t, caller *fakeToken) map[string]any {
	expiresAt := ""
	if t.TTL > 0 {
		expiresAt = t.Created.Add(t.TTL).UTC().Format(time.RFC3339)
	}
	self := f.links() + "/v3/tokens/" + t.Name
	return map[string]any{
		"type": "token", "baseType": "token", "id": t.Name, "name": t.Name, "uuid": "e2e-" + t.Name,
		"authProvider": "local", "userId": t.UserID, "userPrincipal": "local://" + t.UserID,
		"clusterId": t.ClusterID, "description": t.Description, "isDerived": !t.Login, "current": t == caller && t.Login,
		"enabled": true,
		"ttl":     t.TTL.Milliseconds(), "expiresAt": expiresAt, "expired": f.expired(t),
		"created": t.Created.UTC().Format(time.RFC3339), "createdTS": t.Created.UnixMilli(),
		"labels": map[string]string{tokenLabel: t.UserID},
		"links":  map[string]string{"self": self, "update": self, "remove": self},
	}
}
