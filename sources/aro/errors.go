package aro

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// The operations this source calls: the operation label of
// api_requests_total and errors_total, and upstream.Error.Operation. Their
// ARM errors are classified and told in one line by sources/azurearm.
const (
	opSubscriptions = azurearm.OpSubscriptions
	opClusters      = "openShiftClusters.list"
	// opTokenBindings is the list of the token Secrets bound to the
	// clusters (sources.TokenBindings), on the Kubernetes API.
	opTokenBindings = "tokenBindings.list"
	// opAgents is the list of the agents' cluster Secrets (auth agent).
	opAgents = "agents.list"
)

// kubernetesError is a failed list of the token bindings or the agents
// (op, named what): classified by the Kubernetes API's status when it
// answered, else as upstream.Classify says. Its message is the lister's,
// which names the namespace and never a credential.
func kubernetesError(op, what string, err error) *upstream.Error {
	kind := upstream.Classify(err)
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code >= 400 && kind != upstream.KindCanceled && kind != upstream.KindTimeout {
		kind = upstream.ForStatus(int(st.Status().Code))
	}
	return &upstream.Error{Kind: kind, Operation: op, Msg: what + ": " + azurearm.FirstLine(err.Error()), Err: err}
}
