package static

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// toClusterCase is one input of toCluster and the cluster it must map to,
// or a substring of the error it must fail with.
type toClusterCase struct {
	name    string
	in      Cluster
	want    sources.Cluster
	wantErr string
}

// base returns a valid static cluster named prod, changed by mutate.
func base(mutate func(*Cluster)) Cluster {
	sc := Cluster{Name: "prod", Server: "https://prod.example.com"}
	mutate(&sc)
	return sc
}

// want returns the cluster base's cluster maps to, changed by mutate.
func want(mutate func(*sources.Cluster)) sources.Cluster {
	c := sources.Cluster{Provider: sources.ProviderStatic, Name: "prod", Server: "https://prod.example.com", Ready: true}
	mutate(&c)
	return c
}

// none leaves the wanted cluster as it is.
func none(*sources.Cluster) {}

// runToCluster maps each case's input and checks the cluster or the error.
func runToCluster(t *testing.T, tests []toClusterCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := toCluster(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Equal(t, sources.Cluster{}, got, "no partial cluster on error")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.NoError(t, got.Validate(), "the mapping must produce a valid cluster")
			assert.Empty(t, got.Source, "the source name is set by the inventory, not here")
		})
	}
}

func TestToClusterAuth(t *testing.T) {
	fileRef := &sources.SecretRef{File: "/var/run/secrets/prod-token"}
	envRef := &sources.SecretRef{Env: "PROD_TOKEN"}
	secretRef := &sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "prod-creds", Key: "token"}}
	aws := &sources.AWSAuth{ClusterName: "prod", RoleARN: "arn:aws:iam::111111111111:role/deployer", Region: "eu-west-1"}
	exec := &sources.ExecProvider{Command: "argocd-k8s-auth", Args: []string{"azure"}, Env: map[string]string{"AAD_LOGIN_METHOD": "workloadidentity"}}

	runToCluster(t, []toClusterCase{
		{name: "no auth", in: base(func(*Cluster) {}), want: want(none)},
		{
			name: "bearer token from file",
			in:   base(func(c *Cluster) { c.Auth.BearerToken = fileRef }),
			want: want(func(c *sources.Cluster) { c.Auth = sources.Auth{Kind: sources.AuthBearerToken, TokenRef: fileRef} }),
		},
		{
			name: "bearer token from env",
			in:   base(func(c *Cluster) { c.Auth.BearerToken = envRef }),
			want: want(func(c *sources.Cluster) { c.Auth = sources.Auth{Kind: sources.AuthBearerToken, TokenRef: envRef} }),
		},
		{
			name: "bearer token from secret",
			in:   base(func(c *Cluster) { c.Auth.BearerToken = secretRef }),
			want: want(func(c *sources.Cluster) { c.Auth = sources.Auth{Kind: sources.AuthBearerToken, TokenRef: secretRef} }),
		},
		{
			name: "aws",
			in:   base(func(c *Cluster) { c.Auth.AWS = aws }),
			want: want(func(c *sources.Cluster) { c.Auth = sources.Auth{Kind: sources.AuthAWS, AWS: aws} }),
		},
		{
			name: "exec",
			in:   base(func(c *Cluster) { c.Auth.Exec = exec }),
			want: want(func(c *sources.Cluster) { c.Auth = sources.Auth{Kind: sources.AuthExec, Exec: exec} }),
		},
		{name: "bearer token and aws", in: base(func(c *Cluster) { c.Auth.BearerToken, c.Auth.AWS = fileRef, aws }), wantErr: "auth: set at most one of bearerToken, aws and exec"},
		{name: "bearer token and exec", in: base(func(c *Cluster) { c.Auth.BearerToken, c.Auth.Exec = envRef, exec }), wantErr: "auth: set at most one of bearerToken, aws and exec"},
		{name: "aws and exec", in: base(func(c *Cluster) { c.Auth.AWS, c.Auth.Exec = aws, exec }), wantErr: "auth: set at most one of bearerToken, aws and exec"},
		{name: "all three auth forms", in: base(func(c *Cluster) { c.Auth = Auth{BearerToken: fileRef, AWS: aws, Exec: exec} }), wantErr: "auth: set at most one of bearerToken, aws and exec"},
		{name: "empty bearer token reference", in: base(func(c *Cluster) { c.Auth.BearerToken = &sources.SecretRef{} }), wantErr: "auth: token reference: set exactly one of file, env or secret"},
		{name: "bearer token with file and env", in: base(func(c *Cluster) { c.Auth.BearerToken = &sources.SecretRef{File: "/t", Env: "T"} }), wantErr: "auth: token reference: set exactly one"},
		{name: "aws without cluster name", in: base(func(c *Cluster) { c.Auth.AWS = &sources.AWSAuth{Region: "eu-west-1"} }), wantErr: "auth: aws auth needs a cluster name"},
		{name: "exec without command", in: base(func(c *Cluster) { c.Auth.Exec = &sources.ExecProvider{Args: []string{"x"}} }), wantErr: "auth: exec auth needs a command"},
	})
}

