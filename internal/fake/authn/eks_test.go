package authn_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/authn"
	fakeaws "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/aws"
)

// The EKS cluster, region and assumed role of the tests, and the key STS
// issued for the role.
const (
	eksCluster = "e2e-eks"
	region     = "eu-west-1"
	roleARN    = "arn:aws:sts::111111111111:assumed-role/e2e-eks-deployer/s1"
	keyID      = "ASIAE2EVERIFY"
)

var issued = fakeaws.Key{Secret: "e2eVerifySecretAccessKeyEXAMPLE", SessionToken: "e2e-verify-session", ARN: roleARN}

// stsCaller asks s as STS answers a presigned GetCallerIdentity sent to
// the URL's host: with the identity of a key s issued, if the signature
// holds for that host and cluster.
func stsCaller(s *fakeaws.STS) authn.STSCaller {
	return func(u *url.URL, cluster string) (string, error) {
		arn, fault := fakeaws.VerifyPresigned(u, u.Host, cluster, s.Lookup)
		if fault != nil {
			return "", fault
		}
		return arn, nil
	}
}

// TestVerifyEKSToken checks the webhook's token check, with the fake STS
// it sends tokens to, against tokens presigned by another SigV4
// implementation, aws-sdk-go-v2's signer: it accepts exactly a fresh
// GetCallerIdentity on an STS host, signed for its cluster with a key STS
// issued.
func TestVerifyEKSToken(t *testing.T) {
	sts := fakeaws.NewSTS()
	sts.Issue(keyID, issued)
	webhook := &authn.Webhook{}
	webhook.TrustEKS(stsCaller(sts), eksCluster)
	now := time.Now()
	ok := presignToken{key: keyID, secret: issued.Secret, session: issued.SessionToken,
		host: authn.STSHost(region), region: region, cluster: eksCluster, expires: "0", at: now}
	for _, c := range []struct {
		name string
		edit func(*presignToken)
		want string // in the error; "": accepted
	}{
		{name: "presigned for the cluster: accepted", edit: func(*presignToken) {}},
		{name: "X-Amz-Expires 60: accepted", edit: func(p *presignToken) { p.expires = "60" }},
		{name: "the global endpoint: accepted", edit: func(p *presignToken) { p.host, p.region = "sts.amazonaws.com", "us-east-1" }},
		{name: "the global endpoint, signed for another region", edit: func(p *presignToken) { p.host = "sts.amazonaws.com" },
			want: "signed for region " + region + ", sent to sts.amazonaws.com"},
		{name: "another cluster", edit: func(p *presignToken) { p.cluster = "other" }, want: "signature does not match"},
		{name: "another secret", edit: func(p *presignToken) { p.secret += "x" }, want: "signature does not match"},
		{name: "a key STS did not issue", edit: func(p *presignToken) { p.key = "ASIAE2EUNKNOWN" }, want: "not issued by STS"},
		{name: "another session token", edit: func(p *presignToken) { p.session = "stolen" }, want: "wrong session token"},
		{name: "20 minutes old", edit: func(p *presignToken) { p.at = now.Add(-20 * time.Minute) }, want: "expired"},
		{name: "X-Amz-Expires 900", edit: func(p *presignToken) { p.expires = "900" }, want: "want 0 to 60"},
		{name: "not STS", edit: func(p *presignToken) { p.host = "sts.example.com" }, want: "not an STS URL"},
		{name: "x-k8s-aws-id not signed", edit: func(p *presignToken) { p.cluster = "" }, want: "lacks host or x-k8s-aws-id"},
		{name: "another action", edit: func(p *presignToken) { p.action = "AssumeRole" }, want: "not a SigV4 GetCallerIdentity"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := ok
			c.edit(&p)
			user, _, err := webhook.Review(p.token(t), now)
			if c.want == "" {
				assert.NoError(t, err)
				assert.Equal(t, roleARN, user.Username)
			} else {
				assert.ErrorContains(t, err, c.want, "user %q", user.Username)
			}
		})
	}
	_, err := authn.ParseEKSToken("e2e-plain-token", now)
	assert.ErrorIs(t, err, authn.ErrNotEKS, "a plain token")
	_, _, err = (&authn.Webhook{}).Review(ok.token(t), now)
	assert.ErrorIs(t, err, authn.ErrNoEKSCluster, "trusting no EKS cluster")
}

// presignToken is a k8s-aws-v1. token made with aws-sdk-go-v2's signer.
type presignToken struct {
	key, secret, session, host, region, cluster, expires, action string
	at                                                           time.Time
}

func (p presignToken) token(t testing.TB) string {
	t.Helper()
	if p.action == "" {
		p.action = "GetCallerIdentity"
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet,
		"https://"+p.host+"/?Action="+p.action+"&Version=2011-06-15&X-Amz-Expires="+p.expires, nil)
	require.NoError(t, err)
	if p.cluster != "" {
		req.Header.Set("x-k8s-aws-id", p.cluster)
	}
	creds := aws.Credentials{AccessKeyID: p.key, SecretAccessKey: p.secret, SessionToken: p.session}
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, fakeaws.PayloadHash(nil), "sts", p.region, p.at)
	require.NoError(t, err)
	return "k8s-aws-v1." + base64.RawURLEncoding.EncodeToString([]byte(signed))
}
