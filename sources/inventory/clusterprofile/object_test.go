package clusterprofile

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
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
				"Conflict":            "2026-11-20T08:00:00Z", // still False
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

// TestServedAndConflictConditions: Served says whether the cluster is in
// the answer, not only whether its lifecycle serves it: a newcomer under a
// name another holds, and a second listing of one cluster, are not. The
// Conflict condition says who keeps a contested name.
func TestServedAndConflictConditions(t *testing.T) {
	o := &Options{Namespace: "argocd", OwnerID: "owner-1"}
	fleet := ledgertest.Fleet(1)
	pending, served := fleet.Clusters[0], fleet.Clusters[1]
	require.True(t, served.Served)
	conflict := func(kept string) *inventory.Conflict {
		return &inventory.Conflict{Name: "prod-00", Sources: []string{"eks", "rancher"}, KeptSource: kept}
	}
	contested := func(c inventory.Contest) inventory.Record {
		r := served
		r.Contest = &c
		return r
	}
	for _, tc := range []struct {
		name             string
		r                inventory.Record
		served, conflict string // status/reason
	}{
		{"nobody contests it", served, "True/Served", "False/NoConflict"},
		{"it keeps its name", contested(inventory.Contest{Answered: true, Conflict: conflict("rancher")}), "True/Served", "True/KeepsName"},
		{"another holds its name", contested(inventory.Contest{Conflict: conflict("eks")}), "False/NameConflict", "True/NameTaken"},
		{"none held the name", contested(inventory.Contest{Conflict: conflict("")}), "False/NameConflict", "True/NameUnresolved"},
		{"a second listing of a served cluster", contested(inventory.Contest{Duplicate: &inventory.Duplicate{
			Name: "prod-00", Source: "rancher", KeptName: "payments", KeptSource: "eks", Reason: "cloudID"}}), "False/Duplicate", "False/NoConflict"},
		{"pending", pending, "False/NotServed", "False/NoConflict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := conditionReasons(t, o, &tc.r)
			assert.Equal(t, tc.served, got["Served"])
			assert.Equal(t, tc.conflict, got["Conflict"])
		})
	}
}

// conditionReasons returns "status/reason" by type of the conditions of
// r's desired status; each must have a message.
func conditionReasons(t *testing.T, o *Options, r *inventory.Record) map[string]string {
	t.Helper()
	d, err := desiredObject(o, "p", r, nil, time.Now())
	require.NoError(t, err)
	got := map[string]string{}
	for _, c := range conditionsOf(t, d.status) {
		got[c.Type] = c.Status + "/" + c.Reason
		assert.NotEmpty(t, c.Message, c.Type)
	}
	return got
}

// TestHeldConditionSaysWhoHolds: the Held condition tells a mass drop
// from a departure the breaker holds, and both from one not held.
func TestHeldConditionSaysWhoHolds(t *testing.T) {
	o := &Options{Namespace: "argocd", OwnerID: "owner-1"}
	departing := func(held, blocked bool) inventory.Record {
		r := ledgertest.Fleet(1).Clusters[1]
		r.Missed, r.MissingSince, r.Held, r.Blocked = 2, time.Now(), held, blocked
		return r
	}
	for _, tc := range []struct {
		name string
		r    inventory.Record
		want string // status/reason
	}{
		{"an ordinary departure", departing(false, false), "False/NotHeld"},
		{"a mass drop", departing(true, false), "True/MassDrop"},
		{"held by the departure breaker", departing(true, true), "True/Breaker"},
		{"a mass drop acknowledged, kept by a pin", func() inventory.Record { r := departing(true, false); r.Pinned = true; return r }(), "False/NotHeld"},
		{"a mass drop acknowledged, kept by a dry run", func() inventory.Record { r := departing(true, false); r.DryRun = true; return r }(), "False/NotHeld"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := conditionReasons(t, o, &tc.r)
			assert.Equal(t, "True/Missing", got["Departing"])
			assert.Equal(t, tc.want, got["Held"])
		})
	}
}

// TestPropertiesCarryTheAnswersMetadata: the cluster's labels and
// annotations, as the plugin answer gives them, are properties named by
// their parameter; one the CRD would refuse (an empty value, a value over
// 1,024 characters, a name over 253) is left out, not the status.
func TestPropertiesCarryTheAnswersMetadata(t *testing.T) {
	r := ledgertest.Fleet(1).Clusters[1]
	c := *r.Rendering
	c.Labels = map[string]string{"env": "prod", "example.com/team": "payments", "empty": "", strings.Repeat("k", 240): "long name"}
	c.Annotations = map[string]string{"owner": "team@example.com", "notes": strings.Repeat("n", 1025)}
	r.Rendering = &c
	d, err := desiredObject(&Options{Namespace: "argocd", OwnerID: "owner-1"}, "p", &r, nil, time.Now())
	require.NoError(t, err)
	var st struct {
		Properties []struct{ Name, Value string } `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(d.status, &st))
	got := map[string]string{}
	for _, p := range st.Properties {
		got[p.Name] = p.Value
	}
	for name, value := range map[string]string{
		"metadata.labels.env": "prod", "metadata.labels.example.com/team": "payments",
		"metadata.annotations.owner": "team@example.com", "tenant": "acme", "provider": "rancher",
	} {
		assert.Equal(t, value, got[name], name)
	}
	for _, name := range []string{"metadata.labels.empty", "metadata.labels." + strings.Repeat("k", 240), "metadata.annotations.notes"} {
		assert.NotContains(t, got, name)
	}
}

// conditionsOf reads the conditions of a status.
func conditionsOf(t *testing.T, status []byte) []condition {
	t.Helper()
	var st struct {
		Conditions []condition `json:"conditions"`
	}
	require.NoError(t, json.Unmarshal(status, &st))
	return st.Conditions
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
