package e2e

import (
	"testing"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/podidentity"
)

// newPodIdentity is the cluster where Argo CD's controller runs, as its
// cloud identities see it (internal/fake/podidentity): the OIDC issuer
// that signs the ServiceAccount tokens Kubernetes projects into the pod,
// trusted by IRSA and Azure workload identity alike.
func newPodIdentity(t *testing.T, issuer string) *podidentity.Issuer {
	t.Helper()
	p, err := podidentity.New(issuer)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tokenFile writes the controller's ServiceAccount token of pod for
// audience, valid for an hour, into a file, as Kubernetes projects one
// into the pod.
func tokenFile(t *testing.T, pod *podidentity.Issuer, audience string) string {
	t.Helper()
	file, err := pod.TokenFile(t.TempDir(), audience)
	if err != nil {
		t.Fatal(err)
	}
	return file
}
