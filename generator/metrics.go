package generator

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "argocd_cluster_discovery", Name: "http_requests_total",
			Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "argocd_cluster_discovery", Name: "http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"route"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.latency} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *httpMetrics) observe(route string, code int, took time.Duration) {
	m.requests.WithLabelValues(route, codeText(code)).Inc()
	m.latency.WithLabelValues(route).Observe(took.Seconds())
}

// codeText avoids an allocation for the codes this server answers.
func codeText(code int) string {
	switch code {
	case 200:
		return "200"
	case 400:
		return "400"
	case 401:
		return "401"
	case 404:
		return "404"
	case 405:
		return "405"
	case 413:
		return "413"
	case 500:
		return "500"
	case 503:
		return "503"
	}
	return strconv.Itoa(code)
}
