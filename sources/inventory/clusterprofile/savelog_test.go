package clusterprofile

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

// TestSaveLogsWhatItWrote holds the line a save logs: what it wrote, by
// kind, on a real kube-apiserver; nothing for a save with nothing to write.
func TestSaveLogsWhatItWrote(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	var buf bytes.Buffer
	l, err := New(c.cfg, Options{Namespace: c.ns, OwnerID: "owner-1", Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	require.NoError(t, err)
	lines := func() []map[string]any {
		var out []map[string]any
		for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
			if line == "" {
				continue
			}
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m), line)
			out = append(out, m)
		}
		buf.Reset()
		return out
	}
	fleet := ledgertest.Fleet(3)
	n := len(fleet.Clusters)
	require.NoError(t, l.Save(ctx, fleet))
	got := lines()
	require.Len(t, got, 1, "a line for the cold start's save")
	assert.Equal(t, "ledger saved", got[0]["msg"])
	assert.Equal(t, map[string]any{"records": float64(n), "created": float64(n), "applied": float64(0), "deleted": float64(0),
		"statuses": float64(n), "sourceRecords": true, "failed": float64(0)},
		pick(got[0], "records", "created", "applied", "deleted", "statuses", "sourceRecords", "failed"))
	for _, k := range []string{"objectsTook", "deletesTook", "statusesTook", "took"} {
		assert.NotEmpty(t, got[0][k], k)
	}

	require.NoError(t, l.Save(ctx, fleet))
	assert.Empty(t, lines(), "a save with nothing to write logs nothing")

	smaller := ledgertest.Fleet(3)
	smaller.Clusters = smaller.Clusters[1:]
	require.NoError(t, l.Save(ctx, smaller))
	got = lines()
	require.Len(t, got, 1)
	assert.Equal(t, map[string]any{"created": float64(0), "deleted": float64(1), "sourceRecords": true, "failed": float64(0)},
		pick(got[0], "created", "deleted", "sourceRecords", "failed"))

	expired := lease.WithDeadline(ctx, time.Now().Add(-time.Second), nil)
	require.Error(t, l.Save(expired, ledgertest.Fleet(4)))
	got = lines()
	require.Len(t, got, 1, "a failed save says so")
	assert.Equal(t, map[string]any{"level": "WARN", "created": float64(0), "failed": float64(len(ledgertest.Fleet(4).Clusters))}, // every write refused
		pick(got[0], "level", "created", "failed"))
}

func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}
