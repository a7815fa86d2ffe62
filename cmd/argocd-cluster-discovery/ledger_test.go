package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
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

// TestMemoryLedgerChecksTheSecretsAtStart: with the ledger in memory and
// cluster Secrets on, every start is a start from an empty ledger: the
// first listing of a source is checked against the Secrets this
// installation owns, as an upgrade's is, so a token that answers `200 []`
// after a restart is refused (the source unsynced, a 503) instead of
// serving a 200 without the clusters, and Argo CD deleting their
// Applications.
func TestMemoryLedgerChecksTheSecretsAtStart(t *testing.T) {
	def := config.Default()
	cfg := &def
	require.Equal(t, config.LedgerMemory, cfg.Ledger.Kind)
	cfg.Secrets.Enabled, cfg.Secrets.Namespace, cfg.Secrets.OwnerID = true, "argocd", "owner-1"
	owned := func(id string) *corev1.Secret {
		selector, err := labels.Parse(clustersecret.OwnedSelector(cfg.Secrets.OwnerID))
		require.NoError(t, err)
		reqs, _ := selector.Requirements()
		ls := map[string]string{clustersecret.LabelSource: "fleet"}
		for _, r := range reqs {
			ls[r.Key()] = r.Values().List()[0]
		}
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cluster-" + id, Namespace: "argocd", Labels: ls,
			Annotations: map[string]string{clustersecret.AnnotationClusterID: id}}}
	}
	kube := newKubeAPI(cfg)
	kube.once.Do(func() {}) // its client is this one
	kube.client = fake.NewClientset(owned("x"), owned("y"))

	src, err := static.New(static.Config{Clusters: []static.Cluster{{Name: "a", Server: "https://a.example.com"}}}, "")
	require.NoError(t, err)
	inv, err := inventory.New([]inventory.SourceSpec{{Name: "fleet", Provider: sources.ProviderStatic, Source: src,
		Interval: time.Hour, Timeout: 5 * time.Second}}, inventory.Options{})
	require.NoError(t, err)
	var logs testlog.Buffer
	_, err = attachLedger(cfg, kube, &parts{inv: inv}, slog.New(slog.NewJSONHandler(&logs, nil)))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inv.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return inv.Status().Sources[0].LastError != "" }, 10*time.Second, 10*time.Millisecond)
	st := inv.Status().Sources[0]
	assert.Contains(t, st.LastError, "lacks 2 of the 2 clusters served before it (x, y)")
	assert.False(t, st.Synced, "unsynced: the answer is a 503")
	assert.Empty(t, inv.Snapshot().Clusters)
}
