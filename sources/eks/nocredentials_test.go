package eks

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/resourcegroupstaggingapi"
	"github.com/aws/smithy-go/logging"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Distinctive credentials: the static ones (environment or base
// configuration) and those the fake STS hands out for an assumed role.
const (
	ncStaticKeyID   = "AKIANOCREDSTATIC7Q2W"
	ncStaticSecret  = "NoCredStaticSecretKey/9f8e7d6c5b4a3210zyxwvuts"
	ncStaticSession = "NoCredStaticSessionToken+IQoJb3JpZ2luX2VjStatic/abc=="
	ncAssumedSecret = "NoCredAssumedSecretKey/0a1b2c3d4e5f6g7h8i9jklmn"
	ncAssumedToken  = "NoCredAssumedSessionToken+FwoGZXIvYXdzAssumed/xyz=="
)

var sigRe = regexp.MustCompile(`Signature=([0-9a-f]{64})`)

// ncRecorder sends through the fake and records the credentials each
// request carried: SigV4 signatures and session tokens.
type ncRecorder struct {
	base http.RoundTripper

	mu         sync.Mutex
	signatures map[string]bool
	tokens     map[string]bool
}

func (r *ncRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	if m := sigRe.FindStringSubmatch(req.Header.Get("Authorization")); m != nil {
		r.signatures[m[1]] = true
	}
	if tok := req.Header.Get("X-Amz-Security-Token"); tok != "" {
		r.tokens[tok] = true
	}
	r.mu.Unlock()
	return r.base.RoundTrip(req)
}

func (r *ncRecorder) seen() (signatures, tokens []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := range r.signatures {
		signatures = append(signatures, s)
	}
	for t := range r.tokens {
		tokens = append(tokens, t)
	}
	return signatures, tokens
}

// canonicalStringError is how AWS's restJson services answer a request
// whose signature does not match: the message quotes the canonical request,
// every signed header included, the session token among them.
func canonicalStringError(errType, token string) *fakeResp {
	msg := "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. " +
		"Consult the service documentation for details.\n\nThe Canonical String for this request should have been\n'GET\n/clusters\nmaxResults=100\n" +
		"host:eks.eu-west-1.amazonaws.com\nx-amz-date:20260101T000000Z\nx-amz-security-token:" + token +
		"\n\nhost;x-amz-date;x-amz-security-token\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'\n\n" +
		"The String-to-Sign should have been\n'AWS4-HMAC-SHA256\n20260101T000000Z\n20260101/eu-west-1/eks/aws4_request\n" +
		"8fa220f683adb6517b2df8f5558075060e023aabc1bb0308963977e75f161dda'\n"
	body, _ := json.Marshal(map[string]string{"message": msg})
	return &fakeResp{Status: http.StatusForbidden, ErrType: errType, Body: string(body)}
}

// stsCanonicalStringError is the same answer from STS (awsQuery XML).
func stsCanonicalStringError(token string) *fakeResp {
	return &fakeResp{Status: http.StatusForbidden, ErrType: "SignatureDoesNotMatch", Body: `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">` +
		`<Error><Type>Sender</Type><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match the signature you provided.` +
		` The Canonical String for this request should have been 'POST / host:sts.amazonaws.com x-amz-security-token:` + token +
		` host;x-amz-date;x-amz-security-token'</Message></Error><RequestId>req-1</RequestId></ErrorResponse>`}
}

// ncCase is one listing of TestNoCredentialInLogsOrErrors.
type ncCase struct {
	name string
	env  bool // credentials from the environment through the default chain
	role bool // the account is reached through an assumed role
	hook func(fakeReq) *fakeResp
	// sdkLog gives the base configuration a logger and every client
	// log mode, as an embedder debugging the SDK would.
	sdkLog  bool
	wantErr string
}

// ncThrottle is the throttling answer of the tagging and EKS APIs that
// name it ThrottlingException.
var ncThrottle = &fakeResp{Status: http.StatusBadRequest, ErrType: "ThrottlingException"}

var ncCases = []ncCase{
	{name: "env static: success", env: true},
	{name: "env static: ExpiredTokenException quoting the key", env: true, wantErr: "ExpiredTokenException",
		hook: on("ListClusters", "", "", &fakeResp{Status: http.StatusForbidden, ErrType: "ExpiredTokenException",
			Body: `{"message":"The security token included in the request is expired (key ` + ncStaticKeyID + `)"}`})},
	{name: "env static: 500", env: true, wantErr: "StatusCode: 500",
		hook: on("ListClusters", "", "", &fakeResp{Status: http.StatusInternalServerError, ErrType: "ServerException"})},
	{name: "env static: throttled on every attempt", env: true, wantErr: "ThrottlingException",
		hook: on("DescribeCluster", "", "c-001", ncThrottle)},
	{name: "env static: AccessDeniedException on tags", env: true, wantErr: "AccessDeniedException",
		hook: on("GetResources", "", "", &fakeResp{Status: http.StatusBadRequest, ErrType: "AccessDeniedException",
			Body: `{"__type":"AccessDeniedException","Message":"User: arn:aws:iam::111111111111:user/x (key ` + ncStaticKeyID + `) is not authorized to perform: tag:GetResources"}`})},
	{name: "env static: signature mismatch quoting the session token", env: true, wantErr: "InvalidSignatureException",
		hook: on("ListClusters", "", "", canonicalStringError("InvalidSignatureException", ncStaticSession))},
	{name: "role: success", role: true},
	{name: "role: AssumeRole AccessDenied", role: true, wantErr: "AccessDenied",
		hook: on("AssumeRole", "", "", &fakeResp{Status: http.StatusForbidden, ErrType: "AccessDenied"})},
	{name: "role: AssumeRole ExpiredToken", role: true, wantErr: "ExpiredToken",
		hook: on("AssumeRole", "", "", &fakeResp{Status: http.StatusForbidden, ErrType: "ExpiredToken"})},
	{name: "role: AssumeRole 500", role: true, wantErr: "500",
		hook: on("AssumeRole", "", "", &fakeResp{Status: http.StatusInternalServerError, ErrType: "InternalFailure"})},
	{name: "role: AssumeRole throttled", role: true, wantErr: "Throttling",
		hook: on("AssumeRole", "", "", &fakeResp{Status: http.StatusBadRequest, ErrType: "Throttling"})},
	{name: "role: AssumeRole signature mismatch quoting the base session token", role: true, wantErr: "SignatureDoesNotMatch",
		hook: on("AssumeRole", "", "", stsCanonicalStringError(ncStaticSession))},
	{name: "role: ExpiredTokenException with the assumed key", role: true, wantErr: "ExpiredTokenException",
		hook: on("DescribeCluster", "", "", &fakeResp{Status: http.StatusForbidden, ErrType: "ExpiredTokenException",
			Body: `{"message":"The security token included in the request is expired (key ` + assumedKey(acctA) + `)"}`})},
	{name: "role: 500 on describe", role: true, wantErr: "StatusCode: 500",
		hook: on("DescribeCluster", "", "c-002", &fakeResp{Status: http.StatusInternalServerError, ErrType: "ServerException"})},
	{name: "role: throttled then answered", role: true, hook: func(r fakeReq) *fakeResp {
		if r.Op == "DescribeCluster" && r.N <= 2 {
			return ncThrottle
		}
		return nil
	}},
	{name: "role: signature mismatch quoting the assumed session token", role: true, wantErr: "InvalidSignatureException",
		hook: on("ListClusters", "", "", canonicalStringError("InvalidSignatureException", ncAssumedToken))},
	{name: "role: SDK logging asked for by the base configuration", role: true, sdkLog: true},
	{name: "role: SDK logging asked for, failure", role: true, sdkLog: true, wantErr: "ThrottlingException",
		hook: on("ListClusters", "", "", ncThrottle)},
}

// TestNoCredentialInLogsOrErrors lists through static credentials (from the
// environment, as the SDK's default chain reads them) and through a role
// assumed from the fake STS, at debug level, on success and on failures of
// every API (denied, expired, 500, throttled, a signature mismatch whose
// answer quotes the session token), and checks that no access key id,
// secret key, session token or SigV4 signature appears in the logs (the
// source's, the inventory's and the SDK's own), the errors, the inventory's
// status, the clusters or the metrics.
func TestNoCredentialInLogsOrErrors(t *testing.T) {
	for _, tc := range ncCases {
		t.Run(tc.name, func(t *testing.T) {
			run := newNCRun(t, tc)
			run.check(t, tc, run.list(t, tc))
		})
	}
}

// ncRun is the fake, the source and what records their output for one
// case.
type ncRun struct {
	f      *fakeAWS
	s      *Source
	rec    *ncRecorder
	logs   *testlog.Buffer
	logger *slog.Logger
	reg    *prometheus.Registry
}

// newNCRun builds the fake, handing out the distinctive credentials, and
// a source on it with a debug logger, the credentials of the case and a
// recording transport.
func newNCRun(t *testing.T, tc ncCase) *ncRun {
	f := newFake(t)
	f.AssumedSecret, f.AssumedToken = ncAssumedSecret, ncAssumedToken
	f.SetKey(ncStaticKeyID, acctA)
	f.add(acctA, regionEU, names("c", 4)...)
	f.Hook = tc.hook

	r := &ncRun{f: f, logs: &testlog.Buffer{}, reg: prometheus.NewRegistry(),
		rec: &ncRecorder{base: f.Client().Transport, signatures: map[string]bool{}, tokens: map[string]bool{}}}
	r.logger = slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := hooks{httpClient: &http.Client{Transport: r.rec}}
	if tc.env {
		dir := t.TempDir()
		t.Setenv("AWS_ACCESS_KEY_ID", ncStaticKeyID)
		t.Setenv("AWS_SECRET_ACCESS_KEY", ncStaticSecret)
		t.Setenv("AWS_SESSION_TOKEN", ncStaticSession)
		t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
		t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
		t.Setenv("AWS_REGION", regionEU)
	} else {
		base := aws.Config{Region: "us-west-2", Credentials: credentials.NewStaticCredentialsProvider(ncStaticKeyID, ncStaticSecret, ncStaticSession)}
		if tc.sdkLog {
			base.Logger = logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
				r.logger.Debug("aws sdk", "classification", string(c), "message", fmt.Sprintf(format, v...))
			})
			base.ClientLogMode = aws.LogSigning | aws.LogRetries | aws.LogRequestWithBody | aws.LogResponseWithBody |
				aws.LogDeprecatedUsage | aws.LogRequestEventMessage | aws.LogResponseEventMessage
		}
		h.awsConfig = &base
	}
	cfg := f.testConfig()
	if !tc.role {
		cfg.Accounts[0].RoleARN, cfg.Accounts[0].ExternalID = "", ""
	}
	cfg.Default()
	opts := sources.SourceOptions{Name: "test-eks", Logger: r.logger,
		Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"source": "test-eks"}, r.reg)}
	var err error
	r.s, err = newSource(&cfg, opts, h)
	require.NoError(t, err)
	for _, tg := range r.s.targets {
		// The SDK's clients log neither the wire, nor the signing, nor
		// the retries (their errors may quote the token).
		assert.Zero(t, tg.client.(*eks.Client).Options().ClientLogMode, "eks client log mode")
		assert.Zero(t, tg.tagging.(*resourcegroupstaggingapi.Client).Options().ClientLogMode, "tagging client log mode")
	}
	return r
}

