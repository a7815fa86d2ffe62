package eks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// caData is the fixture's CA, a valid base64 PEM bundle.
const caData = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSURHekNDQWdPZ0F3SUJBZ0lVYTJpNXZlUHJYeUxCTjczaDhIK3RuWkljVW9rd0RRWUpLb1pJaHZjTkFRRUwKQlFBd0ZURVRNQkVHQTFVRUF3d0thM1ZpWlhKdVpYUmxjekFlRncweU5qRXhNakV4TWpVNU1EQmFGdzB6TmpFeApNVGd4TWpVNU1EQmFNQlV4RXpBUkJnTlZCQU1NQ210MVltVnlibVYwWlhNd2dnRWlNQTBHQ1NxR1NJYjNEUUVCCkFRVUFBNElCRHdBd2dnRUtBb0lCQVFDbFg3MmNUMjFBOUh1MW1hUjR1ellJWU41dkNGZU9GMnRsbkUxcDBFVzkKV3FHbmdhcnVuM1JhZnM4aHZPajFrMDBrUklpcHJFVGFZMnkzb0xPQlFUbXdSalJ5TFlLcTJJejdheE03cWUvVApySzdVL0ttVzV5WCtKQmRyVHd4NTNMRzIxcytHRUxUM1daSEtpMHluaHBSaEtYOG9aNmlVSHIyWGh6WGpqc0JHCnV2WkNwQkxzVyttcVU0bG9qdGd2alBWVjdPTG9CWStKbll2NkhXUHcveUlIRXMrRWdWT2tCZnd0bm1iRXhMeXoKbEFzK0FTWSt2S21PdHhuMXgrOFFqUXBmanZJbVFDelBCMDlKYTNITmZLQWQwM09aZE9CRkJkMHlUZFlhNmR2cwo0SWorYUNOR2ZuWTBwdjJGbUFodVFSd1Z0RGFlL1lrMGYvbUZEWGU0U0NoQkFnTUJBQUdqWXpCaE1CMEdBMVVkCkRnUVdCQlRVeUVhNVRLYnJtcHJUMjJaaHZxYVRkQmpYVHpBZkJnTlZIU01FR0RBV2dCVFV5RWE1VEticm1wclQKMjJaaHZxYVRkQmpYVHpBUEJnTlZIUk1CQWY4RUJUQURBUUgvTUE0R0ExVWREd0VCL3dRRUF3SUNwREFOQmdrcQpoa2lHOXcwQkFRc0ZBQU9DQVFFQWhOQXlaR1VCdU44dkhDbDFCbGs3NFNtTDMrWVZENlF0bWFpQjBCck1RYU9VCnQzVmllOGF0UG96d09qMlRtT3FVUEF5RE9wWklmR210MThBSE53N0tTdVdmT0JDNWVXa3ZjRnFRSzA5enBoNzMKRURSYndEb0JPMG1pVTN5THlYS2szSWFGRlc2L0V0UW4yemtudW5ic2FlbW02SG9iNjczdG0xaTNWSGVIdVRjcgo5T255TGsxQlByNFhsUXpKdWllL0xjL1RoY0EzRXVZaklaRkFmODF5SXFqUnpIa1JhRnNldms0aFJUcUpIT2FJCmxqMTBtQlBBNElWN2U0T1cyb09RclRCUEE3T1BkMGlhclk5Ky82bWhmMVNUS3M2clRPRUxjVVkvRm45Nmc0Rk0KYmhSWkVhODJoUjhsT1pjd1B3MkloNkw1WDBham0vMkFBNjZHMGNlT3hRPT0KLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="

// mappingAccount is the account of the toCluster cases.
var mappingAccount = Account{ID: "123456789012", ArgocdRoleARN: "arn:aws:iam::123456789012:role/argocd"}

