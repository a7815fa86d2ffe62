package podidentity_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeaws "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/aws"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/podidentity"
)

const (
	issuerURL = "https://oidc.eks.eu-west-1.amazonaws.com/id/E2E0123456789ABCDEF"
	irsa      = "sts.amazonaws.com"
	workload  = "api://AzureADTokenExchange"
	irsaRole  = "arn:aws:iam::111111111111:role/argocd-controller"
)

func newIssuer(t *testing.T, url string) *podidentity.Issuer {
	t.Helper()
	p, err := podidentity.New(url)
	require.NoError(t, err)
	return p
}

// TestVerify: the issuer accepts exactly its own unexpired tokens for the
// controller's ServiceAccount and the audience asked for.
func TestVerify(t *testing.T) {
	p := newIssuer(t, issuerURL)
	now := time.Now()
	token := func(p *podidentity.Issuer, audience string, at time.Time) string {
		tok, err := p.Token(audience, at)
		require.NoError(t, err)
		return tok
	}
	for _, c := range []struct {
		name, token, audience string
		want                  string // in the error; "": accepted
	}{
		{name: "IRSA's audience: accepted", token: token(p, irsa, now), audience: irsa},
		{name: "workload identity's audience: accepted", token: token(p, workload, now), audience: workload},
		{name: "another audience", token: token(p, workload, now), audience: irsa, want: "invalid audience"},
		{name: "expired", token: token(p, irsa, now.Add(-2*time.Hour)), audience: irsa, want: "expired"},
		{name: "another cluster's issuer", token: token(newIssuer(t, issuerURL), irsa, now), audience: irsa,
			want: "signature is invalid"},
		{name: "not a JWT", token: "e2e-plain-token", audience: irsa, want: "malformed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := p.Verify(c.token, c.audience)
			if c.want == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, c.want)
			}
		})
	}
	claims := jwt.MapClaims{}
	_, _, err := jwt.NewParser().ParseUnverified(token(p, irsa, now), claims)
	require.NoError(t, err)
	assert.Equal(t, podidentity.ControllerSubject, claims["sub"])
	assert.Equal(t, issuerURL, claims["iss"])
	var none *podidentity.Issuer
	assert.ErrorIs(t, none.Verify(token(p, irsa, now), irsa), podidentity.ErrNoIssuer)
}

// TestWebIdentityTokenFile: aws-sdk-go-v2's web identity provider (IRSA's
// AWS_WEB_IDENTITY_TOKEN_FILE) reads the token file and gets credentials
// from an STS that trusts the issuer, and is refused by one that trusts
// another.
func TestWebIdentityTokenFile(t *testing.T) {
	p := newIssuer(t, issuerURL)
	file, err := p.TokenFile(t.TempDir(), irsa)
	require.NoError(t, err)
	s := fakeaws.NewSTS()
	s.Allow(true, irsaRole)
	var trusted atomic.Pointer[podidentity.Issuer]
	trusted.Store(p)
	s.VerifyWebIdentity = func(token, _ string) (string, *fakeaws.Fault) {
		if err := trusted.Load().Verify(token, irsa); err != nil {
			return "", fakeaws.Faultf(http.StatusBadRequest, "InvalidIdentityToken", "%v", err)
		}
		return "web identity " + podidentity.ControllerSubject, nil
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	client := sts.NewFromConfig(sdkaws.Config{Region: "eu-west-1", HTTPClient: srv.Client(), BaseEndpoint: sdkaws.String(srv.URL),
		RetryMaxAttempts: 1})
	provider := func() *stscreds.WebIdentityRoleProvider {
		return stscreds.NewWebIdentityRoleProvider(client, irsaRole, stscreds.IdentityTokenFile(file))
	}

	creds, err := provider().Retrieve(context.Background())
	require.NoError(t, err)
	assert.NotEmpty(t, creds.SessionToken)
	assert.Contains(t, s.Seen(), "AssumeRoleWithWebIdentity "+irsaRole+" by web identity "+podidentity.ControllerSubject)

	trusted.Store(newIssuer(t, issuerURL)) // the same URL, another key
	_, err = provider().Retrieve(context.Background())
	var api smithy.APIError
	require.ErrorAs(t, err, &api)
	assert.Equal(t, "InvalidIdentityToken", api.ErrorCode())
}
