// Package podidentity is the cluster where Argo CD's controller runs, as
// its cloud identities see it: the OIDC issuer that signs the
// ServiceAccount tokens Kubernetes projects into the controller's pod, for
// IRSA and Azure workload identity.
package podidentity

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ControllerSubject is the Argo CD application controller's
// ServiceAccount, the subject its cloud identities are federated with.
const ControllerSubject = "system:serviceaccount:argocd:argocd-application-controller"

// ErrNoIssuer is what a nil Issuer says of every token: no OIDC issuer is
// trusted.
var ErrNoIssuer = errors.New("no OIDC issuer trusted")

// Issuer is a cluster's OIDC issuer: it signs the controller's
// ServiceAccount tokens (RS256), and checks them as a cloud checks one
// against a federated credential. IRSA (audience sts.amazonaws.com) and
// Azure workload identity (api://AzureADTokenExchange) trust the same
// issuer, with one federated credential each.
type Issuer struct {
	issuer string
	key    *rsa.PrivateKey
}

// New returns the issuer at the URL issuer (the tokens' iss), with a
// signing key of its own.
func New(issuer string) (*Issuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("pod identity key: %w", err)
	}
	return &Issuer{issuer: issuer, key: key}, nil
}

// Token signs the controller's ServiceAccount token for audience, issued
// at now and valid for an hour.
func (p *Issuer) Token(audience string, now time.Time) (string, error) {
	tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer: p.issuer, Subject: ControllerSubject, Audience: jwt.ClaimStrings{audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
	}).SignedString(p.key)
	if err != nil {
		return "", fmt.Errorf("sign service account token: %w", err)
	}
	return tok, nil
}

// TokenFile writes the controller's ServiceAccount token for audience,
// valid for an hour from now, into the file token in dir, as Kubernetes
// projects one into the pod, and returns the file's name.
func (p *Issuer) TokenFile(dir, audience string) (string, error) {
	tok, err := p.Token(audience, time.Now())
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(tok), 0o600); err != nil {
		return "", fmt.Errorf("service account token file: %w", err)
	}
	return file, nil
}

// Verify checks a token as a cloud checks one against a federated
// credential (this issuer, audience, the controller's ServiceAccount):
// signed with the issuer's key, unexpired. A nil Issuer refuses every
// token (ErrNoIssuer).
func (p *Issuer) Verify(token, audience string) error {
	if p == nil {
		return ErrNoIssuer
	}
	_, err := jwt.Parse(token, func(*jwt.Token) (any, error) { return &p.key.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithIssuer(p.issuer), jwt.WithSubject(ControllerSubject),
		jwt.WithAudience(audience), jwt.WithExpirationRequired())
	return err
}
