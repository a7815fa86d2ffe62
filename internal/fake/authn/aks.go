package authn

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	authenticationv1 "k8s.io/api/authentication/v1"
)

// AKSIdentity is what an AKS cluster with Entra ID integration accepts of
// a token: issued by its tenant, for its server application.
type AKSIdentity struct{ Tenant, ServerApp string }

// EntraTrust is what the webhook trusts of Entra ID: the key its tokens
// are signed with, and the AKS clusters the apiserver plays, by identity.
type EntraTrust struct {
	Key      *rsa.PublicKey
	Clusters map[AKSIdentity]string
}

// TrustEntra makes the webhook accept Entra ID tokens signed with key for
// the clusters (by identity: their names); it returns a function that
// restores what it trusted before.
func (w *Webhook) TrustEntra(key *rsa.PublicKey, clusters map[AKSIdentity]string) (restore func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := w.entra
	w.entra = &EntraTrust{Key: key, Clusters: clusters}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.entra = prev
	}
}

// entraClaims are the claims of an Entra ID v1 access token that AKS reads.
type entraClaims struct {
	TenantID string `json:"tid"`
	ObjectID string `json:"oid"`
	AppID    string `json:"appid"`
	jwt.RegisteredClaims
}

// VerifyAKSToken checks an Entra ID access token at now as an AKS
// cluster's guard does: RS256, signed with Entra's key, not expired, and
// issued by the tenant it names (iss https://sts.windows.net/<tid>/) for
// an audience that, with that tenant, is one of the clusters'. The user is
// the caller's object id, in the group e2e-aks:<cluster>; it returns the
// user, the decision and the cluster. With no trust (nil), every token is
// refused.
func VerifyAKSToken(token string, trust *EntraTrust, now time.Time) (user authenticationv1.UserInfo, decision, cluster string, err error) {
	if trust == nil {
		return authenticationv1.UserInfo{}, "", "", errors.New("a JWT, and no Entra ID trusted")
	}
	var c entraClaims
	_, err = jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return trust.Key, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithExpirationRequired(), jwt.WithTimeFunc(func() time.Time { return now }))
	if err != nil {
		return authenticationv1.UserInfo{}, "", "", fmt.Errorf("not an Entra ID token: %w", err)
	}
	if c.Issuer != "https://sts.windows.net/"+c.TenantID+"/" {
		return authenticationv1.UserInfo{}, "", "", fmt.Errorf("issuer %q is not tenant %s's", c.Issuer, c.TenantID)
	}
	for _, aud := range c.Audience {
		if name, ok := trust.Clusters[AKSIdentity{Tenant: c.TenantID, ServerApp: aud}]; ok {
			user := authenticationv1.UserInfo{Username: c.ObjectID, UID: "aad:" + c.ObjectID, Groups: []string{"e2e-aks:" + name}}
			return user, fmt.Sprintf("%s at %s (tenant %s, server application %s)", c.ObjectID, name, c.TenantID, aud), name, nil
		}
	}
	return authenticationv1.UserInfo{}, "", "", fmt.Errorf("no cluster of tenant %s accepts audience %v", c.TenantID, []string(c.Audience))
}
