package eks

import (
	"context"
	"errors"
	"net"
	"strings"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// The caller adds a constant source label through the Registerer, so no
// metric here has one.
const namespace = "argocd_cluster_discovery_eks"

type metrics struct {
	duration *prometheus.HistogramVec
	apiCalls *prometheus.CounterVec
	cache    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	clusters *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "listing_duration_seconds",
			Help:    "Duration of listing, tagging and describing the clusters of one account and region, successful or not.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"account", "region"}),
		apiCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "api_calls_total",
			Help: "AWS API requests sent (each retry counts), by operation (ListClusters, GetResources, DescribeCluster, AssumeRole) and outcome (success or an error kind).",
		}, []string{"operation", "outcome"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "describe_cache_total",
			Help: "Listed cluster names answered from the describe cache (hit) or described (miss).",
		}, []string{"result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "errors_total",
			Help: "Listings of an account and region that failed, by error kind.",
		}, []string{"kind", "account", "region"}),
		clusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "clusters",
			Help: "Clusters seen in the last complete listing (those a private endpoint policy leaves out included), by EKS status.",
		}, []string{"status"}),
	}
	for _, s := range types.ClusterStatus("").Values() {
		m.clusters.WithLabelValues(string(s))
	}
	m.cache.WithLabelValues("hit")
	m.cache.WithLabelValues("miss")
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.duration, m.apiCalls, m.cache, m.errors, m.clusters} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// countRequests is an SDK APIOptions entry: it counts every attempt of
// every operation, after the retryer, so retries are counted too.
func (m *metrics) countRequests(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("ArgocdClusterDiscoveryMetrics",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			outcome := "success"
			if err != nil {
				outcome = errorKind(err)
			}
			m.apiCalls.WithLabelValues(awsmiddleware.GetOperationName(ctx), outcome).Inc()
			return out, md, err
		}), middleware.After)
}

// errorKind classifies an SDK error for metrics and messages. It never
// looks at credentials and returns one of a small fixed set of values.
func errorKind(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case fromSTS(err):
		return "assume_role"
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		if _, ok := retry.DefaultThrottleErrorCodes[code]; ok {
			return "throttled"
		}
		switch {
		case strings.HasPrefix(code, "ExpiredToken"):
			return "expired_token"
		case strings.Contains(code, "AccessDenied"), code == "UnrecognizedClientException", code == "InvalidClientTokenId",
			code == "InvalidSignatureException", code == "SignatureDoesNotMatch", code == "UnauthorizedOperation":
			return "access_denied"
		case code == "ResourceNotFoundException":
			return "not_found"
		}
	}
	var de *smithy.DeserializationError
	if errors.As(err, &de) {
		return "invalid_response"
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		if re.HTTPStatusCode() >= 500 {
			return "server"
		}
		return "client"
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return "network"
	}
	return "other"
}

// fromSTS reports whether err comes from an STS operation, i.e. from
// assuming the discovery role rather than from EKS.
func fromSTS(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if oe, ok := err.(*smithy.OperationError); ok && oe.ServiceID == "STS" {
			return true
		}
	}
	return false
}
