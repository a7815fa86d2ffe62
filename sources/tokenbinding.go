package sources

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Token bindings: how an operator gives a cluster a bearer token that no
// upstream API hands out (an Azure Red Hat OpenShift cluster does not
// accept Entra ID tokens, and the ARM credential actions give admin
// material only). The operator creates, in the Argo CD namespace, a Secret
// holding the token under TokenBindingKey, labelled LabelTokenBinding with
// the provider's name and annotated AnnotationTokenBinding with the
// cluster's identity in its source (for ARO its ARM resource id). Nothing a
// cluster's owner writes (a tag, a name) can point a cluster at another
// cluster's token: only the annotation binds, and it is written by whoever
// may write Secrets in Argo CD's namespace.
const (
	// LabelTokenBinding marks a token Secret; its value is the provider.
	LabelTokenBinding = "argocd-cluster-discovery.io/token-for"
	// AnnotationTokenBinding is the identity of the cluster the token is
	// for, compared case-insensitively.
	AnnotationTokenBinding = "argocd-cluster-discovery.io/cluster-id"
	// TokenBindingKey is the key of the token in the Secret.
	TokenBindingKey = "token"
)

// TokenBindings finds the token Secrets of a provider's clusters. It reads
// metadata only: the token is read when a cluster Secret is written.
type TokenBindings interface {
	// Bound returns the names of the Secrets bound to each cluster
	// identity (lower case) of provider, sorted. An error means the
	// bindings are unknown: the listing that needs them fails.
	Bound(ctx context.Context, provider Provider) (map[string][]string, error)
}

// BoundToken is the token reference of the cluster whose identity is id,
// given the bindings of its provider, or why it has none: no Secret is
// bound to it, or more than one is (never guessed between).
func BoundToken(bindings map[string][]string, id string) (*SecretRef, error) {
	names := bindings[strings.ToLower(id)]
	switch len(names) {
	case 0:
		return nil, fmt.Errorf("no token Secret: create one labelled %s and annotated %s=%s, with the token under %q",
			LabelTokenBinding, AnnotationTokenBinding, id, TokenBindingKey)
	case 1:
		return &SecretRef{Secret: &SecretKeyRef{Name: names[0], Key: TokenBindingKey}}, nil
	}
	return nil, fmt.Errorf("%d token Secrets are bound to it (%s): keep one", len(names), strings.Join(slices.Sorted(slices.Values(names)), ", "))
}
