package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	authenticationv1 "k8s.io/api/authentication/v1"
)

// aksIdentity is what an AKS cluster with Entra ID integration accepts of
// a token: issued by its tenant, for its server application.
type aksIdentity struct{ tenant, serverApp string }

// entraTrust is what the webhook trusts of Entra ID: the key its tokens
// are signed with, and the AKS clusters the apiserver plays, by identity.
type entraTrust struct {
	key      *rsa.PublicKey
	clusters map[aksIdentity]string
}

// trustEntra makes the webhook accept Entra tokens signed with key for
// the clusters; it returns a function that restores what it trusted
// before.
func (a *cloudAuthn) trustEntra(key *rsa.PublicKey, clusters map[aksIdentity]string) (restore func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	prev := a.entra
	a.entra = &entraTrust{key: key, clusters: clusters}
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.entra = prev
	}
}

// entraClaims are the claims of an Entra ID v1 access token that AKS reads.
type entraClaims struct {
	TenantID string `json:"tid"`
	ObjectID string `json:"oid"`
	AppID    string `json:"appid"`
	jwt.RegisteredClaims
}

// verifyAKSToken checks an Entra ID access token as an AKS cluster's
// guard does: RS256, signed with Entra's key, not expired, and issued by
// the tenant it names (iss https://sts.windows.net/<tid>/) for an audience
// that, with that tenant, is one of the clusters'. The user is the
// caller's object id, in the group of that cluster, which it returns with
// the decision.
func verifyAKSToken(token string, trust *entraTrust, now time.Time) (authenticationv1.UserInfo, string, string, error) {
	if trust == nil {
		return authenticationv1.UserInfo{}, "", "", errors.New("a JWT, and no Entra ID trusted")
	}
	var c entraClaims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return trust.key, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithExpirationRequired(), jwt.WithTimeFunc(func() time.Time { return now }))
	if err != nil {
		return authenticationv1.UserInfo{}, "", "", fmt.Errorf("not an Entra ID token: %w", err)
	}
	if c.Issuer != "https://sts.windows.net/"+c.TenantID+"/" {
		return authenticationv1.UserInfo{}, "", "", fmt.Errorf("issuer %q is not tenant %s's", c.Issuer, c.TenantID)
	}
	for _, aud := range c.Audience {
		if cluster, ok := trust.clusters[aksIdentity{tenant: c.TenantID, serverApp: aud}]; ok {
			user := authenticationv1.UserInfo{Username: c.ObjectID, UID: "aad:" + c.ObjectID, Groups: []string{"e2e-aks:" + cluster}}
			return user, fmt.Sprintf("%s at %s (tenant %s, server application %s)", c.ObjectID, cluster, c.TenantID, aud), cluster, nil
		}
	}
	return authenticationv1.UserInfo{}, "", "", fmt.Errorf("no cluster of tenant %s accepts audience %v", c.TenantID, []string(c.Audience))
}

// TestVerifyAKSToken checks the webhook's Entra ID token check: it accepts
// exactly an unexpired RS256 token signed with Entra's key, issued by the
// tenant it names, for a tenant and audience that is a cluster's.
func TestVerifyAKSToken(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	trust := &entraTrust{key: &key.PublicKey, clusters: map[aksIdentity]string{
		{tenant: entraHomeTenant, serverApp: aksManagedServerApp}: "aks-a"}}
	now := time.Now()
	for _, c := range []struct {
		name   string
		edit   func(jwt.MapClaims)
		signer *rsa.PrivateKey
		method jwt.SigningMethod
		want   string // in the error; "": accepted
	}{
		{name: "the cluster's tenant and audience: accepted"},
		{name: "another tenant", edit: func(m jwt.MapClaims) {
			m["tid"], m["iss"] = entraLighthouseTenant, "https://sts.windows.net/"+entraLighthouseTenant+"/"
		}, want: "no cluster of tenant " + entraLighthouseTenant},
		{name: "another audience", edit: func(m jwt.MapClaims) { m["aud"] = aksLegacyServerApp }, want: "accepts audience"},
		{name: "another tenant's issuer", edit: func(m jwt.MapClaims) { m["iss"] = "https://sts.windows.net/" + entraLighthouseTenant + "/" },
			want: "is not tenant"},
		{name: "expired", edit: func(m jwt.MapClaims) { m["exp"] = now.Add(-time.Minute).Unix() }, want: "expired"},
		{name: "no expiry", edit: func(m jwt.MapClaims) { delete(m, "exp") }, want: "exp claim is required"},
		{name: "signed with another key", signer: other, want: "signature is invalid"},
		{name: "HS256", method: jwt.SigningMethodHS256, want: "signing method HS256 is invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			claims := jwt.MapClaims{"aud": aksManagedServerApp, "tid": entraHomeTenant, "oid": entraControllerOID,
				"iss": "https://sts.windows.net/" + entraHomeTenant + "/", "exp": now.Add(time.Hour).Unix()}
			if c.edit != nil {
				c.edit(claims)
			}
			var signed string
			var err error
			switch {
			case c.method == jwt.SigningMethodHS256:
				signed, err = jwt.NewWithClaims(c.method, claims).SignedString([]byte("e2e-shared-secret"))
			case c.signer != nil:
				signed, err = jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(c.signer)
			default:
				signed, err = jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
			}
			if err != nil {
				t.Fatal(err)
			}
			user, decision, _, err := verifyAKSToken(signed, trust, now)
			switch {
			case c.want == "" && (err != nil || user.Username != entraControllerOID || !strings.Contains(decision, " at aks-a ")):
				t.Errorf("got %+v, %q, %v; want %s at aks-a", user, decision, err, entraControllerOID)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %+v, %v; want an error with %q", user, err, c.want)
			}
		})
	}
	if _, _, _, err := verifyAKSToken("a.b.c", nil, now); err == nil {
		t.Error("with no Entra ID trusted, a JWT was accepted")
	}
}
