package rancher

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// What a unit test does to the fake's tokens besides the API (tokens.go):
// put tokens in and take them out behind its back, rotate the API token,
// page the listing, slow the creations, and name what the API deleted.

// Token is a token a test puts in the fake (AddToken), as another client
// of Rancher, an administrator or an earlier run would have made it.
type Token struct {
	// Name and Secret make its bearer value Name:Secret; drawn as the fake
	// draws them (WithTokenNames) when empty.
	Name, Secret string
	// ClusterID scopes it to a cluster ("": unscoped).
	ClusterID, Description string
	// TTL is its lifetime (0: it never expires), from Created (zero: now,
	// by the fake's clock).
	TTL     time.Duration
	Created time.Time
}

// SetAPIToken replaces the API token, the listing credential, by token
// ("token-xxxxx:<secret>"), as a rotation of the user's key does: the old
// one is refused from then on (401). "" leaves the fake with no API token.
func (f *Fake) SetAPIToken(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setAPIToken(token)
}

// SetTokenPageSize sets the most tokens a page of GET /v3/tokens holds
// (default 1000), paged as norman pages (see listTokens).
func (f *Fake) SetTokenPageSize(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pageSize = n
}

// SetMintDelay makes the answer to POST /v3/tokens wait d, the token
// already created, as a slow Rancher: a client that gives up first leaves
// a token it does not know of.
func (f *Fake) SetMintDelay(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mintDelay = d
}

// AddToken stores t as a token of the fake's user, replacing one of the
// same name, without counting it in TokensCreated, and returns its bearer
// value.
func (f *Fake) AddToken(t Token) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	name, secret := t.Name, cmp.Or(t.Secret, randomString(54))
	if name == "" {
		name, secret = f.nextName()
		secret = cmp.Or(t.Secret, secret)
	}
	created := t.Created
	if created.IsZero() {
		created = f.now()
	}
	c, known := f.clusters[t.ClusterID]
	f.tokens[name] = &fakeToken{Name: name, Secret: secret, ClusterID: t.ClusterID, Description: t.Description,
		UserID: fakeUserID, TTL: t.TTL, Created: created, Synced: known && !c.Disconnected}
	return name + ":" + secret
}

// DeleteToken deletes a token behind the API's back (an administrator, an
// earlier leader): not counted in TokensDeleted nor DeletedTokens. It
// reports whether the token was there.
func (f *Fake) DeleteToken(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.tokens[name]
	delete(f.tokens, name)
	if name == f.apiToken {
		f.apiToken = ""
	}
	return ok
}

// TokenNames returns the names of the tokens stored, expired ones and the
// API token included, sorted.
func (f *Fake) TokenNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.tokens))
}

// DeletedTokens returns the names of the tokens deleted through DELETE
// /v3/tokens/<name>, in order.
func (f *Fake) DeletedTokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deletedNames)
}