// list lists once directly and once as the service does, through the
// inventory (which logs failures and keeps them in its status), and
// returns the errors, clusters and status as text.
func (r *ncRun) list(t *testing.T, tc ncCase) []string {
	var texts []string
	got, err := r.s.Clusters(t.Context())
	if tc.wantErr == "" {
		require.NoError(t, err)
		require.Len(t, got, 4)
	} else {
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.wantErr)
		texts = append(texts, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
	}
	for _, c := range got {
		texts = append(texts, fmt.Sprintf("%+v %+v %+v", c, c.Auth.AWS, c.Auth.Exec))
	}
	inv, err := inventory.New([]inventory.SourceSpec{{
		Name: "test-eks", Provider: sources.ProviderEKS, Source: r.s, Interval: time.Hour, Timeout: 30 * time.Second,
	}}, inventory.Options{Logger: r.logger, Registerer: r.reg})
	require.NoError(t, err)
	if err := inv.RefreshAll(t.Context()); err != nil {
		texts = append(texts, err.Error())
	}
	status, err := json.Marshal(inv.Status())
	require.NoError(t, err)
	return append(texts, string(status))
}

// check looks for every credential the requests carried, and those of the
// fake, in the logs, the errors, the clusters, the status and the metrics.
func (r *ncRun) check(t *testing.T, tc ncCase, texts []string) {
	metrics := httptest.NewRecorder()
	promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{}).ServeHTTP(metrics, httptest.NewRequest(http.MethodGet, "/metrics", nil))

	signatures, tokens := r.rec.seen()
	require.NotEmpty(t, signatures, "requests were signed")
	if tc.env || !tc.role || r.f.count("AssumeRole") > 0 {
		assert.Contains(t, tokens, ncStaticSession, "the static session token was sent")
	}
	if tc.role && tc.wantErr == "" {
		assert.Contains(t, tokens, ncAssumedToken, "the assumed role's session token was sent")
	}
	secrets := append([]string{ncStaticKeyID, ncStaticSecret, ncStaticSession, ncAssumedSecret, ncAssumedToken, assumedKey(acctA)}, signatures...)
	require.NotEmpty(t, r.logs.String(), "debug logging is on")
	if tc.wantErr != "" {
		assert.Contains(t, r.logs.String(), tc.wantErr, "the failure is logged")
	}
	for where, text := range map[string]string{
		"the debug log": r.logs.String(), "the errors, clusters and the inventory's status": strings.Join(texts, "\n"),
		"the metrics": metrics.Body.String(),
	} {
		for _, secret := range secrets {
			assert.NotContains(t, text, secret, "%s holds a credential", where)
		}
	}
}