// activeCluster is an ACTIVE public cluster, its tags (from GetResources)
// in Tags; cases change what they test.
func activeCluster() *types.Cluster {
	return &types.Cluster{
		Name: aws.String("payments-prod"), Arn: aws.String("arn:aws:eks:eu-west-1:123456789012:cluster/payments-prod"),
		Status: types.ClusterStatusActive, Version: aws.String("1.31"),
		Endpoint:             aws.String("https://ABC.gr7.eu-west-1.eks.amazonaws.com/"),
		CertificateAuthority: &types.Certificate{Data: aws.String(caData)},
		ResourcesVpcConfig:   &types.VpcConfigResponse{EndpointPublicAccess: true, EndpointPrivateAccess: true},
		Tags:                 map[string]string{"team": "payments", "tenant": "acme", "argocd-project": "payments", "aws:cloudformation:stack-name": "x"},
	}
}

// activeWant is what activeCluster maps to with the default configuration.
func activeWant() sources.Cluster {
	return sources.Cluster{
		Provider: sources.ProviderEKS, Name: "payments-prod", Server: "https://ABC.gr7.eu-west-1.eks.amazonaws.com",
		ID: "arn:aws:eks:eu-west-1:123456789012:cluster/payments-prod",
		CA: sources.CAFromData(caData), Account: "123456789012", Region: "eu-west-1", KubernetesVersion: "1.31", State: "ACTIVE",
		Phase: sources.PhaseReady, Ready: true,
		Tenant: "acme", Project: "payments", TenantFromOwner: true, ProjectFromOwner: true, CloudID: "eks/123456789012/eu-west-1/payments-prod",
		Auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{
			ClusterName: "payments-prod", RoleARN: "arn:aws:iam::123456789012:role/argocd", Region: "eu-west-1"}},
		Labels:      map[string]string{"team": "payments", "tenant": "acme", "argocd-project": "payments"},
		Annotations: map[string]string{AnnotationARN: "arn:aws:eks:eu-west-1:123456789012:cluster/payments-prod"},
	}
}

// toClusterCase changes the configuration, the cluster or the account of
// activeCluster, and what it maps to.
type toClusterCase struct {
	name     string
	cfg      func(*Config)
	cluster  func(*types.Cluster)
	want     func(*sources.Cluster)
	skip     string
	err      string
	dropped  []string
	account  *Account
	notReady string
}

