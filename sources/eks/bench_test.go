package eks

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkClusters lists a fleet spread over 4 regions of one account
// through the real SDK and the fake, and reports the API calls of one
// refresh: cold (empty describe cache) and steady (every name cached). A
// steady refresh costs the ListClusters and GetResources pages of each
// region (100 names or tagged clusters a page: 2,000 clusters in 4 regions
// are 20 + 20 calls) and no describe.
// With latency, each call spends that long in the fake, which shows what
// the concurrency bound buys.
func BenchmarkClusters(b *testing.B) {
	regions := []string{"eu-west-1", "eu-central-1", "us-east-1", "us-west-2"}
	for _, size := range []int{1000, 2000} {
		for _, latency := range []time.Duration{0, 5 * time.Millisecond} {
			f := newFake(b)
			f.Delay = latency
			for i, r := range regions {
				f.add(acctA, r, names(fmt.Sprintf("r%d", i), size/len(regions))...)
			}
			cfg := f.testConfig()
			cfg.Regions = regions
			name := fmt.Sprintf("clusters=%d/latency=%s", size, latency)

			b.Run(name+"/cold", func(b *testing.B) {
				f.resetCounts()
				for b.Loop() {
					b.StopTimer()
					s, _ := f.newSource(b, cfg, nil)
					b.StartTimer()
					got, err := s.Clusters(context.Background())
					require.NoError(b, err)
					require.Len(b, got, size)
				}
				reportCalls(b, f)
			})
			b.Run(name+"/steady", func(b *testing.B) {
				s, _ := f.newSource(b, cfg, nil)
				_, err := s.Clusters(context.Background())
				require.NoError(b, err)
				f.resetCounts()
				for b.Loop() {
					got, err := s.Clusters(context.Background())
					require.NoError(b, err)
					require.Len(b, got, size)
				}
				reportCalls(b, f)
			})
		}
	}
}

// reportCalls reports every upstream call (calls/refresh), and the
// describes and the tagging pages among them.
func reportCalls(b *testing.B, f *fakeAWS) {
	b.ReportMetric(float64(f.count("ListClusters")+f.count("GetResources")+f.count("DescribeCluster"))/float64(b.N), "calls/refresh")
	b.ReportMetric(float64(f.count("DescribeCluster"))/float64(b.N), "describes/refresh")
	b.ReportMetric(float64(f.count("GetResources"))/float64(b.N), "tagcalls/refresh")
}
