package eks

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eks/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/fuzzseed"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// answerBody is an EKS client transport that answers every request with
// 200 and the current body, so that a fuzzed DescribeCluster answer goes
// through the SDK's own deserializer.
type answerBody struct{ body []byte }

func (a *answerBody) Do(*http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK, Header: http.Header{"Content-Type": []string{"application/json"}},
		Body: io.NopCloser(bytes.NewReader(a.body)), ContentLength: int64(len(a.body)),
	}, nil
}

// FuzzDescribeCluster sends any DescribeCluster answer through the real
// SDK client (restJson1 deserializer) and maps the cluster, with the
// answer's tags standing for GetResources', with three configurations (the
// defaults; exec auth with the proxy policy, a name template and tag
// filters; a rolePattern that lets the role tag in):
//   - nothing panics; the mapping is deterministic;
//   - a listed cluster is an EKS cluster of the asked account and region,
//     named, with aws or exec auth that validates and no token of any kind;
//   - its ID is the ARN, its phase is pending, ready, degraded or leaving
//     (never empty or absent), and the one of its status;
//   - what the describe cache keeps (keepDescribed) maps to the same
//     cluster;
//   - its labels are valid Kubernetes labels, and only the private-endpoint
//     label uses the source's reserved prefix;
//   - ready means a server in normal form and base64 PEM caData; not ready
//     always comes with a reason; a namespaces tag that cannot be read
//     makes the cluster not ready rather than "every namespace";
//   - the Argo CD role is the account's, or an allowed role of the
//     account named by the role tag; a refused tag gives no role at all;
//   - the mapped cluster does not depend on the answer's credentials
//     (connectorConfig's activation code and id): none of them reaches the
//     model.
//
// Run it with: go test ./sources/eks -run '^$' -fuzz '^FuzzDescribeCluster$' -fuzztime 1m
func FuzzDescribeCluster(f *testing.F) {
	fuzzseed.Add(f, "testdata/fixtures/eks/eks-describe-cluster.json")
	account := Account{ID: "123456789012", ArgocdRoleARN: "arn:aws:iam::123456789012:role/argocd"}
	const region = "eu-west-1"
	var mappers []*mapper
	for _, set := range []func(*Config){
		func(*Config) {},
		func(c *Config) {
			c.Auth.Mode = AuthModeExec
			c.PrivateEndpoints = PrivateEndpoints{Policy: PrivateProxy, ProxyURL: "http://proxy.internal:3128"}
			c.NameTemplate = "eks-{{.Account}}-{{.Region}}-{{.Name}}"
			c.Tags = TagFilter{Allow: []string{"team*", "env", "tenant"}, Deny: []string{"aws:*", "team-secret"}}
		},
		func(c *Config) { c.RolePattern = []string{"arn:aws:iam::*:role/argocd-*"} },
	} {
		cfg := Config{Regions: []string{region}, Accounts: []Account{account}}
		set(&cfg)
		cfg.Default()
		if errs := cfg.Validate(nil); len(errs) > 0 {
			f.Fatal(errs.ToAggregate())
		}
		m, err := newMapper(cfg)
		if err != nil {
			f.Fatal(err)
		}
		mappers = append(mappers, m)
	}
	transport := &answerBody{}
	client := eks.New(eks.Options{
		Region: region, Credentials: credentials.NewStaticCredentialsProvider("AKIAFUZZ", "fuzz", ""),
		Retryer: aws.NopRetryer{}, HTTPClient: transport,
	})
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body []byte) {
		transport.body = body
		out, err := client.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("payments-prod")})
		if err != nil || out.Cluster == nil {
			return // a malformed answer fails the describe, and so the listing
		}
		for _, m := range mappers {
			tags := out.Cluster.Tags
			got, err := m.toCluster(out.Cluster, tags, account, region)
			if err != nil {
				continue
			}
			again, _ := m.toCluster(out.Cluster, tags, account, region)
			if !reflect.DeepEqual(got, again) {
				t.Fatalf("mapping the same cluster twice differs:\n%+v\n%+v", got, again)
			}
			cleared := *out.Cluster
			cleared.ConnectorConfig = nil
			withoutCreds, err := m.toCluster(&cleared, tags, account, region)
			if err != nil || !reflect.DeepEqual(got, withoutCreds) {
				t.Fatalf("the mapped cluster depends on connectorConfig (error %v)", err)
			}
			fromCache, err := m.toCluster(keepDescribed(out.Cluster), tags, account, region)
			if err != nil || !reflect.DeepEqual(got, fromCache) {
				t.Fatalf("the describe cache loses what the mapping reads (error %v):\n%+v\n%+v", err, got, fromCache)
			}
			if got.Skip == "" {
				checkMapped(t, m, &got.Cluster, out.Cluster, account, region)
			}
		}
	})
}