var toClusterCases = []toClusterCase{
	{name: "defaults"},
	{name: "exec form", cfg: func(c *Config) { c.Auth.Mode = AuthModeExec }, want: func(c *sources.Cluster) {
		c.Auth = sources.Auth{Kind: sources.AuthExec, Exec: &sources.ExecProvider{Command: "argocd-k8s-auth",
			Args: []string{"aws", "--cluster-name", "payments-prod", "--role-arn", "arn:aws:iam::123456789012:role/argocd"},
			Env:  map[string]string{"AWS_REGION": "eu-west-1"}, APIVersion: ExecAPIVersion}}
	}},
	{name: "exec form without an Argo CD role", cfg: func(c *Config) { c.Auth = AuthConfig{Mode: AuthModeExec, Command: "/usr/local/bin/argocd-k8s-auth"} },
		account: &Account{ID: "123456789012"}, want: func(c *sources.Cluster) {
			c.Auth = sources.Auth{Kind: sources.AuthExec, Exec: &sources.ExecProvider{Command: "/usr/local/bin/argocd-k8s-auth",
				Args: []string{"aws", "--cluster-name", "payments-prod"}, Env: map[string]string{"AWS_REGION": "eu-west-1"}, APIVersion: ExecAPIVersion}}
		}},
	{name: "name template", cfg: func(c *Config) { c.NameTemplate = "eks-{{.Account}}-{{.Region}}-{{.Name}}" },
		want: func(c *sources.Cluster) { c.Name = "eks-123456789012-eu-west-1-payments-prod" }},
	{name: "private, policy include", cluster: func(c *types.Cluster) { c.ResourcesVpcConfig.EndpointPublicAccess = false },
		want: func(c *sources.Cluster) { c.Labels[LabelPrivateEndpoint] = "true" }},
	{name: "private, policy proxy", cfg: func(c *Config) {
		c.PrivateEndpoints = PrivateEndpoints{Policy: PrivateProxy, ProxyURL: "http://proxy:3128"}
	},
		cluster: func(c *types.Cluster) { c.ResourcesVpcConfig.EndpointPublicAccess = false },
		want:    func(c *sources.Cluster) { c.Labels[LabelPrivateEndpoint] = "true"; c.ProxyURL = "http://proxy:3128" }},
	{name: "public, policy proxy", cfg: func(c *Config) {
		c.PrivateEndpoints = PrivateEndpoints{Policy: PrivateProxy, ProxyURL: "http://proxy:3128"}
	}},
	{name: "private, policy exclude", cfg: func(c *Config) { c.PrivateEndpoints.Policy = PrivateExclude },
		cluster: func(c *types.Cluster) { c.ResourcesVpcConfig.EndpointPublicAccess = false }, skip: reasonPrivateEndpoint},
	{name: "DELETING is listed, leaving", cluster: func(c *types.Cluster) { c.Status = types.ClusterStatusDeleting },
		want: func(c *sources.Cluster) { c.State, c.Phase = "DELETING", sources.PhaseLeaving }},
	{name: "UPDATING is listed, degraded and still renderable", cluster: func(c *types.Cluster) { c.Status = types.ClusterStatusUpdating },
		want: func(c *sources.Cluster) { c.State, c.Phase = "UPDATING", sources.PhaseDegraded }},
	{name: "FAILED with an endpoint: degraded", cluster: func(c *types.Cluster) { c.Status = types.ClusterStatusFailed },
		want: func(c *sources.Cluster) { c.State, c.Phase = "FAILED", sources.PhaseDegraded }},
	{name: "CREATING without endpoint or CA yet",
		cluster: func(c *types.Cluster) {
			c.Status, c.Endpoint, c.CertificateAuthority = types.ClusterStatusCreating, nil, &types.Certificate{}
		},
		want: func(c *sources.Cluster) {
			c.State, c.Phase, c.Server, c.CA = "CREATING", sources.PhasePending, "", sources.CA{}
		},
		notReady: "EKS reports no endpoint yet (status CREATING)"},
	{name: "FAILED without endpoint: pending, not ready",
		cluster: func(c *types.Cluster) {
			c.Status, c.Endpoint, c.CertificateAuthority = types.ClusterStatusFailed, nil, nil
		},
		want: func(c *sources.Cluster) {
			c.State, c.Phase, c.Server, c.CA = "FAILED", sources.PhasePending, "", sources.CA{}
		},
		notReady: "EKS reports no endpoint yet (status FAILED)"},
	{name: "no ARN: no ID, no annotation", cluster: func(c *types.Cluster) { c.Arn = nil },
		want: func(c *sources.Cluster) { c.ID, c.Annotations = "", nil }},
	{name: "no tags", cluster: func(c *types.Cluster) { c.Tags = nil },
		want: func(c *sources.Cluster) {
			c.Labels, c.Tenant, c.Project, c.TenantFromOwner, c.ProjectFromOwner = nil, "", "", false, false
		}},
	{name: "no CA", cluster: func(c *types.Cluster) { c.CertificateAuthority = nil },
		want: func(c *sources.Cluster) { c.CA = sources.CA{} }, notReady: "EKS reports no certificate authority yet (status ACTIVE)"},
	{name: "CA not PEM", cluster: func(c *types.Cluster) { c.CertificateAuthority.Data = aws.String("bm90IGEgY2VydA==") },
		want: func(c *sources.Cluster) { c.CA = sources.CA{} }, notReady: "invalid certificate authority data: no PEM certificate found"},
	{name: "endpoint not https", cluster: func(c *types.Cluster) { c.Endpoint = aws.String("ftp://x") },
		want: func(c *sources.Cluster) { c.Server = "ftp://x" }, notReady: "invalid endpoint: server url scheme must be https or http"},
	{name: "namespaces", cluster: func(c *types.Cluster) { c.Tags["argocd-namespaces"] = "team-a  team-b,team-a" },
		want: func(c *sources.Cluster) {
			c.Namespaces = []string{"team-a", "team-b"}
			c.Labels["argocd-namespaces"] = "team-a--team-b-team-a"
		}},
	{name: "namespaces invalid: not ready rather than every namespace", cluster: func(c *types.Cluster) { c.Tags["argocd-namespaces"] = "team-a Team_B" },
		want:     func(c *sources.Cluster) { c.Labels["argocd-namespaces"] = "team-a-Team_B" },
		notReady: `tag argocd-namespaces: "Team_B" is not a namespace name`},
	{name: "namespaces empty", cluster: func(c *types.Cluster) { c.Tags["argocd-namespaces"] = " " },
		want:     func(c *sources.Cluster) { c.Labels["argocd-namespaces"] = "" },
		notReady: "tag argocd-namespaces: no namespace listed"},
	{name: "project tag not an AppProject name: not ready, never in a Secret", cluster: func(c *types.Cluster) { c.Tags["argocd-project"] = "Payments Prod" },
		want:     func(c *sources.Cluster) { c.Project, c.Labels["argocd-project"] = "Payments Prod", "Payments-Prod" },
		notReady: "tag argocd-project is not a valid AppProject name"},
	{name: "custom tag keys", cfg: func(c *Config) { c.TenantTag, c.ProjectTag = "team", "nope" },
		want: func(c *sources.Cluster) { c.Tenant, c.Project, c.ProjectFromOwner = "payments", "", false }},
	{name: "tag allow and deny", cfg: func(c *Config) { c.Tags = TagFilter{Allow: []string{"t*"}, Deny: []string{"tenant"}} },
		want: func(c *sources.Cluster) { c.Labels = map[string]string{"team": "payments"} }},
	{name: "no labels at all", cfg: func(c *Config) { c.Tags.Allow = []string{"none"} },
		want: func(c *sources.Cluster) { c.Labels = nil }},
	{name: "tags sanitized or dropped", cluster: func(c *types.Cluster) {
		c.Tags = map[string]string{
			"Cost Center": "R&D / Platform", "kubernetes.io/cluster/x": "owned", "owner": "jane@example.com",
			"eks.argocd-cluster-discovery.io/private-endpoint": "false", "cost-center": "dup",
			"long": strings.Repeat("v", 64), "Ünïcode": "ok", "/": "x",
		}
	}, want: func(c *sources.Cluster) {
		c.Tenant, c.Project, c.TenantFromOwner, c.ProjectFromOwner = "", "", false, false
		c.Labels = map[string]string{"Cost-Center": "R-D---Platform", "kubernetes.io/cluster-x": "owned", "owner": "jane-example.com",
			"cost-center": "dup", "n-code": "ok"}
	}, dropped: []string{
		`tag "/": no valid label key`,
		`tag "eks.argocd-cluster-discovery.io/private-endpoint": prefix eks.argocd-cluster-discovery.io/ is reserved`,
		`tag "long" value: no valid label value: must be no more than 63 `,
	}},
	{name: "cluster of another account", account: &Account{ID: "999999999999"}, err: "cluster payments-prod belongs to account 123456789012"},
	roleTagCase("role tag allowed", "arn:aws:iam::123456789012:role/argocd-payments", ""),
	roleTagCase("role tag with a path", "arn:aws:iam::123456789012:role/teams/payments/argocd", ""),
	roleTagCase("role tag matching no pattern", "arn:aws:iam::123456789012:role/admin",
		`Argo CD role tag argocd-role-arn: "arn:aws:iam::123456789012:role/admin" matches no rolePattern`),
	roleTagCase("role tag, \"*\" does not cross a path", "arn:aws:iam::123456789012:role/x/argocd-payments",
		`Argo CD role tag argocd-role-arn: "arn:aws:iam::123456789012:role/x/argocd-payments" matches no rolePattern`),
	roleTagCase("role tag of another account", "arn:aws:iam::999999999999:role/argocd-payments",
		`Argo CD role tag argocd-role-arn: "arn:aws:iam::999999999999:role/argocd-payments" is a role of account 999999999999, not 123456789012 (the cluster's)`),
	roleTagCase("role tag of another partition", "arn:aws-cn:iam::123456789012:role/argocd-payments",
		`Argo CD role tag argocd-role-arn: "arn:aws-cn:iam::123456789012:role/argocd-payments" is a role of partition aws-cn, not aws (the cluster's)`),
	roleTagCase("role tag not a role", "arn:aws:iam::123456789012:user/argocd-payments",
		`Argo CD role tag argocd-role-arn: "arn:aws:iam::123456789012:user/argocd-payments" is not an IAM role ARN`),
	roleTagCase("role tag malformed", "argocd-payments", `Argo CD role tag argocd-role-arn: "argocd-payments" is not an IAM role ARN`),
	roleTagCase("role tag with a region", "arn:aws:iam:eu-west-1:123456789012:role/argocd-payments",
		`Argo CD role tag argocd-role-arn: "arn:aws:iam:eu-west-1:123456789012:role/argocd-payments" is not an IAM role ARN`),
	roleTagCase("role tag empty", "", `Argo CD role tag argocd-role-arn: "" is not an IAM role ARN`),
	{name: "role tag ignored without rolePattern",
		cluster: func(c *types.Cluster) { c.Tags["argocd-role-arn"] = "arn:aws:iam::123456789012:role/admin" },
		want:    func(c *sources.Cluster) { c.Labels["argocd-role-arn"] = "arn-aws-iam--123456789012-role-admin" }},
	{name: "rolePattern without the tag: the account's role", cfg: func(c *Config) { c.RolePattern = []string{"arn:aws:iam::*:role/*"} }},
	{name: "role tag allowed, exec form", cfg: func(c *Config) { c.Auth.Mode, c.RolePattern = AuthModeExec, []string{"arn:aws:iam::*:role/argocd-*"} },
		cluster: func(c *types.Cluster) { c.Tags["argocd-role-arn"] = "arn:aws:iam::123456789012:role/argocd-payments" },
		want: func(c *sources.Cluster) {
			c.Labels["argocd-role-arn"] = "arn-aws-iam--123456789012-role-argocd-payments"
			c.Auth = sources.Auth{Kind: sources.AuthExec, Exec: &sources.ExecProvider{Command: "argocd-k8s-auth",
				Args: []string{"aws", "--cluster-name", "payments-prod", "--role-arn", "arn:aws:iam::123456789012:role/argocd-payments"},
				Env:  map[string]string{"AWS_REGION": "eu-west-1"}, APIVersion: ExecAPIVersion}}
		}},
	{name: "role tag refused and no endpoint yet: the role's reason first",
		cfg: func(c *Config) { c.RolePattern = []string{"arn:aws:iam::*:role/argocd-*"} },
		cluster: func(c *types.Cluster) {
			c.Tags["argocd-role-arn"] = "admin"
			c.Status, c.Endpoint = types.ClusterStatusCreating, nil
		},
		want: func(c *sources.Cluster) {
			c.Labels["argocd-role-arn"] = "admin"
			c.State, c.Phase, c.Server, c.Auth.AWS.RoleARN = "CREATING", sources.PhasePending, "", ""
		},
		notReady: `Argo CD role tag argocd-role-arn: "admin" is not an IAM role ARN`},
}

