package authn_test

import (
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/authn"
)

// The Entra ID of the AKS tests: the cluster's tenant and another, the
// server application the cluster accepts and another, the caller.
const (
	homeTenant  = "72f988bf-0000-4e8b-a1d2-3c4b5a6f7e80"
	otherTenant = "0f2e4d6c-8b1a-4c3e-9d5f-7a6b5c4d3e2f"
	serverApp   = "6dae42f8-4368-4678-94ff-3960e28e3630"
	otherApp    = "8c4b2a0e-6f1d-4e3c-b5a7-9d8e7f6a5b4c"
	callerOID   = "5e4d3c2b-1a0f-4e9d-8c7b-6a5f4e3d2c1b"
)

// TestVerifyAKSToken checks the webhook's Entra ID token check: it accepts
// exactly an unexpired RS256 token signed with Entra's key, issued by the
// tenant it names, for a tenant and audience that is a cluster's.
func TestVerifyAKSToken(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	trust := &authn.EntraTrust{Key: &key.PublicKey, Clusters: map[authn.AKSIdentity]string{
		{Tenant: homeTenant, ServerApp: serverApp}: "aks-a"}}
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
			m["tid"], m["iss"] = otherTenant, "https://sts.windows.net/"+otherTenant+"/"
		}, want: "no cluster of tenant " + otherTenant},
		{name: "another audience", edit: func(m jwt.MapClaims) { m["aud"] = otherApp }, want: "accepts audience"},
		{name: "another tenant's issuer", edit: func(m jwt.MapClaims) { m["iss"] = "https://sts.windows.net/" + otherTenant + "/" },
			want: "is not tenant"},
		{name: "expired", edit: func(m jwt.MapClaims) { m["exp"] = now.Add(-time.Minute).Unix() }, want: "expired"},
		{name: "no expiry", edit: func(m jwt.MapClaims) { delete(m, "exp") }, want: "exp claim is required"},
		{name: "signed with another key", signer: other, want: "signature is invalid"},
		{name: "HS256", method: jwt.SigningMethodHS256, want: "signing method HS256 is invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			claims := jwt.MapClaims{"aud": serverApp, "tid": homeTenant, "oid": callerOID,
				"iss": "https://sts.windows.net/" + homeTenant + "/", "exp": now.Add(time.Hour).Unix()}
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
			require.NoError(t, err)
			user, decision, _, err := authn.VerifyAKSToken(signed, trust, now)
			if c.want == "" {
				assert.NoError(t, err)
				assert.Equal(t, callerOID, user.Username)
				assert.Contains(t, decision, " at aks-a ")
			} else {
				assert.ErrorContains(t, err, c.want, "user %+v", user)
			}
		})
	}
	_, _, _, err = authn.VerifyAKSToken("a.b.c", nil, now)
	assert.Error(t, err, "with no Entra ID trusted, a JWT was accepted")
}