func checkMapped(t *testing.T, m *mapper, c *sources.Cluster, in *types.Cluster, account Account, region string) {
	t.Helper()
	if c.Provider != sources.ProviderEKS || c.Name == "" || c.Account != account.ID || c.Region != region {
		t.Fatalf("cluster identity: provider %q, name %q, account %q, region %q", c.Provider, c.Name, c.Account, c.Region)
	}
	if c.ID != aws.ToString(in.Arn) {
		t.Fatalf("id %q is not the ARN %q", c.ID, aws.ToString(in.Arn))
	}
	switch c.Phase {
	case sources.PhasePending, sources.PhaseReady, sources.PhaseDegraded, sources.PhaseLeaving:
	default:
		t.Fatalf("phase %q", c.Phase)
	}
	if c.Phase != phase(in.Status, aws.ToString(in.Endpoint) != "") || c.State != string(in.Status) {
		t.Fatalf("status %q mapped to state %q, phase %q", in.Status, c.State, c.Phase)
	}
	if err := c.Auth.Validate(); err != nil || c.Auth.TokenRef != nil || (c.Auth.Kind != sources.AuthAWS && c.Auth.Kind != sources.AuthExec) {
		t.Fatalf("auth %+v: %v", c.Auth, err)
	}
	if c.Auth.Exec != nil && len(c.Auth.Exec.Env) != 1 {
		t.Fatalf("exec env carries more than the region: %v", c.Auth.Exec.Env)
	}
	for k, v := range c.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Fatalf("label key %q: %v", k, errs)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("label %s value %q: %v", k, v, errs)
		}
		if strings.HasPrefix(k, reservedPrefix) && k != LabelPrivateEndpoint {
			t.Fatalf("label %s uses the reserved prefix", k)
		}
	}
	if c.Ready {
		if c.NotReadyReason != "" {
			t.Fatalf("ready with a reason: %s", c.NotReadyReason)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ready cluster is invalid: %v", err)
		}
		if srv, _ := sources.NormalizeServer(c.Server); srv != c.Server {
			t.Fatalf("server %q is not in normal form", c.Server)
		}
		if err := sources.ValidateCAData(c.CA.Data()); err != nil {
			t.Fatalf("ready cluster with invalid caData: %v", err)
		}
	} else if c.NotReadyReason == "" {
		t.Fatal("not ready without a reason")
	}
	for _, ns := range c.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			t.Fatalf("namespace %q: %v", ns, errs)
		}
	}
	if _, tagged := in.Tags[m.namespacesTag]; tagged && len(c.Namespaces) == 0 && c.Ready {
		t.Fatalf("namespaces tag %q became every namespace", in.Tags[m.namespacesTag])
	}
	checkRole(t, m, c, in, account)
}

// checkRole: the Argo CD role is the account's, or an allowed role of the
// account named by the role tag; a refused tag gives no role at all.
func checkRole(t *testing.T, m *mapper, c *sources.Cluster, in *types.Cluster, account Account) {
	t.Helper()
	role := ""
	if c.Auth.AWS != nil {
		role = c.Auth.AWS.RoleARN
	} else if i := slices.Index(c.Auth.Exec.Args, "--role-arn"); i >= 0 {
		role = c.Auth.Exec.Args[i+1]
	}
	if strings.HasPrefix(c.NotReadyReason, reasonRoleTag) {
		if role != "" {
			t.Fatalf("a refused role tag, and role %q", role)
		}
		return
	}
	if role == account.ArgocdRoleARN {
		return
	}
	a, ok := parseRoleARN(role)
	if !ok || role != in.Tags[m.roleTag] || a.AccountID != account.ID || a.Partition != "aws" ||
		!slices.ContainsFunc(m.rolePatterns, func(p string) bool { ok, _ := path.Match(p, role); return ok }) {
		t.Fatalf("role %q is neither the account's nor an allowed tag", role)
	}
}