// roleTagCase tags activeCluster with the role value, with rolePattern
// allowing roles named argocd-* and teams/*/argocd. An allowed role
// replaces the account's; a refused one leaves the cluster not ready
// with the reason, and with no role rather than the account's.
func roleTagCase(name, value, notReady string) toClusterCase {
	label, err := labelValue(value)
	if err != nil {
		panic(err)
	}
	return toClusterCase{name: name,
		cfg: func(c *Config) {
			c.RolePattern = []string{"arn:aws:iam::*:role/argocd-*", "arn:*:iam::*:role/teams/*/argocd"}
		},
		cluster: func(c *types.Cluster) { c.Tags["argocd-role-arn"] = value },
		want: func(c *sources.Cluster) {
			c.Labels["argocd-role-arn"] = label
			c.Auth.AWS.RoleARN = value
			if notReady != "" {
				c.Auth.AWS.RoleARN = ""
			}
		},
		notReady: notReady,
	}
}

func TestToCluster(t *testing.T) {
	for _, tc := range toClusterCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			cfg.Default()
			m, err := newMapper(cfg)
			require.NoError(t, err)
			c := activeCluster()
			if tc.cluster != nil {
				tc.cluster(c)
			}
			acct := mappingAccount
			if tc.account != nil {
				acct = *tc.account
			}
			got, err := m.toCluster(c, c.Tags, acct, "eu-west-1")
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			if tc.skip != "" {
				assert.Equal(t, tc.skip, got.Skip)
				return
			}
			assert.Empty(t, got.Skip)
			w := activeWant()
			if tc.want != nil {
				tc.want(&w)
			}
			if tc.notReady != "" {
				w.Ready, w.NotReadyReason = false, tc.notReady
			}
			assert.Equal(t, w, got.Cluster)
			for _, d := range tc.dropped {
				assert.True(t, containsPrefix(got.Dropped, d), "dropped %q in %q", d, got.Dropped)
			}
			if tc.dropped == nil {
				assert.Empty(t, got.Dropped)
			}
			if got.Cluster.Ready {
				require.NoError(t, got.Cluster.Validate())
			}
		})
	}
}

