package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// TestLedgerConfigDoublesTheRate checks that the ledger's client may write
// twice as fast as the Secrets' (two writes per cluster where a Secret
// takes one), from the defaults and from what an operator sets, and that
// the client's own configuration is left as it was.
func TestLedgerConfigDoublesTheRate(t *testing.T) {
	def := config.Default().Secrets.Client
	for _, tc := range []struct {
		name      string
		qps       float32
		burst     int
		wantQPS   float32
		wantBurst int
	}{
		{name: "the defaults", qps: def.QPS, burst: def.Burst, wantQPS: 400, wantBurst: 800},
		{name: "an operator's", qps: 20, burst: 30, wantQPS: 40, wantBurst: 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := &rest.Config{Host: "https://kube.example.com", QPS: tc.qps, Burst: tc.burst}
			got := ledgerConfig(client)
			assert.Equal(t, tc.wantQPS, got.QPS)
			assert.Equal(t, tc.wantBurst, got.Burst)
			assert.Equal(t, client.Host, got.Host)
			assert.Equal(t, tc.qps, client.QPS, "the client's configuration is not changed")
			assert.Equal(t, tc.burst, client.Burst)
		})
	}
}

// TestStatusOfAFormerLeader: /status adds this process's own listings
// (attempt, duration, clusters listed) and confirmed departures only
// while it leads with the ledger loaded; a replica that led before shows
// the ledger's figures, not its last term's.
func TestStatusOfAFormerLeader(t *testing.T) {
	newInv := func() *inventory.Inventory {
		src, err := static.New(static.Config{Clusters: []static.Cluster{{Name: "a", Server: "https://a.example.com"}}}, "")
		require.NoError(t, err)
		inv, err := inventory.New([]inventory.SourceSpec{{Name: "fleet", Provider: sources.ProviderStatic, Source: src,
			Interval: time.Hour, Timeout: 5 * time.Second}}, inventory.Options{})
		require.NoError(t, err)
		return inv
	}
	view, leader := newInv(), newInv()
	a := answering{view: view, leader: leader}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { leader.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return !a.Status().Sources[0].LastAttempt.IsZero() }, 10*time.Second, 10*time.Millisecond,
		"the leader's own listing, while it leads")
	assert.Equal(t, 1, a.Status().Sources[0].Clusters)

	cancel()
	<-done
	st := a.Status().Sources[0]
	assert.True(t, st.LastAttempt.IsZero(), "not the last term's attempt: %v", st.LastAttempt)
	assert.Zero(t, st.Clusters)
}
