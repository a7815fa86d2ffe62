package appsetrefresh

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
)

func TestRunLeading(t *testing.T) {
	w := newWorld()
	tr := w.trigger(t)
	le := lease.Config{Namespace: "argocd", Name: "test-refresh", Identity: "me",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 100 * time.Millisecond} // nothing here waits for an expiry
	stop := run(func(ctx context.Context) { assert.NoError(t, tr.RunLeading(ctx, le)) })
	require.Eventually(t, func() bool { return tr.Leader() && len(w.patched()) == 4 }, 5*time.Second, 10*time.Millisecond,
		"leads and makes the pass at start")
	assert.Equal(t, 1.0, testutil.ToFloat64(tr.metrics.leader))
	lease, err := w.kube.CoordinationV1().Leases("argocd").Get(context.Background(), "test-refresh", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "me", *lease.Spec.HolderIdentity)
	stop()
	assert.False(t, tr.Leader())
	assert.Equal(t, 0.0, testutil.ToFloat64(tr.metrics.leader))
}