// TestPhase is the EKS status → phase table of the package doc.
func TestPhase(t *testing.T) {
	for _, tc := range []struct {
		status      types.ClusterStatus
		hasEndpoint bool
		want        sources.Phase
	}{
		{types.ClusterStatusCreating, false, sources.PhasePending},
		{types.ClusterStatusPending, false, sources.PhasePending},
		{types.ClusterStatusActive, true, sources.PhaseReady},
		{types.ClusterStatusActive, false, sources.PhaseReady},
		{types.ClusterStatusUpdating, true, sources.PhaseDegraded},
		{types.ClusterStatusFailed, true, sources.PhaseDegraded},
		{types.ClusterStatusFailed, false, sources.PhasePending},
		{types.ClusterStatusDeleting, true, sources.PhaseLeaving},
		{types.ClusterStatusDeleting, false, sources.PhaseLeaving},
		{"SUSPENDED", true, sources.PhaseDegraded},
		{"", false, sources.PhaseDegraded},
		{"active", true, sources.PhaseDegraded}, // statuses are upper case: unknown, not ready
	} {
		t.Run(fmt.Sprintf("%s endpoint=%t", tc.status, tc.hasEndpoint), func(t *testing.T) {
			assert.Equal(t, tc.want, phase(tc.status, tc.hasEndpoint))
		})
	}
	t.Run("every status the SDK knows is in the table", func(t *testing.T) {
		for _, st := range types.ClusterStatus("").Values() {
			for _, ep := range []bool{false, true} {
				p := phase(st, ep)
				assert.True(t, p.Valid() && p != "" && p != sources.PhaseAbsent, "%s: %q", st, p)
			}
		}
		assert.Len(t, types.ClusterStatus("").Values(), 6, "a new EKS status: add it to phase and to the package doc")
	})
}

func containsPrefix(ss []string, p string) bool {
	for _, s := range ss {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func TestLabelKeyAndValue(t *testing.T) {
	for _, tc := range []struct{ in, key, value string }{
		{"team", "team", "team"},
		{"Team", "Team", "Team"},
		{"example.com/owner", "example.com/owner", "example.com-owner"},
		{"Example.COM/Owner", "example.com/Owner", "Example.COM-Owner"},
		{"a/b/c", "a/b-c", "a-b-c"},
		{"aws:cloudformation:stack-name", "aws-cloudformation-stack-name", "aws-cloudformation-stack-name"},
		{"  spaced  ", "spaced", "spaced"},
		{"-_.x._-", "x", "x"},
		{"", "", ""},
		{"!!!", "", ""},
		{"a_b.c-d", "a_b.c-d", "a_b.c-d"},
		{strings.Repeat("k", 64), "", ""},
		{"bad..prefix/name", "", "bad..prefix-name"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			key, err := labelKey(tc.in)
			if tc.key == "" {
				assert.Error(t, err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.key, key)
			}
			value, err := labelValue(tc.in)
			if tc.value == "" && tc.in != "" && tc.in != "!!!" {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.value, value)
		})
	}
}
