package aws

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Key is an access key the issuing STS knows: what STS itself knows when
// it checks a signature made with it.
type Key struct {
	Secret, SessionToken string
	// ARN is the identity GetCallerIdentity returns: an assumed role's
	// arn:aws:sts::<account>:assumed-role/<role>/<session>, or a user's.
	ARN string
}

// Fault is an STS error answer: its HTTP status, code and message.
type Fault struct {
	Status    int
	Code, Msg string
}

func (f *Fault) Error() string { return f.Code + ": " + f.Msg }

// Faultf makes a Fault.
func Faultf(status int, code, format string, args ...any) *Fault {
	return &Fault{Status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// IssuedSessionPrefix starts every session token the issuing STS hands
// out; IssuedKeyPrefix every access key id.
const (
	IssuedSessionPrefix = "e2e-eks-session-"
	IssuedKeyPrefix     = "ASIAE2EEKS"
)

// STS is an issuing STS, in STS's query API shapes: it issues temporary
// credentials and remembers them, so that it can verify signatures made
// with them, of AssumeRole (SigV4 in the Authorization header) and of the
// presigned GetCallerIdentity an EKS token is (as aws-iam-authenticator
// sends it, with x-k8s-aws-id). AssumeRoleWithWebIdentity is checked by
// VerifyWebIdentity. It is an http.Handler: serve it over TLS at the STS
// host names (front.StartTLS) for clients without an endpoint override.
type STS struct {
	// VerifyWebIdentity checks a web identity token for role and returns
	// the caller; nil refuses every web identity.
	VerifyWebIdentity func(token, role string) (caller string, fault *Fault)

	mu   sync.Mutex
	keys map[string]Key
	// roles may be assumed; the credentials of those marked true are
	// remembered (the others' are forgotten)
	roles map[string]bool
	calls []string
	n     int
}

// NewSTS returns an STS that knows no key and lets no role be assumed.
func NewSTS() *STS { return &STS{keys: map[string]Key{}, roles: map[string]bool{}} }

// Issue makes STS know a key (a user's static key, or one a test signs
// with).
func (s *STS) Issue(id string, k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[id] = k
}

// Allow lets roles be assumed; remember keeps what STS issues for them
// (false: it forgets, and signatures made with those keys fail).
func (s *STS) Allow(remember bool, roles ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range roles {
		s.roles[r] = remember
	}
}

// Lookup finds a key STS knows.
func (s *STS) Lookup(id string) (Key, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[id]
	return k, ok
}

// Secrets are the secret access keys and session tokens STS knows: none
// may show in what a client writes.
func (s *STS) Secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range s.keys {
		out = append(out, k.Secret)
		if k.SessionToken != "" {
			out = append(out, k.SessionToken)
		}
	}
	return out
}

// Seen returns one line per call: what was asked, by whom, or why it was
// refused.
func (s *STS) Seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// ServeHTTP answers AssumeRole, AssumeRoleWithWebIdentity (POST forms)
// and a presigned GetCallerIdentity (GET).
func (s *STS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		s.serveCallerIdentity(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	form, ferr := url.ParseQuery(string(body))
	if err != nil || ferr != nil || r.Method != http.MethodPost {
		stsError(w, Faultf(http.StatusBadRequest, "InvalidAction", "fake STS: POST a form"))
		return
	}
	action, role := form.Get("Action"), form.Get("RoleArn")
	var caller string
	var fault *Fault
	switch {
	case action != "AssumeRoleWithWebIdentity":
		caller, fault = s.verifyRequest(r, body)
	case s.VerifyWebIdentity == nil:
		fault = Faultf(http.StatusBadRequest, "InvalidIdentityToken", "no OIDC provider trusted")
	default:
		caller, fault = s.VerifyWebIdentity(form.Get("WebIdentityToken"), role)
	}
	key, id, fault := s.assume(action, role, form.Get("RoleSessionName"), caller, fault)
	if fault != nil {
		stsError(w, fault)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	_, _ = fmt.Fprintf(w, `<%[1]sResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <%[1]sResult>
    <AssumedRoleUser><Arn>%[2]s</Arn><AssumedRoleId>AROAE2EEKS:%[3]s</AssumedRoleId></AssumedRoleUser>
    <Credentials>
      <AccessKeyId>%[4]s</AccessKeyId><SecretAccessKey>%[5]s</SecretAccessKey>
      <SessionToken>%[6]s</SessionToken><Expiration>%[7]s</Expiration>
    </Credentials>
  </%[1]sResult>
  <ResponseMetadata><RequestId>e2e-eks-%[8]s</RequestId></ResponseMetadata>
</%[1]sResponse>`, action, key.ARN, form.Get("RoleSessionName"), id, key.Secret, key.SessionToken,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339), id)
}

// assume records the call and issues credentials for role to caller, the
// identity verified (or why not: verr), or says why not.
func (s *STS) assume(action, role, session, caller string, verr *Fault) (Key, string, *Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if verr != nil {
		s.calls = append(s.calls, "unverified "+action+": "+verr.Error())
		return Key{}, "", verr
	}
	s.calls = append(s.calls, action+" "+role+" by "+caller)
	remember, ok := s.roles[role]
	if action != "AssumeRole" && action != "AssumeRoleWithWebIdentity" || !ok {
		return Key{}, "", Faultf(http.StatusForbidden, "AccessDenied",
			"User: %s is not authorized to perform: sts:%s on resource: %s", caller, action, role)
	}
	s.n++
	id := fmt.Sprintf("%s%010d", IssuedKeyPrefix, s.n)
	key := Key{Secret: randomHex(20), SessionToken: IssuedSessionPrefix + randomHex(16)}
	key.ARN = fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", strings.Split(role, ":")[4], role[strings.LastIndex(role, "/")+1:], session)
	if remember {
		s.keys[id] = key
	}
	return key, id, nil
}

// serveCallerIdentity answers a presigned GetCallerIdentity, as STS does
// for aws-iam-authenticator: with the identity of the key it was signed
// with, when STS knows that key and the signature holds for the request's
// host and x-k8s-aws-id header.
func (s *STS) serveCallerIdentity(w http.ResponseWriter, r *http.Request) {
	cluster := r.Header.Get("x-k8s-aws-id")
	arn, fault := VerifyPresigned(r.URL, r.Host, cluster, s.Lookup)
	s.mu.Lock()
	if fault != nil {
		s.calls = append(s.calls, "GetCallerIdentity at "+r.Host+" for "+cluster+" refused: "+fault.Error())
	} else {
		s.calls = append(s.calls, "GetCallerIdentity at "+r.Host+" for "+cluster+": "+arn)
	}
	s.mu.Unlock()
	if fault != nil {
		stsError(w, fault)
		return
	}
	account := strings.Split(arn, ":")[4]
	w.Header().Set("Content-Type", "text/xml")
	_, _ = fmt.Fprintf(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <GetCallerIdentityResult><Arn>%s</Arn><UserId>AROAE2EEKS:e2e</UserId><Account>%s</Account></GetCallerIdentityResult>
  <ResponseMetadata><RequestId>e2e-eks-gci</RequestId></ResponseMetadata>
</GetCallerIdentityResponse>`, arn, account)
}

// verifyRequest checks the SigV4 Authorization of r with a key STS knows
// and returns the caller's ARN.
func (s *STS) verifyRequest(r *http.Request, body []byte) (string, *Fault) {
	auth := r.Header.Get("Authorization")
	fields := map[string]string{}
	for _, f := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(f), "="); ok {
			fields[k] = v
		}
	}
	cred := strings.Split(fields["Credential"], "/")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || len(cred) != 5 || cred[3] != "sts" {
		return "", Faultf(http.StatusForbidden, "IncompleteSignature", "not signed with SigV4 for sts")
	}
	key, ok := s.Lookup(cred[0])
	if !ok {
		return "", Faultf(http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid: %s", cred[0])
	}
	if key.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") != key.SessionToken {
		return "", Faultf(http.StatusForbidden, "InvalidClientTokenId", "wrong session token for %s", cred[0])
	}
	header := func(name string) string {
		switch name {
		case "host":
			return r.Host
		case "content-length":
			return strconv.Itoa(len(body))
		}
		return r.Header.Get(name)
	}
	want := sigV4(r.Method, "/", r.URL.Query(), strings.Split(fields["SignedHeaders"], ";"), header, PayloadHash(body),
		r.Header.Get("X-Amz-Date"), strings.Join(cred[1:], "/"), key.Secret)
	if fields["Signature"] != want {
		return "", Faultf(http.StatusForbidden, "SignatureDoesNotMatch", "signature of %s does not match", cred[0])
	}
	return key.ARN, nil
}

// VerifyPresigned checks a presigned request as STS does: signed (SigV4,
// in the query) with a key lookup knows, with its session token, for the
// host and the x-k8s-aws-id header it came with; it returns the key's
// identity.
func VerifyPresigned(u *url.URL, host, cluster string, lookup func(id string) (Key, bool)) (string, *Fault) {
	q := u.Query()
	cred := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(cred) != 5 {
		return "", Faultf(http.StatusBadRequest, "AuthorizationQueryParametersError", "X-Amz-Credential=%q is not a SigV4 credential", q.Get("X-Amz-Credential"))
	}
	key, ok := lookup(cred[0])
	if !ok {
		return "", Faultf(http.StatusForbidden, "InvalidClientTokenId", "access key %s: not issued by STS", cred[0])
	}
	if q.Get("X-Amz-Security-Token") != key.SessionToken {
		return "", Faultf(http.StatusForbidden, "InvalidClientTokenId", "access key %s: wrong session token", cred[0])
	}
	headers := func(name string) string {
		switch name {
		case "host":
			return host
		case "x-k8s-aws-id":
			return cluster
		}
		return ""
	}
	got := q.Get("X-Amz-Signature")
	q.Del("X-Amz-Signature")
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	want := sigV4(http.MethodGet, "/", q, signed, headers, PayloadHash(nil), q.Get("X-Amz-Date"), strings.Join(cred[1:], "/"), key.Secret)
	if !hmac.Equal([]byte(got), []byte(want)) {
		return "", Faultf(http.StatusForbidden, "SignatureDoesNotMatch",
			"access key %s: signature does not match (another x-k8s-aws-id than %s, or another key)", cred[0], cluster)
	}
	return key.ARN, nil
}

func stsError(w http.ResponseWriter, f *Fault) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(f.Status)
	_, _ = fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error>`+
		`<RequestId>e2e-eks-error</RequestId></ErrorResponse>`, f.Code, f.Msg)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// sigV4 computes an AWS Signature Version 4: the canonical request of
// method, path, query, the signed headers (values from header) and the
// payload hash, signed for scope (date/region/service/aws4_request) at
// amzDate with secret.
func sigV4(method, path string, query url.Values, signed []string, header func(string) string,
	payloadHash, amzDate, scope, secret string) string {
	keys := make([]string, 0, len(query))
	for k := range query {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var qs []string
	for _, k := range keys {
		vs := slices.Clone(query[k])
		sort.Strings(vs)
		for _, v := range vs {
			qs = append(qs, awsEscape(k)+"="+awsEscape(v))
		}
	}
	var ch strings.Builder
	for _, h := range signed {
		ch.WriteString(h + ":" + strings.Join(strings.Fields(header(h)), " ") + "\n")
	}
	canonical := strings.Join([]string{method, path, strings.Join(qs, "&"), ch.String(), strings.Join(signed, ";"), payloadHash}, "\n")
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	k := []byte("AWS4" + secret)
	for _, part := range strings.Split(scope, "/") {
		k = hmacSHA256(k, part)
	}
	return hex.EncodeToString(hmacSHA256(k, toSign))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// awsEscape is SigV4's URI encoding: every byte but A-Z a-z 0-9 - _ . ~.
func awsEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// PayloadHash is the hex SHA-256 of b: SigV4's payload hash.
func PayloadHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
