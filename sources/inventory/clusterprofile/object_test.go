package clusterprofile

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

// TestConditionTimesMoveOnlyWithTheirStatus: a condition's
// lastTransitionTime is the time its status last changed, whether what the
// save remembers comes from its own last write or from the object a new
// leader read (marksOf).
func TestConditionTimesMoveOnlyWithTheirStatus(t *testing.T) {
	o := &Options{Namespace: "argocd", OwnerID: "owner-1"}
	t0 := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	r := ledgertest.Fleet(1).Clusters[1] // prod-00, served, listed
	require.Equal(t, "c-prod-00", r.ID)

	first, err := desiredObject(o, "p", &r, nil, t0)
	require.NoError(t, err)
	read := marksOf(&unstructured.Unstructured{Object: map[string]any{"status": decode(t, first.status)}})

	departing := r
	departing.Missed, departing.MissingSince = 1, t1
	for name, prev := range map[string]*marks{"remembered": &first.marks, "read from the object": read} {
		t.Run(name, func(t *testing.T) {
			d, err := desiredObject(o, "p", &departing, prev, t1)
			require.NoError(t, err)
			times := transitionTimes(t, d.status)
			assert.Equal(t, map[string]string{
				"ControlPlaneHealthy": "2026-11-20T08:00:00Z", // still True
				"Served":              "2026-11-20T08:00:00Z", // still True
				"Departing":           "2026-11-20T09:00:00Z", // False → True
				"Held":                "2026-11-20T08:00:00Z", // still False
			}, times)
		})
	}
	t.Run("a condition that cannot be read starts now", func(t *testing.T) {
		broken := marksOf(&unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Served", "status": "True", "lastTransitionTime": "yesterday"},
			map[string]any{"type": "Held", "status": "Maybe", "lastTransitionTime": "2026-11-20T08:00:00Z"},
		}}}})
		d, err := desiredObject(o, "p", &r, broken, t1)
		require.NoError(t, err)
		assert.Equal(t, "2026-11-20T09:00:00Z", transitionTimes(t, d.status)["Served"])
		assert.Equal(t, "2026-11-20T09:00:00Z", transitionTimes(t, d.status)["Held"])
	})
}

func decode(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// transitionTimes reads the lastTransitionTime of each condition of a
// status, by type.
func transitionTimes(t *testing.T, status []byte) map[string]string {
	t.Helper()
	var st struct {
		Conditions []condition `json:"conditions"`
	}
	require.NoError(t, json.Unmarshal(status, &st))
	out := map[string]string{}
	for _, c := range st.Conditions {
		out[c.Type] = c.LastTransitionTime
	}
	return out
}
