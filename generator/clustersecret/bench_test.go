package clustersecret

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkColdSync2000 creates the Secrets of 2,000 clusters on the real
// kube-apiserver from nothing (target ≤ 15 s), then makes a steady-state
// pass from the cache (target: 0 lists, 0 writes). Metrics: cold-s, steady-lists,
// steady-writes.
func BenchmarkColdSync2000(b *testing.B) {
	const n = 2000
	names := numbered("c%04d", n)
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b)
		f := newFleet(b, names...)
		r := newReconciler(b, e, f, func(c *Config) { c.Concurrency = 16 })
		b.StartTimer()

		start := time.Now()
		ch, err := r.Pass(context.Background())
		cold := time.Since(start)
		require.NoError(b, err)
		require.Len(b, ch.Create, n)
		require.Len(b, e.secrets(), n, "all Secrets present on the API server")

		e.counter.writes.Store(0)
		e.counter.lists.Store(0)
		ch, err = r.Pass(context.Background())
		require.NoError(b, err)
		require.Equal(b, n, ch.Unchanged)
		b.ReportMetric(cold.Seconds(), "cold-s")
		b.ReportMetric(float64(e.counter.lists.Load()), "steady-lists")
		b.ReportMetric(float64(e.counter.writes.Load()), "steady-writes")
	}
}
