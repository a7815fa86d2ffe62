package eks

import (
	"context"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// metrics are the shared upstream metrics (see upstream.Metrics) and the
// eks source's own:
//
//	describe_cache_total{result}   listed names answered from the describe cache (hit) or described (miss)
//
// The caller adds the source label through the Registerer.
type metrics struct {
	*upstream.Metrics
	cache *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	cache := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: upstream.Namespace(sources.ProviderEKS), Name: "describe_cache_total",
		Help: "Listed cluster names answered from the describe cache (hit) or described (miss).",
	}, []string{"result"})
	cache.WithLabelValues("hit")
	cache.WithLabelValues("miss")
	m, err := upstream.NewMetrics(sources.ProviderEKS, reg, cache)
	if err != nil {
		return nil, err
	}
	return &metrics{Metrics: m, cache: cache}, nil
}

// countRequests is an SDK APIOptions entry: it counts every attempt of
// every operation, after the retryer, so retries are counted too.
func (m *metrics) countRequests(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("ArgocdClusterDiscoveryMetrics",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			m.Request(awsmiddleware.GetOperationName(ctx), classified(err))
			return out, md, err
		}), middleware.After)
}
