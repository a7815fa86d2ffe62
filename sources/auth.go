package sources

import (
	"context"
	"fmt"
)

// AuthKind says which form of credentials a cluster uses.
type AuthKind string

// The authentication forms a cluster Secret can carry.
const (
	AuthNone        AuthKind = ""
	AuthBearerToken AuthKind = "bearerToken"
	AuthAWS         AuthKind = "aws"
	AuthExec        AuthKind = "exec"
	// AuthAgent: Argo CD reaches the cluster through the Argo CD agent,
	// with the Secret the agent's tooling wrote (see AgentAuth); the
	// service writes none.
	AuthAgent AuthKind = "agent"
)

// Auth describes, without any secret value, how Argo CD authenticates to a
// cluster. At most one of TokenRef, AWS, Exec and Agent is set, matching
// Kind.
type Auth struct {
	Kind AuthKind `json:"kind,omitempty"`
	// TokenRef points at a bearer token; the token itself is read only when
	// a Secret is written.
	TokenRef *SecretRef `json:"tokenRef,omitempty"`
	// AWS is Argo CD's awsAuthConfig.
	AWS *AWSAuth `json:"aws,omitempty"`
	// Exec is Argo CD's execProviderConfig.
	Exec *ExecProvider `json:"exec,omitempty"`
	// Agent is the agent whose Secret Argo CD uses.
	Agent *AgentAuth `json:"agent,omitempty"`
}

// SecretRef points at a secret value without holding it: exactly one of
// File (a path, re-read when it changes), Env (an environment variable),
// Secret (a key of a Kubernetes Secret in the Argo CD namespace) or Issued
// (a token the source mints for one cluster) is set.
type SecretRef struct {
	File   string        `json:"file,omitempty"`
	Env    string        `json:"env,omitempty"`
	Secret *SecretKeyRef `json:"secret,omitempty"`
	// Issued is set by sources only, never in the configuration file.
	Issued *IssuedToken `json:"issued,omitempty"`
}

// IssuedToken names a token that the source Source mints for its cluster
// Cluster (its ID in the source), such as a Rancher token scoped to that
// cluster: the source, as a TokenIssuer, gives its value when a Secret is
// written.
type IssuedToken struct {
	Source  string `json:"source"`
	Cluster string `json:"cluster"`
}

// TokenIssuer is implemented by a source that mints a credential per
// cluster. The cluster Secret writer asks it for the token of each cluster
// whose Auth references an IssuedToken, and tells it when a cluster's
// token is no longer needed.
type TokenIssuer interface {
	// IssueToken returns a valid token for the cluster (its ID in the
	// source), minting or renewing it as needed. The value is written only
	// into that cluster's Secret.
	IssueToken(ctx context.Context, clusterID string) (string, error)
	// ReleaseToken revokes the cluster's token: its departure is confirmed,
	// or its Secret was deleted. Releasing an unknown cluster is no error.
	ReleaseToken(ctx context.Context, clusterID string) error
}

// TokenKeeper is a TokenIssuer whose tokens outlive the process: a
// token's value lives in the cluster Secret written with it, so a
// leadership term begins by adopting what our Secrets hold, and nothing is
// revoked while a Secret may still hold it.
type TokenKeeper interface {
	TokenIssuer
	// AdoptTokens begins a leadership term, before its first IssueToken:
	// the issuer forgets every token it held (the leader of the terms
	// between may have revoked them) and takes the tokens our Secrets hold
	// (bearer values by cluster ID) where they are still valid.
	// installation identifies this installation in what it mints.
	// IssueToken fails until AdoptTokens has succeeded in the term.
	AdoptTokens(ctx context.Context, installation string, held map[string]string) error
	// TokenWritten says that the cluster's Secret holds value now.
	TokenWritten(clusterID, value string)
	// SweepTokens revokes the tokens no Secret needs any more, a grace
	// period after their replacements were written.
	SweepTokens(ctx context.Context) error
	// RevokeTokens revokes every token the installation minted, held by a
	// Secret or not (at uninstall), and returns how many it revoked.
	RevokeTokens(ctx context.Context, installation string) (int, error)
}

// SecretKeyRef names a key of a Kubernetes Secret.
type SecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// String describes the reference, never the value.
func (r *SecretRef) String() string {
	switch {
	case r == nil:
		return "<none>"
	case r.File != "":
		return "file:" + r.File
	case r.Env != "":
		return "env:" + r.Env
	case r.Secret != nil:
		return "secret:" + r.Secret.Name + "/" + r.Secret.Key
	case r.Issued != nil:
		return "issued:" + r.Issued.Source + "/" + r.Issued.Cluster
	}
	return "<empty>"
}

// Validate checks that exactly one kind of reference is set.
func (r *SecretRef) Validate() error {
	n := 0
	if r.File != "" {
		n++
	}
	if r.Env != "" {
		n++
	}
	if r.Secret != nil {
		n++
		if r.Secret.Name == "" || r.Secret.Key == "" {
			return fmt.Errorf("secret reference needs both name and key")
		}
	}
	if r.Issued != nil {
		n++
		if r.Issued.Source == "" || r.Issued.Cluster == "" {
			return fmt.Errorf("issued token reference needs both source and cluster")
		}
	}
	if n != 1 {
		return fmt.Errorf("set exactly one of file, env or secret (got %d)", n)
	}
	return nil
}
