package azurearm

import (
	"context"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// OpSubscriptions is the operation of the subscription list: the
// operation label of api_requests_total and errors_total, and
// upstream.Error.Operation.
const OpSubscriptions = "subscriptions.list"

// sdkSubscriptionsList is the SDK's name of the subscription list, the
// runtime.CtxAPINameKey of its requests.
const sdkSubscriptionsList = "Client.NewListPager"

// NewCountingPolicy returns the policy that counts every HTTP attempt in
// m's api_requests_total. The client options of NewClient run it per
// retry, after the bearer token policy, so it sees exactly the requests
// sent. operations names the provider's SDK operations (the SDK's API
// name, e.g. "ManagedClustersClient.NewListPager", to the operation
// label); the subscription list is OpSubscriptions, the resource group
// list OpResourceGroups, anything else "other".
func NewCountingPolicy(m *upstream.Metrics, operations map[string]string) policy.Policy {
	return countingPolicy{m: m, operations: operations}
}

type countingPolicy struct {
	m          *upstream.Metrics
	operations map[string]string
}

// Do sends the request and counts it. A request cut short because the
// listing ended counts as its context's error (canceled): the transport's
// error carries the context's cause, which may be another subscription's
// failure (the errgroup cancels with it), not this request's.
func (p countingPolicy) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	counted := err
	if ctxErr := req.Raw().Context().Err(); err != nil && ctxErr != nil {
		counted = ctxErr
	}
	p.m.Request(p.operation(req.Raw().Context()), requestError(resp, counted))
	return resp, err
}

// operation names the SDK operation of a request, for the operation
// label.
func (p countingPolicy) operation(ctx context.Context) string {
	if s, ok := ctx.Value(runtime.CtxAPINameKey{}).(string); ok {
		switch s {
		case sdkSubscriptionsList:
			return OpSubscriptions
		case sdkResourceGroupsList:
			return OpResourceGroups
		}
		if op, known := p.operations[s]; known {
			return op
		}
	}
	return "other"
}

// requestError is nil for a request that succeeded, else an error of its
// kind: by the transport's error, or by the status.
func requestError(resp *http.Response, err error) error {
	switch {
	case err != nil:
		return &upstream.Error{Kind: Classify(err), Err: err}
	case resp == nil:
		return &upstream.Error{Kind: upstream.KindOther}
	case resp.StatusCode >= http.StatusBadRequest:
		return &upstream.Error{Kind: upstream.ForStatus(resp.StatusCode)}
	}
	return nil
}

// SetListed sets m's gauges of a complete listing: the clusters listed by
// phase, the upstream states and skips of n, and clusters_not_ready from
// notReady. Unlike upstream's Listed, clusters_not_ready is counted by
// reason kind, a fixed set of the provider's, rather than by the
// clusters' NotReadyReason, which quotes ARM's messages and resource ids
// and would make label values of them.
func SetListed(m *upstream.Metrics, out []sources.Cluster, notReady map[string]int, n Counts) {
	m.Listed(nil, n.States, n.Skipped)
	for i := range out {
		m.Clusters.WithLabelValues(string(out[i].Phase.OrReady())).Inc()
	}
	for r, k := range notReady {
		m.NotReady.WithLabelValues(r).Set(float64(k))
	}
}
