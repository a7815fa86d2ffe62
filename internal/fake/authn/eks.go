package authn

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// eksTokenPrefix starts every EKS token: the rest is the presigned URL,
// base64url without padding.
const eksTokenPrefix = "k8s-aws-v1."

// ParseEKSToken checks an EKS token as aws-iam-authenticator does before
// it sends it to STS, and returns the presigned URL: a GET of STS
// GetCallerIdentity on an STS host, X-Amz-Expires 0 to 60, dated within
// the 15 minutes before now, host and x-k8s-aws-id among the signed
// headers, a SigV4 credential for STS in the region of the host. A token
// without the k8s-aws-v1. prefix is ErrNotEKS.
func ParseEKSToken(token string, now time.Time) (*url.URL, error) {
	if !strings.HasPrefix(token, eksTokenPrefix) {
		return nil, ErrNotEKS
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, eksTokenPrefix))
	if err != nil {
		return nil, fmt.Errorf("token is not base64url: %w", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return nil, fmt.Errorf("token is not a URL: %w", err)
	}
	q := u.Query()
	if u.Scheme != "https" || !isSTSHost(u.Host) || (u.Path != "/" && u.Path != "") {
		return nil, fmt.Errorf("not an STS URL: %s://%s%s", u.Scheme, u.Host, u.Path)
	}
	if q.Get("Action") != "GetCallerIdentity" || q.Get("Version") != "2011-06-15" || q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		return nil, fmt.Errorf("not a SigV4 GetCallerIdentity: Action=%q Version=%q", q.Get("Action"), q.Get("Version"))
	}
	if x, err := strconv.Atoi(q.Get("X-Amz-Expires")); err != nil || x < 0 || x > 60 {
		return nil, fmt.Errorf("X-Amz-Expires=%q, want 0 to 60", q.Get("X-Amz-Expires"))
	}
	date, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil || now.Sub(date) > 15*time.Minute || date.Sub(now) > 5*time.Minute {
		return nil, fmt.Errorf("X-Amz-Date=%q expired or invalid", q.Get("X-Amz-Date"))
	}
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	if !slices.Contains(signed, "x-k8s-aws-id") || !slices.Contains(signed, "host") {
		return nil, fmt.Errorf("X-Amz-SignedHeaders=%q lacks host or x-k8s-aws-id", q.Get("X-Amz-SignedHeaders"))
	}
	cred := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(cred) != 5 || cred[3] != "sts" || cred[4] != "aws4_request" || cred[1] != date.Format("20060102") {
		return nil, fmt.Errorf("X-Amz-Credential=%q is not an STS scope of the request's date", q.Get("X-Amz-Credential"))
	}
	// the global endpoint takes us-east-1 signatures only
	if want := STSHost(cred[2]); u.Host != want && (u.Host != "sts.amazonaws.com" || cred[2] != "us-east-1") {
		return nil, fmt.Errorf("signed for region %s, sent to %s", cred[2], u.Host)
	}
	return u, nil
}

// STSHost is the host name of STS's regional endpoint in region, where an
// EKS token signed for that region goes (the global sts.amazonaws.com
// takes us-east-1's only).
func STSHost(region string) string { return "sts." + region + ".amazonaws.com" }

func isSTSHost(host string) bool {
	return strings.HasPrefix(host, "sts.") && strings.HasSuffix(host, ".amazonaws.com") && !strings.Contains(host, ":")
}

// eksGroups maps an identity to its groups, as aws-iam-authenticator's
// mapRoles would: an assumed role's group is e2e-eks:<role>, any other
// identity's e2e-eks:users.
func eksGroups(arn string) []string {
	parts := strings.Split(arn, "/")
	if len(parts) == 3 && strings.Contains(parts[0], ":assumed-role") {
		return []string{"e2e-eks:" + parts[1]}
	}
	return []string{"e2e-eks:users"}
}
