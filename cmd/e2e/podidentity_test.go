package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// controllerSASubject is the Argo CD application controller's
// ServiceAccount, the subject its cloud identities are federated with.
const controllerSASubject = "system:serviceaccount:argocd:argocd-application-controller"

// podIdentity is the cluster where Argo CD's controller runs, as its cloud
// identities see it: the OIDC issuer that signs the ServiceAccount tokens
// Kubernetes projects into the pod. IRSA (audience sts.amazonaws.com) and
// Azure workload identity (api://AzureADTokenExchange) trust the same
// issuer, with one federated credential each.
type podIdentity struct {
	issuer string
	key    *rsa.PrivateKey
}

func newPodIdentity(t *testing.T, issuer string) *podIdentity {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &podIdentity{issuer: issuer, key: key}
}

// tokenFile writes the controller's ServiceAccount token for audience,
// valid for an hour, into a file, as Kubernetes projects one into the pod.
func (p *podIdentity) tokenFile(t *testing.T, audience string) string {
	t.Helper()
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer: p.issuer, Subject: controllerSASubject, Audience: jwt.ClaimStrings{audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
	}).SignedString(p.key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// verify checks a token as a cloud checks one against a federated
// credential (this issuer, audience, the controller's ServiceAccount):
// signed with the issuer's key, unexpired.
func (p *podIdentity) verify(token, audience string) error {
	if p == nil {
		return fmt.Errorf("no OIDC issuer trusted")
	}
	_, err := jwt.Parse(token, func(*jwt.Token) (any, error) { return &p.key.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(p.issuer), jwt.WithSubject(controllerSASubject),
		jwt.WithAudience(audience), jwt.WithExpirationRequired())
	return err
}
