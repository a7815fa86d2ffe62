package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
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
