package aks

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	"github.com/stretchr/testify/require"
)

// BenchmarkRefresh lists 500 clusters over 5 subscriptions (all
// subscriptions discovered, 100 clusters each in two pages of 50) through
// the SDK fakes and reports the ARM calls per refresh: cold (empty CA
// cache) and steady state (every CA cached). The 20ms variant delays every
// answer to show what the concurrency bound buys.
func BenchmarkRefresh(b *testing.B) {
	subs := map[string]armsubscriptions.SubscriptionState{}
	bySub := map[string]pages{}
	for s := range 5 {
		sub := fmt.Sprintf("00000000-0000-0000-0000-%012d", s)
		subs[sub] = armsubscriptions.SubscriptionStateEnabled
		for p := range 2 {
			var page []*armcontainerservice.ManagedCluster
			for c := range 50 {
				page = append(page, managedCluster(sub, fmt.Sprintf("rg-%d", p), fmt.Sprintf("aks-%d-%d-%02d", s, p, c)))
			}
			bySub[sub] = append(bySub[sub], page)
		}
	}
	for _, bc := range []struct {
		name    string
		cold    bool
		latency time.Duration
	}{
		{"cold", true, 0},
		{"steady", false, 0},
		{"cold-20ms", true, 20 * time.Millisecond},
		{"steady-20ms", false, 20 * time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFakeARM(b, staticPages(bySub)).withSubscriptions(subs)
			f.latency = bc.latency
			env := newTestEnv(b, Config{}, f, nil)
			ctx := context.Background()
			if !bc.cold {
				_, err := env.src.Clusters(ctx)
				require.NoError(b, err)
			}
			f.resetCalls()
			n := 0
			for b.Loop() {
				if bc.cold {
					env.src.mu.Lock()
					clear(env.src.cas)
					env.src.mu.Unlock()
				}
				cs, err := env.src.Clusters(ctx)
				require.NoError(b, err)
				require.Len(b, cs, 500)
				n++
			}
			b.ReportMetric(float64(f.totalCalls())/float64(n), "calls/refresh")
			b.ReportMetric(float64(f.Calls("credentials"))/float64(n), "credcalls/refresh")
		})
	}
}
