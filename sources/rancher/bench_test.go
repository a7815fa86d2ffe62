package rancher

import (
	"testing"
)

// BenchmarkListClusters lists 10,000 realistic cluster objects (~10 KB
// each, as the fixture) from the fake in pages of 1000, with a warm client:
// one request per page plus the cacerts setting.
func BenchmarkListClusters(b *testing.B) {
	const n = 10000
	f := newFake(b, false)
	f.Generate(n)
	cfg := config(b, f)
	s := newTestSource(b, "rancher-a", cfg, testOptions{})
	if _, err := s.Clusters(b.Context()); err != nil { // builds the client
		b.Fatal(err)
	}
	f.TakeRequests()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		got, err := s.Clusters(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != n {
			b.Fatalf("listed %d clusters, want %d", len(got), n)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(f.TakeRequests()))/float64(b.N), "requests/listing")
	b.ReportMetric(n, "clusters/listing")
}
