package generator

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// syntheticInventory has n ready clusters spread over three tenants. In
// name order each tenant's clusters are consecutive, and their label shard
// cycles 0, 1, 2: selecting shard=0 picks every third cluster.
func syntheticInventory(t testing.TB, n int) *inventory.Inventory {
	t.Helper()
	cs := make([]sources.Cluster, n)
	tenants := []string{"acme", "globex", "initech"}
	for i := range cs {
		tenant := tenants[i%len(tenants)]
		cs[i] = sources.Cluster{
			Name: fmt.Sprintf("%s-cluster-%05d", tenant, i), Server: fmt.Sprintf("https://c%05d.k8s.example.com", i),
			Tenant: tenant, Project: tenant, Region: "eu-west-1", KubernetesVersion: "v1.31.4", Ready: true,
			Labels:      map[string]string{"tenant": tenant, "env": "prod", "region": "eu-west-1", "shard": strconv.Itoa(i / len(tenants) % 3)},
			Annotations: map[string]string{"owner": "team-" + tenant + "@example.com"},
		}
	}
	return inventoryOf(t, &scripted{steps: []func() ([]sources.Cluster, error){ok(cs...)}})
}

// discardWriter is a reusable ResponseWriter, so that the benchmark measures
// the handler and not a recorder's buffer growth.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *discardWriter) Header() http.Header  { return w.h }
func (w *discardWriter) WriteHeader(code int) { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}

// serveLoop runs h b.N times with the same request and returns ns/op.
func serveLoop(b *testing.B, h http.Handler, body []byte) float64 {
	req := rawRequest(http.MethodPost, GetParamsPath, body, "Bearer "+demoToken)
	rd := bytes.NewReader(body)
	req.Body = io.NopCloser(rd)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rd.Reset(body)
		clear(w.h)
		w.code, w.n = 0, 0
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
	b.SetBytes(int64(w.n))
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// BenchmarkGetParams serves a cached getparams answer for all clusters
// over real loopback HTTP (keep-alive client, body read to the end), through
// the whole stack (echo, auth, metrics, cache lookup) and, in the same run,
// the same bytes from a bare net/http handler. The x-preencoded metric is
// the ratio of the two (target ≤ 1.5 at 10,000 clusters).
func BenchmarkGetParams(b *testing.B) {
	benchAgainstPreencoded(b, []byte(allBody), []int{100, 1000, 10000}, httpLoop, ratio)
}

// BenchmarkGetParamsInProcess measures the handler alone on a cached
// answer (no socket), the same way as the bare handler: the difference is
// the cost of echo, auth, metrics and the cache lookup per request, and
// allocs/op shows that a cached request allocates almost nothing.
func BenchmarkGetParamsInProcess(b *testing.B) {
	benchAgainstPreencoded(b, []byte(allBody), []int{100, 1000, 10000}, serveLoop, overhead)
}

// BenchmarkGetParamsScattered is BenchmarkGetParams and
// BenchmarkGetParamsInProcess for a selection of every third cluster at
// 10,000 clusters: the answer is not one contiguous run of the encoded
// snapshot but 3,334 of them.
func BenchmarkGetParamsScattered(b *testing.B) {
	body := []byte(`{"applicationSetName":"bench","input":{"parameters":{"labelSelector":"shard=0"}}}` + "\n")
	b.Run("loopback", func(b *testing.B) { benchAgainstPreencoded(b, body, []int{10000}, httpLoop, ratio) })
	b.Run("inprocess", func(b *testing.B) { benchAgainstPreencoded(b, body, []int{10000}, serveLoop, overhead) })
}

// allBody asks for every cluster.
const allBody = `{"applicationSetName":"bench","input":{}}` + "\n"

func ratio(ns, baseline float64) (float64, string)    { return ns / baseline, "x-preencoded" }
func overhead(ns, baseline float64) (float64, string) { return ns - baseline, "ns-overhead/op" }

// benchAgainstPreencoded runs loop for body at each number of clusters,
// first on a bare handler writing the pre-encoded answer, then on the
// server, and reports compare(server ns/op, bare ns/op) on the server's
// line.
func benchAgainstPreencoded(b *testing.B, body []byte, sizes []int, loop func(*testing.B, http.Handler, []byte) float64, compare func(ns, baseline float64) (float64, string)) {
	for _, n := range sizes {
		h := newServer(b, syntheticInventory(b, n)).Handler()
		rec := do(h, rawRequest(http.MethodPost, GetParamsPath, body, "Bearer "+demoToken))
		require.Equal(b, http.StatusOK, rec.Code)
		pre := rec.Body.Bytes()
		bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(pre)
		})
		var baseline float64
		b.Run(fmt.Sprintf("clusters=%d/preencoded", n), func(b *testing.B) {
			baseline = loop(b, bare, body)
		})
		b.Run(fmt.Sprintf("clusters=%d/getparams", n), func(b *testing.B) {
			ns := loop(b, h, body)
			if baseline > 0 {
				b.ReportMetric(compare(ns, baseline))
			}
		})
	}
}

// httpLoop POSTs body to h over loopback b.N times and returns ns/op.
func httpLoop(b *testing.B, h http.Handler, body []byte) float64 {
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	var n int64
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+GetParamsPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+demoToken)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	b.SetBytes(n)
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// BenchmarkRender is the cache-miss path: filter and encode a snapshot
// after it changed.
func BenchmarkRender(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		snap := syntheticInventory(b, n).Snapshot()
		f, err := ParseParameters(nil, knownProviders())
		require.NoError(b, err)
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Render(snap, &f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGetParamsCacheMemory reports, as cache-bytes, the live heap a
// server holds after answering the inputs of a typical installation at
// 10,000 clusters: each tenant, everything, and a label selector picking
// every third cluster. It is measured after a collection, so it is what
// stays referenced by the cache, not what the requests allocated.
func BenchmarkGetParamsCacheMemory(b *testing.B) {
	inv := syntheticInventory(b, 10000)
	var bodies [][]byte
	for _, params := range []string{`{"tenant":"acme"}`, `{"tenant":"globex"}`, `{"tenant":"initech"}`, `{}`, `{"labelSelector":"shard=0"}`} {
		bodies = append(bodies, []byte(`{"applicationSetName":"bench","input":{"parameters":`+params+`}}`+"\n"))
	}
	w := &discardWriter{h: http.Header{}}
	var total int64
	for b.Loop() {
		s := newServer(b, inv)
		h := s.Handler()
		before := liveHeap()
		for _, body := range bodies {
			clear(w.h)
			h.ServeHTTP(w, rawRequest(http.MethodPost, GetParamsPath, body, "Bearer "+demoToken))
			if w.code != http.StatusOK {
				b.Fatalf("status %d", w.code)
			}
		}
		total += int64(liveHeap()) - int64(before)
		runtime.KeepAlive(h)
	}
	b.ReportMetric(float64(total)/float64(b.N), "cache-bytes")
}

// liveHeap returns the bytes of live heap objects after a full collection;
// two collections also empty the sync.Pools' victim caches.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
