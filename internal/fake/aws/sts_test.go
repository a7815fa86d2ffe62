package aws_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakeaws "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/aws"
)

const (
	userKey  = "AKIAE2EUSER000000001"
	userARN  = "arn:aws:iam::111111111111:user/controller"
	roleARN  = "arn:aws:iam::111111111111:role/deployer"
	stsRegn  = "eu-west-1"
	clusterN = "demo"
)

func stsClient(srv *httptest.Server, key, secret, token string) *sts.Client {
	return sts.NewFromConfig(sdkaws.Config{Region: stsRegn, HTTPClient: srv.Client(), BaseEndpoint: sdkaws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider(key, secret, token)})
}

// TestIssuingSTS: the SDK's own AssumeRole, signed with a key STS knows,
// gets credentials whose presigned GetCallerIdentity (an EKS token's URL)
// STS verifies as the assumed role, for the cluster it was signed for
// only; what STS refuses comes back with STS's error codes.
func TestIssuingSTS(t *testing.T) {
	s := fakeaws.NewSTS()
	s.Issue(userKey, fakeaws.Key{Secret: "user-secret", ARN: userARN})
	s.Allow(true, roleARN)
	srv := httptest.NewServer(s)
	defer srv.Close()

	out, err := stsClient(srv, userKey, "user-secret", "").AssumeRole(context.Background(),
		&sts.AssumeRoleInput{RoleArn: sdkaws.String(roleARN), RoleSessionName: sdkaws.String("s1")})
	require.NoError(t, err)
	assert.Equal(t, "arn:aws:sts::111111111111:assumed-role/deployer/s1", sdkaws.ToString(out.AssumedRoleUser.Arn))
	c := out.Credentials

	// an EKS token: GetCallerIdentity presigned with x-k8s-aws-id
	assumed := stsClient(srv, sdkaws.ToString(c.AccessKeyId), sdkaws.ToString(c.SecretAccessKey), sdkaws.ToString(c.SessionToken))
	presigned, err := sts.NewPresignClient(assumed).PresignGetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{},
		func(o *sts.PresignOptions) {
			o.ClientOptions = append(o.ClientOptions, sts.WithAPIOptions(smithyhttp.AddHeaderValue("x-k8s-aws-id", clusterN)))
		})
	require.NoError(t, err)
	u, err := url.Parse(presigned.URL)
	require.NoError(t, err)
	arn, fault := fakeaws.VerifyPresigned(u, u.Host, clusterN, s.Lookup)
	require.Nil(t, fault)
	assert.Equal(t, "arn:aws:sts::111111111111:assumed-role/deployer/s1", arn)
	_, fault = fakeaws.VerifyPresigned(u, u.Host, "another-cluster", s.Lookup)
	require.NotNil(t, fault)
	assert.Equal(t, "SignatureDoesNotMatch", fault.Code)

	code := func(err error) string {
		var api smithy.APIError
		require.ErrorAs(t, err, &api)
		return api.ErrorCode()
	}
	_, err = stsClient(srv, "AKIAUNKNOWN000000000", "x", "").AssumeRole(context.Background(),
		&sts.AssumeRoleInput{RoleArn: sdkaws.String(roleARN), RoleSessionName: sdkaws.String("s2")})
	assert.Equal(t, "InvalidClientTokenId", code(err))
	_, err = stsClient(srv, userKey, "wrong-secret", "").AssumeRole(context.Background(),
		&sts.AssumeRoleInput{RoleArn: sdkaws.String(roleARN), RoleSessionName: sdkaws.String("s3")})
	assert.Equal(t, "SignatureDoesNotMatch", code(err))
	_, err = stsClient(srv, userKey, "user-secret", "").AssumeRole(context.Background(),
		&sts.AssumeRoleInput{RoleArn: sdkaws.String("arn:aws:iam::111111111111:role/other"), RoleSessionName: sdkaws.String("s4")})
	assert.Equal(t, "AccessDenied", code(err))

	// a web identity, judged by the caller's function
	s.VerifyWebIdentity = func(token, role string) (string, *fakeaws.Fault) {
		if token != "sa-token" {
			return "", fakeaws.Faultf(http.StatusBadRequest, "InvalidIdentityToken", "unknown issuer")
		}
		return "web identity system:serviceaccount:argocd:controller", nil
	}
	anon := sts.NewFromConfig(sdkaws.Config{Region: stsRegn, HTTPClient: srv.Client(), BaseEndpoint: sdkaws.String(srv.URL)})
	_, err = anon.AssumeRoleWithWebIdentity(context.Background(), &sts.AssumeRoleWithWebIdentityInput{RoleArn: sdkaws.String(roleARN),
		RoleSessionName: sdkaws.String("s5"), WebIdentityToken: sdkaws.String("sa-token")})
	require.NoError(t, err)
	_, err = anon.AssumeRoleWithWebIdentity(context.Background(), &sts.AssumeRoleWithWebIdentityInput{RoleArn: sdkaws.String(roleARN),
		RoleSessionName: sdkaws.String("s6"), WebIdentityToken: sdkaws.String("forged")})
	assert.Equal(t, "InvalidIdentityToken", code(err))
	assert.Len(t, s.Seen(), 6, "one line per call")
}
