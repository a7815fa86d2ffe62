package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	fakeaws "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/aws"
)

// TestVerifyEKSToken checks the webhook's token check, with the fake STS
// it sends tokens to, against tokens presigned by another SigV4
// implementation, aws-sdk-go-v2's signer: it accepts exactly a fresh
// GetCallerIdentity on an STS host, signed for its cluster with a key STS
// issued.
func TestVerifyEKSToken(t *testing.T) {
	const arn = "arn:aws:sts::111111111111:assumed-role/e2e-eks-deployer/s1"
	issued := fakeaws.Key{Secret: "e2eVerifySecretAccessKeyEXAMPLE", SessionToken: "e2e-verify-session", ARN: arn}
	sts := newIssuingSTS(t)
	sts.Issue("ASIAE2EVERIFY", issued)
	webhook := &cloudAuthn{}
	webhook.trustEKS(sts.callerIdentity, eksClusterName)
	now := time.Now()
	ok := presignToken{key: "ASIAE2EVERIFY", secret: issued.Secret, session: issued.SessionToken,
		host: stsHost(k8sAuthRegion), region: k8sAuthRegion, cluster: eksClusterName, expires: "0", at: now}
	for _, c := range []struct {
		name string
		edit func(*presignToken)
		want string // in the error; "": accepted
	}{
		{name: "presigned for the cluster: accepted", edit: func(*presignToken) {}},
		{name: "X-Amz-Expires 60: accepted", edit: func(p *presignToken) { p.expires = "60" }},
		{name: "the global endpoint: accepted", edit: func(p *presignToken) { p.host, p.region = "sts.amazonaws.com", "us-east-1" }},
		{name: "the global endpoint, signed for another region", edit: func(p *presignToken) { p.host = "sts.amazonaws.com" },
			want: "signed for region " + k8sAuthRegion + ", sent to sts.amazonaws.com"},
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
			user, _, err := webhook.review(p.token(t), now)
			got := user.Username
			switch {
			case c.want == "" && (err != nil || got != arn):
				t.Errorf("got %q, %v; want %s", got, err, arn)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %q, %v; want an error with %q", got, err, c.want)
			}
		})
	}
	if _, err := parseEKSToken("e2e-plain-token", now); !errors.Is(err, errNotEKS) {
		t.Errorf("a plain token: %v, want %v", err, errNotEKS)
	}
	if _, _, err := (&cloudAuthn{}).review(ok.token(t), now); !errors.Is(err, errNoEKSCluster) {
		t.Errorf("trusting no EKS cluster: %v, want %v", err, errNoEKSCluster)
	}
}

// presignToken is a k8s-aws-v1. token made with aws-sdk-go-v2's signer.
type presignToken struct {
	key, secret, session, host, region, cluster, expires, action string
	at                                                           time.Time
}

func (p presignToken) token(t *testing.T) string {
	t.Helper()
	if p.action == "" {
		p.action = "GetCallerIdentity"
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet,
		"https://"+p.host+"/?Action="+p.action+"&Version=2011-06-15&X-Amz-Expires="+p.expires, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.cluster != "" {
		req.Header.Set("x-k8s-aws-id", p.cluster)
	}
	creds := aws.Credentials{AccessKeyID: p.key, SecretAccessKey: p.secret, SessionToken: p.session}
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, fakeaws.PayloadHash(nil), "sts", p.region, p.at)
	if err != nil {
		t.Fatal(err)
	}
	return "k8s-aws-v1." + base64.RawURLEncoding.EncodeToString([]byte(signed))
}
