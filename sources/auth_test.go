package sources_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestAuthValidate(t *testing.T) {
	fileRef := &sources.SecretRef{File: "/var/run/secrets/token"}
	envRef := &sources.SecretRef{Env: "CLUSTER_TOKEN"}
	secretRef := &sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "creds", Key: "token"}}
	aws := &sources.AWSAuth{ClusterName: "prod", RoleARN: "arn:aws:iam::111111111111:role/deployer", Region: "eu-west-1"}
	exec := &sources.ExecProvider{Command: "argocd-k8s-auth", Args: []string{"azure"}}

	tests := []struct {
		name    string
		auth    sources.Auth
		wantErr string
	}{
		{name: "none", auth: sources.Auth{}},
		{name: "bearer token from file", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: fileRef}},
		{name: "bearer token from env", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: envRef}},
		{name: "bearer token from secret", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: secretRef}},
		{name: "aws", auth: sources.Auth{Kind: sources.AuthAWS, AWS: aws}},
		{name: "aws with cluster name only", auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: "prod"}}},
		{name: "exec", auth: sources.Auth{Kind: sources.AuthExec, Exec: exec}},

		{name: "none kind with token", auth: sources.Auth{TokenRef: fileRef}, wantErr: "auth kind is empty but credentials are set"},
		{name: "none kind with aws", auth: sources.Auth{AWS: aws}, wantErr: "auth kind is empty but credentials are set"},
		{name: "none kind with exec", auth: sources.Auth{Exec: exec}, wantErr: "auth kind is empty but credentials are set"},
		{name: "bearer without reference", auth: sources.Auth{Kind: sources.AuthBearerToken}, wantErr: "bearer token auth needs a token reference"},
		{name: "bearer with empty reference", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{}}, wantErr: "token reference: set exactly one of file, env or secret (got 0)"},
		{name: "bearer with file and env", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{File: "/t", Env: "T"}}, wantErr: "token reference: set exactly one of file, env or secret (got 2)"},
		{name: "bearer with secret missing key", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "creds"}}}, wantErr: "token reference: secret reference needs both name and key"},
		{name: "aws without section", auth: sources.Auth{Kind: sources.AuthAWS}, wantErr: "aws auth needs a cluster name"},
		{name: "aws without cluster name", auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{RoleARN: "arn:aws:iam::1:role/x"}}, wantErr: "aws auth needs a cluster name"},
		{name: "exec without section", auth: sources.Auth{Kind: sources.AuthExec}, wantErr: "exec auth needs a command"},
		{name: "exec without command", auth: sources.Auth{Kind: sources.AuthExec, Exec: &sources.ExecProvider{Args: []string{"azure"}}}, wantErr: "exec auth needs a command"},

		{name: "kind aws but token set", auth: sources.Auth{Kind: sources.AuthAWS, TokenRef: fileRef}, wantErr: "aws auth needs a cluster name"},
		{name: "kind exec but aws set", auth: sources.Auth{Kind: sources.AuthExec, AWS: aws}, wantErr: "exec auth needs a command"},
		{name: "kind bearer but exec set", auth: sources.Auth{Kind: sources.AuthBearerToken, Exec: exec}, wantErr: "bearer token auth needs a token reference"},

		{name: "token and aws", auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: fileRef, AWS: aws}, wantErr: "set at most one of bearer token, aws, exec and agent"},
		{name: "token and exec", auth: sources.Auth{Kind: sources.AuthExec, TokenRef: fileRef, Exec: exec}, wantErr: "set at most one of bearer token, aws, exec and agent"},
		{name: "aws and exec", auth: sources.Auth{Kind: sources.AuthAWS, AWS: aws, Exec: exec}, wantErr: "set at most one of bearer token, aws, exec and agent"},
		{name: "all three", auth: sources.Auth{Kind: sources.AuthAWS, TokenRef: fileRef, AWS: aws, Exec: exec}, wantErr: "set at most one of bearer token, aws, exec and agent"},
		{name: "two forms and no kind", auth: sources.Auth{TokenRef: fileRef, Exec: exec}, wantErr: "set at most one of bearer token, aws, exec and agent"},

		{name: "unknown kind", auth: sources.Auth{Kind: "oidc"}, wantErr: `unknown auth kind "oidc"`},
		{name: "kind with wrong case", auth: sources.Auth{Kind: "BearerToken", TokenRef: fileRef}, wantErr: `unknown auth kind "BearerToken"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.auth.Validate()
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestSecretRefValidate(t *testing.T) {
	tests := []struct {
		name    string
		ref     sources.SecretRef
		wantErr string
	}{
		{name: "file", ref: sources.SecretRef{File: "/var/run/secrets/token"}},
		{name: "relative file", ref: sources.SecretRef{File: "token"}},
		{name: "env", ref: sources.SecretRef{Env: "CLUSTER_TOKEN"}},
		{name: "secret", ref: sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "creds", Key: "token"}}},

		{name: "empty", ref: sources.SecretRef{}, wantErr: "set exactly one of file, env or secret (got 0)"},
		{name: "file and env", ref: sources.SecretRef{File: "/t", Env: "T"}, wantErr: "(got 2)"},
		{name: "file and secret", ref: sources.SecretRef{File: "/t", Secret: &sources.SecretKeyRef{Name: "n", Key: "k"}}, wantErr: "(got 2)"},
		{name: "env and secret", ref: sources.SecretRef{Env: "T", Secret: &sources.SecretKeyRef{Name: "n", Key: "k"}}, wantErr: "(got 2)"},
		{name: "all three", ref: sources.SecretRef{File: "/t", Env: "T", Secret: &sources.SecretKeyRef{Name: "n", Key: "k"}}, wantErr: "(got 3)"},
		{name: "secret without name", ref: sources.SecretRef{Secret: &sources.SecretKeyRef{Key: "token"}}, wantErr: "secret reference needs both name and key"},
		{name: "secret without key", ref: sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "creds"}}, wantErr: "secret reference needs both name and key"},
		{name: "secret empty", ref: sources.SecretRef{Secret: &sources.SecretKeyRef{}}, wantErr: "secret reference needs both name and key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.ref.Validate()
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestSecretRefString(t *testing.T) {
	tests := []struct {
		name string
		ref  *sources.SecretRef
		want string
	}{
		{name: "nil", ref: nil, want: "<none>"},
		{name: "empty", ref: &sources.SecretRef{}, want: "<empty>"},
		{name: "file", ref: &sources.SecretRef{File: "/var/run/secrets/token"}, want: "file:/var/run/secrets/token"},
		{name: "env", ref: &sources.SecretRef{Env: "CLUSTER_TOKEN"}, want: "env:CLUSTER_TOKEN"},
		{name: "secret", ref: &sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "creds", Key: "token"}}, want: "secret:creds/token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.ref.String())
			assert.Equal(t, tt.want, fmt.Sprint(tt.ref), "fmt must use String")
		})
	}
}

// The values behind the references exist (a file and an environment
// variable); neither String nor the JSON form of a cluster may show them.
func TestSecretRefNeverShowsValue(t *testing.T) {
	const fileValue = "file-token-value-4b1d"
	const envValue = "env-token-value-9c3e"
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(fileValue), 0o600))
	t.Setenv("SOURCES_TEST_TOKEN", envValue)

	tests := []struct {
		name string
		ref  *sources.SecretRef
		want string
	}{
		{name: "file", ref: &sources.SecretRef{File: path}, want: "file:" + path},
		{name: "env", ref: &sources.SecretRef{Env: "SOURCES_TEST_TOKEN"}, want: "env:SOURCES_TEST_TOKEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.ref.Validate())
			for _, s := range []string{tt.ref.String(), fmt.Sprintf("%v", tt.ref), fmt.Sprintf("%+v", *tt.ref)} {
				assert.NotContains(t, s, fileValue)
				assert.NotContains(t, s, envValue)
			}
			assert.Equal(t, tt.want, tt.ref.String())

			c := sources.Cluster{Name: "c", Server: "https://c.example.com", Auth: sources.Auth{Kind: sources.AuthBearerToken, TokenRef: tt.ref}}
			b, err := json.Marshal(c)
			require.NoError(t, err)
			assert.NotContains(t, string(b), fileValue)
			assert.NotContains(t, string(b), envValue)
		})
	}
}
