package e2e

import (
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/authn"
)

// eksClusterName is the cluster name the suite's kube-apiserver answers to
// as an EKS cluster: the x-k8s-aws-id a token must be signed for.
const eksClusterName = "e2e-eks"

// startControlPlane starts the cloud token webhook (internal/fake/authn),
// then the control plane with the kube-apiserver flags that make it
// consult the webhook, after its own authenticators, for the tokens they
// do not accept, as EKS consults aws-iam-authenticator and AKS its Entra
// ID guard.
func (x *env) startControlPlane() (*rest.Config, error) {
	a, err := authn.Start(x.dir)
	if err != nil {
		return nil, fmt.Errorf("cloud token webhook: %w", err)
	}
	x.cloudAuthn = a
	x.testEnv.ControlPlane.GetAPIServer().Configure().
		Set("authentication-token-webhook-config-file", a.ConfigFile()).
		Set("authentication-token-webhook-version", "v1")
	return x.testEnv.Start()
}