func TestToClusterFields(t *testing.T) {
	caData := testCAData(t)
	aws := &sources.AWSAuth{ClusterName: "prod", RoleARN: "arn:aws:iam::111111111111:role/deployer", Region: "eu-west-1"}

	runToCluster(t, []toClusterCase{
		{
			name: "every field mapped",
			in: base(func(c *Cluster) {
				c.Server = "https://Prod.Example.com:6443/"
				c.CAData = caData
				c.Auth.AWS = aws
				c.Labels = map[string]string{"env": "prod"}
				c.Annotations = map[string]string{"owner": "team@example.com"}
				c.Region, c.Account, c.Tenant, c.Project = "eu-west-1", "111111111111", "acme", "acme-project"
				c.Namespaces = []string{"apps", "jobs"}
				c.ClusterResources = true
				c.KubernetesVersion, c.State = "v1.31.4", "ACTIVE"
			}),
			want: sources.Cluster{
				Provider: sources.ProviderStatic, Name: "prod", Server: "https://Prod.Example.com:6443", CA: sources.CAFromData(caData),
				Auth:   sources.Auth{Kind: sources.AuthAWS, AWS: aws},
				Labels: map[string]string{"env": "prod"}, Annotations: map[string]string{"owner": "team@example.com"},
				Region: "eu-west-1", Account: "111111111111", Tenant: "acme", Project: "acme-project",
				Namespaces: []string{"apps", "jobs"}, ClusterResources: true,
				KubernetesVersion: "v1.31.4", State: "ACTIVE", Ready: true,
			},
		},
		{name: "server trailing slash trimmed", in: base(func(c *Cluster) { c.Server = "https://prod.example.com/" }), want: want(none)},
		{name: "missing name", in: base(func(c *Cluster) { c.Name = "" }), wantErr: "name: required"},
		{name: "missing server", in: base(func(c *Cluster) { c.Server = "" }), wantErr: "server: server url"},
		{name: "server without scheme", in: base(func(c *Cluster) { c.Server = "prod.example.com" }), wantErr: "server: server url scheme must be https or http"},
		{name: "server with user info", in: base(func(c *Cluster) { c.Server = "https://u:p@prod.example.com" }), wantErr: "server: server url must not carry user info"},
		{name: "server with query", in: base(func(c *Cluster) { c.Server = "https://prod.example.com/?x=1" }), wantErr: "server: server url"},
	})
}

func TestToClusterReadyAndPhase(t *testing.T) {
	runToCluster(t, []toClusterCase{
		{name: "ready unset means ready", in: base(func(c *Cluster) { c.Ready = nil }), want: want(none)},
		{name: "ready true", in: base(func(c *Cluster) { c.Ready = boolPtr(true) }), want: want(none)},
		{
			name: "ready true drops a stale reason",
			in:   base(func(c *Cluster) { c.Ready, c.NotReadyReason = boolPtr(true), "old reason" }),
			want: want(none),
		},
		{
			name: "ready false with reason",
			in:   base(func(c *Cluster) { c.Ready, c.NotReadyReason = boolPtr(false), "waiting for the CA" }),
			want: want(func(c *sources.Cluster) { c.Ready, c.NotReadyReason = false, "waiting for the CA" }),
		},
		{
			name: "ready false without reason",
			in:   base(func(c *Cluster) { c.Ready = boolPtr(false) }),
			want: want(func(c *sources.Cluster) { c.Ready = false }),
		},
		{name: "unknown phase", in: base(func(c *Cluster) { c.Phase = "rebooting" }), wantErr: `phase: "rebooting" is not one of`},
		{name: "absent is the inventory's", in: base(func(c *Cluster) { c.Phase = sources.PhaseAbsent }), wantErr: "phase:"},
		{name: "degraded with an id", in: base(func(c *Cluster) { c.Phase, c.ID = sources.PhaseDegraded, "c-42" }),
			want: func() sources.Cluster { w := want(none); w.Phase, w.ID = sources.PhaseDegraded, "c-42"; return w }()},
	})
}

func TestToClusterCAData(t *testing.T) {
	runToCluster(t, []toClusterCase{
		{name: "caData not base64", in: base(func(c *Cluster) { c.CAData = "-----BEGIN CERTIFICATE-----" }), wantErr: "caData: not base64"},
		{name: "caData base64 of non PEM", in: base(func(c *Cluster) { c.CAData = base64.StdEncoding.EncodeToString([]byte("hello")) }), wantErr: "caData: no PEM certificate found"},
		{
			name: "caData corrupt certificate",
			in: base(func(c *Cluster) {
				c.CAData = base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n"))
			}),
			wantErr: "caData: pem block 1:",
		},
		{name: "invalid caData on a not ready cluster", in: base(func(c *Cluster) { c.Ready, c.CAData = boolPtr(false), "!!" }), wantErr: "caData: not base64"},
	})
}
